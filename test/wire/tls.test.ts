// TLS on the wire (WEBCCL_TLS=1): the rendezvous store and the TCP mesh over TLS 1.3, keyed by
// the job token or by given certificates. In one process: both work and carry data; a capture
// of a data connection holds no plaintext; another token, an untrusted certificate, or a peer
// without TLS is refused on both ends with a coded error (AUTH_FAILED for credentials,
// PROTOCOL_ERROR for TLS on one end only), promptly. Across processes: --procs and --nnodes jobs
// with WEBCCL_TLS=1 run every collective right (test/fixtures/net-check.mjs), and jobs whose
// ranks disagree fail on every side. Bounds are generous hang guards, never timing claims.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { StoreClient } from '../../src/bootstrap/nodejs/store-client.js';
import { type StoreServerOptions, startStoreServer } from '../../src/bootstrap/nodejs/store-server.js';
import { AUTH_FAIL_REASONS } from '../../src/bootstrap/store-protocol.js';
import type { TlsFiles } from '../../src/core/config.js';
import { WebcclError } from '../../src/core/errors.js';
import { TcpTransport, type TcpTransportOptions } from '../../src/transport/tcp/nodejs/tcp-transport.js';
import { resolveWireTls, type WireTls, wireTls } from '../../src/wire/nodejs/secure-socket.js';
import { freePort } from '../helpers/net.js';

const JOB = 'job-tls';
const TOKEN = 'tls-test-token';
const bytes = (s: string) => new TextEncoder().encode(s);
const byToken = (token = TOKEN, job = JOB) => wireTls(bytes(token), job);
/** A bound well under every default deadline (10 s TLS phase, 120 s connect): a hang guard. */
const PROMPT_MS = 8000;

const tmp = mkdtempSync(join(tmpdir(), 'webccl-tls-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

async function failure(p: Promise<unknown>): Promise<WebcclError> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  if (!WebcclError.is(e)) throw new Error(`expected a WebcclError, got ${String(e)}`);
  return e;
}

/** Resolves with the first refusal the listener reports. */
function refusals<T>() {
  let take!: (r: T) => void;
  const first = new Promise<T>((r) => (take = r));
  return { first, on: (r: T) => take(r) };
}

// ---------------------------------------------------------------- the store

describe('rendezvous store over TLS', () => {
  type Reject = Parameters<NonNullable<StoreServerOptions['onReject']>>[0];
  const servers: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });

  async function store(tls: WireTls | undefined, onReject: (r: Reject) => void = () => {}) {
    const s = await startStoreServer({ token: TOKEN, jobId: JOB, tls, onReject });
    servers.push(s);
    return s;
  }
  const client = (port: number, tls: WireTls | undefined, token = TOKEN) =>
    StoreClient.connect({ host: '127.0.0.1', port, token, jobId: JOB, tls, timeoutMs: 20_000 });

  it('keyed by the token: set, get, wait and add work', async () => {
    const s = await store(byToken());
    const [a, b] = await Promise.all([client(s.port, byToken()), client(s.port, byToken())]);
    const waiting = b.get('k');
    await a.set('k', 'v');
    expect(new TextDecoder().decode(await waiting)).toBe('v');
    expect(await b.add('n', 5)).toBe(5);
    expect(s.stats().authenticated).toBe(2);
    await Promise.all([a.close(), b.close()]);
  });

  it('another token: AUTH_FAILED at the client; the store refuses it as a token mismatch (it claimed this job), both promptly', async () => {
    const seen = refusals<Reject>();
    const s = await store(byToken(), seen.on);
    const t0 = Date.now();
    const e = await failure(client(s.port, byToken('other-token'), 'other-token'));
    expect(e.code).toBe('AUTH_FAILED');
    expect(e.message).toMatch(/the TLS handshake with store at 127\.0\.0\.1:\d+ failed/);
    // The refusal rendezvous turns into rank 0's AUTH_FAILED naming the ranks not joined.
    expect(await seen.first).toMatchObject({ kind: 'auth', reason: AUTH_FAIL_REASONS[2] });
    expect(Date.now() - t0).toBeLessThan(PROMPT_MS);
  });

  it("another job's key: AUTH_FAILED at the client; the store refuses it, but not as a token mismatch", async () => {
    const seen = refusals<Reject>();
    const s = await store(byToken(), seen.on);
    const e = await failure(client(s.port, byToken(TOKEN, 'another-job')));
    expect(e.code).toBe('AUTH_FAILED');
    const r = await seen.first;
    expect(r.kind).toBe('auth');
    expect(r.reason).toMatch(/the TLS handshake with the peer failed/);
  });

  it('the key names the job (a hash of its id), never the token', () => {
    const identity = (w: WireTls) => (w.client.pskCallback as () => { identity: string })().identity;
    expect(identity(byToken())).toBe(identity(byToken('other-token')));
    expect(identity(byToken())).not.toBe(identity(byToken(TOKEN, 'another-job')));
    expect(identity(byToken())).not.toContain(TOKEN);
    expect(identity(byToken())).not.toContain(JOB);
  });

  it('a TLS store and a plain client: PROTOCOL_ERROR naming WEBCCL_TLS at the client, a protocol refusal at the store', async () => {
    const seen = refusals<Reject>();
    const s = await store(byToken(), seen.on);
    const t0 = Date.now();
    const e = await failure(client(s.port, undefined));
    expect(e.code).toBe('PROTOCOL_ERROR');
    expect(e.message).toMatch(/uses TLS \(WEBCCL_TLS=1\)/);
    const r = await seen.first;
    expect(r).toMatchObject({ kind: 'protocol' });
    expect(r.reason).toMatch(/does not use TLS/);
    expect(Date.now() - t0).toBeLessThan(PROMPT_MS);
  });

  it('a plain store and a TLS client: PROTOCOL_ERROR naming WEBCCL_TLS at the client, a protocol refusal at the store', async () => {
    const seen = refusals<Reject>();
    const s = await store(undefined, seen.on);
    const t0 = Date.now();
    const e = await failure(client(s.port, byToken()));
    expect(e.code).toBe('PROTOCOL_ERROR');
    expect(e.message).toMatch(/does not use TLS, and this rank does \(WEBCCL_TLS=1\)/);
    const r = await seen.first;
    expect(r).toMatchObject({ kind: 'protocol' });
    expect(r.reason).toMatch(/uses TLS \(WEBCCL_TLS=1\)/);
    expect(Date.now() - t0).toBeLessThan(PROMPT_MS);
  });
});

// ---------------------------------------------------------------- the mesh

const openTransports: TcpTransport[] = [];
afterEach(() => openTransports.splice(0).forEach((t) => t.close()));

async function listen(rank: number, size: number, extra: Partial<TcpTransportOptions> = {}): Promise<TcpTransport> {
  const t = await TcpTransport.listen({
    rank,
    size,
    jobId: JOB,
    token: TOKEN,
    timeoutMs: 20_000,
    onReject: () => {},
    ...extra,
  });
  openTransports.push(t);
  return t;
}
const fill = (n: number, seed: number) => new Uint8Array(n).map((_, i) => (i * 7 + seed) & 255);
const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a.buffer, a.byteOffset, a.length).equals(b);

/** 3 ranks send each other 8 MiB (and 5 bytes) over `tls`; every byte must arrive. */
async function exchange(extra: (r: number) => Partial<TcpTransportOptions>) {
  const ts = await Promise.all([0, 1, 2].map((r) => listen(r, 3, { nchannels: 2, ...extra(r) })));
  await Promise.all(ts.map((t) => t.connect(ts.map((x) => x.address))));
  for (const n of [5, 8 << 20]) {
    const got = ts.map(() => ts.map(() => new Uint8Array(n)));
    const ops = ts.flatMap((t, r) =>
      ts.flatMap((_, p) =>
        p === r
          ? []
          : [
              t.recv(p, { comm: 0, seq: n, step: 0 }, got[r][p]),
              t.send(p, { comm: 0, seq: n, step: 0 }, fill(n, r * 3 + p)),
            ],
      ),
    );
    await Promise.all(ops);
    for (let r = 0; r < 3; r++)
      for (let p = 0; p < 3; p++)
        if (p !== r) expect(same(got[r][p], fill(n, p * 3 + r)), `rank ${r} from ${p}, ${n} bytes`).toBe(true);
  }
}

describe('TcpTransport over TLS', () => {
  it('keyed by the token: 3 ranks, 2 channels, 5 bytes and 8 MiB each way arrive intact', async () => {
    await exchange(() => ({ tls: byToken() }));
  }, 60_000);

  it('another token: the dialler fails AUTH_FAILED, the acceptor refuses it AUTH_FAILED, promptly', async () => {
    const seen = refusals<WebcclError>();
    const [a, b] = await Promise.all([
      listen(0, 2, { tls: byToken(), onReject: seen.on, timeoutMs: 5000 }),
      listen(1, 2, { tls: byToken('other-token'), token: 'other-token', timeoutMs: 5000 }),
    ]);
    const t0 = Date.now();
    const dialler = failure(b.connect([a.address, b.address]));
    void a.connect([a.address, b.address]).catch(() => undefined);
    const e = await dialler;
    expect(e.code).toBe('AUTH_FAILED');
    expect(e.message).toMatch(/the TLS handshake with rank 0 at 127\.0\.0\.1:\d+ failed/);
    const r = await seen.first;
    expect(r.code).toBe('AUTH_FAILED');
    expect(Date.now() - t0).toBeLessThan(PROMPT_MS);
  });

  it('rank 0 with TLS, rank 1 without: both fail PROTOCOL_ERROR naming WEBCCL_TLS, promptly', async () => {
    const seen = refusals<WebcclError>();
    const [a, b] = await Promise.all([
      listen(0, 2, { tls: byToken(), onReject: seen.on, timeoutMs: 5000 }),
      listen(1, 2, { timeoutMs: 5000 }),
    ]);
    const t0 = Date.now();
    const [ea, eb] = await Promise.all([
      failure(a.connect([a.address, b.address])),
      failure(b.connect([a.address, b.address])),
    ]);
    expect(ea.code).toBe('PROTOCOL_ERROR');
    expect(ea.message).toMatch(
      /rank 1 at 127\.0\.0\.1:\d+ (does not use TLS|closed the connection before TLS began).*WEBCCL_TLS/,
    );
    expect(eb.code).toBe('PROTOCOL_ERROR');
    expect(eb.message).toMatch(/uses TLS \(WEBCCL_TLS=1\)/);
    expect((await seen.first).code).toBe('PROTOCOL_ERROR');
    expect(Date.now() - t0).toBeLessThan(PROMPT_MS);
  });
});

// ---------------------------------------------------------------- what is on the wire

/** A TCP relay that records what the dialler receives from the acceptor (the data direction). */
async function relay(to: { host: string; port: number }) {
  const seen: Buffer[] = [];
  const server = net.createServer((inbound) => {
    const out = net.connect(to.port, to.host);
    inbound.pipe(out);
    out.on('data', (d: Buffer) => seen.push(Buffer.from(d)));
    out.pipe(inbound);
    inbound.on('error', () => out.destroy());
    out.on('error', () => inbound.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    address: { host: '127.0.0.1', port: (server.address() as net.AddressInfo).port },
    bytes: () => Buffer.concat(seen),
    close: () => server.close(),
  };
}

const MARKER = Buffer.from('WEBCCL-PLAINTEXT-MARKER-0123456789');

/** Rank 0 sends 256 KiB of MARKERs to rank 1, which dials rank 0 through a recording relay. */
async function capture(tls: WireTls | undefined): Promise<Buffer> {
  const [a, b] = await Promise.all([listen(0, 2, { tls }), listen(1, 2, { tls })]);
  const r = await relay(a.address);
  try {
    await Promise.all([a.connect([a.address, b.address]), b.connect([r.address, b.address])]);
    const payload = new Uint8Array(256 << 10).map((_, i) => MARKER[i % MARKER.length]);
    const got = new Uint8Array(payload.length);
    await Promise.all([b.recv(0, { comm: 0, seq: 1, step: 0 }, got), a.send(1, { comm: 0, seq: 1, step: 0 }, payload)]);
    expect(same(got, payload)).toBe(true);
    return r.bytes();
  } finally {
    r.close();
  }
}

describe('a capture of a data connection', () => {
  it('plain: the marker is on the wire (the capture sees the data)', async () => {
    expect((await capture(undefined)).includes(MARKER)).toBe(true);
  });

  it('with TLS: after the plain notice, only TLS records (0x16 0x03 ...), and no marker anywhere', async () => {
    const wire = await capture(byToken());
    expect(wire.includes(MARKER)).toBe(false);
    expect(wire.includes(MARKER.subarray(0, 12))).toBe(false);
    // The acceptor's notice is a REFUSE frame (kind 3) of the plain protocol; then its ServerHello.
    expect(wire[0]).toBe(3);
    const after = 5 + wire.readUInt32LE(1);
    expect([wire[after], wire[after + 1]]).toEqual([0x16, 0x03]);
  });
});

// ---------------------------------------------------------------- certificates

const haveOpenssl = spawnSync('openssl', ['version'], { encoding: 'utf8' }).status === 0;
if (!haveOpenssl) console.warn('tls: no openssl binary on PATH: the given-certificate tests are skipped');

/** A CA and two rank certificates signed by it, plus a certificate from another CA. */
function makeCerts(): { ca: string; ranks: TlsFiles[]; stranger: TlsFiles } {
  const dir = mkdtempSync(join(tmp, 'certs-'));
  const f = (n: string) => join(dir, n);
  const ssl = (args: string[]) => {
    const r = spawnSync('openssl', args, { encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
  };
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  for (const ca of ['ca', 'other-ca'])
    ssl([
      'req',
      '-x509',
      ...ec,
      '-keyout',
      f(`${ca}.key`),
      '-out',
      f(`${ca}.crt`),
      '-days',
      '2',
      '-subj',
      `/CN=webccl test ${ca}`,
    ]);
  const issue = (name: string, ca: string): TlsFiles => {
    ssl(['req', ...ec, '-keyout', f(`${name}.key`), '-out', f(`${name}.csr`), '-subj', `/CN=${name}`]);
    ssl([
      'x509',
      '-req',
      '-in',
      f(`${name}.csr`),
      '-CA',
      f(`${ca}.crt`),
      '-CAkey',
      f(`${ca}.key`),
      '-CAcreateserial',
      '-out',
      f(`${name}.crt`),
      '-days',
      '2',
    ]);
    return { cert: f(`${name}.crt`), key: f(`${name}.key`), ca: f(`${ca}.crt`) };
  };
  return {
    ca: f('ca.crt'),
    ranks: [0, 1, 2].map((r) => issue(`rank-${r}`, 'ca')),
    stranger: issue('stranger', 'other-ca'),
  };
}

describe.skipIf(!haveOpenssl)('given certificates (mutual TLS)', () => {
  const certs = haveOpenssl ? makeCerts() : undefined;
  const byCerts = (files: TlsFiles) => wireTls(bytes(TOKEN), JOB, files);

  it('3 ranks with certificates of one CA: 8 MiB each way arrives intact', async () => {
    await exchange((r) => ({ tls: byCerts(certs!.ranks[r]) }));
  }, 60_000);

  it("a certificate of another CA (trusting the job's CA): AUTH_FAILED on both ends, promptly", async () => {
    const seen = refusals<WebcclError>();
    const [a, b] = await Promise.all([
      listen(0, 2, { tls: byCerts(certs!.ranks[0]), onReject: seen.on, timeoutMs: 5000 }),
      listen(1, 2, { tls: byCerts({ ...certs!.stranger, ca: certs!.ca }), timeoutMs: 5000 }),
    ]);
    const t0 = Date.now();
    const dialler = failure(b.connect([a.address, b.address]));
    void a.connect([a.address, b.address]).catch(() => undefined);
    const e = await dialler;
    expect(e.code).toBe('AUTH_FAILED');
    expect((await seen.first).code).toBe('AUTH_FAILED');
    expect((await seen.first).message).toMatch(/certificate/);
    expect(Date.now() - t0).toBeLessThan(PROMPT_MS);
  });

  it('a rank that does not trust the CA of the others: AUTH_FAILED at the dialler', async () => {
    const [a, b] = await Promise.all([
      listen(0, 2, { tls: byCerts(certs!.ranks[0]), timeoutMs: 5000 }),
      listen(1, 2, { tls: byCerts({ ...certs!.ranks[1], ca: certs!.stranger.ca }), timeoutMs: 5000 }),
    ]);
    void a.connect([a.address, b.address]).catch(() => undefined);
    const e = await failure(b.connect([a.address, b.address]));
    expect(e.code).toBe('AUTH_FAILED');
    expect(e.details.tls).toBeDefined();
  });

  it('a key that does not match its certificate, or a missing file: INVALID_ARGUMENT naming the file', () => {
    const mixed = { ...certs!.ranks[0], key: certs!.ranks[1].key };
    expect(() => byCerts(mixed)).toThrow(expect.objectContaining({ code: 'INVALID_ARGUMENT' }));
    const missing = { ...certs!.ranks[0], cert: join(tmp, 'nope.crt') };
    expect(() => byCerts(missing)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT', details: { path: missing.cert } }),
    );
  });
});

// ---------------------------------------------------------------- settings

describe('WEBCCL_TLS and its certificate variables', () => {
  const names = ['WEBCCL_TLS', 'WEBCCL_TLS_CERT', 'WEBCCL_TLS_KEY', 'WEBCCL_TLS_CA'];
  const saved = Object.fromEntries(names.map((n) => [n, process.env[n]]));
  afterEach(() => {
    for (const n of names) {
      if (saved[n] === undefined) delete process.env[n];
      else process.env[n] = saved[n];
    }
  });
  const resolve = (env: Record<string, string>, option?: boolean | TlsFiles) => {
    for (const n of names) delete process.env[n];
    Object.assign(process.env, env);
    return resolveWireTls(option, bytes(TOKEN), JOB);
  };
  const refused = (env: Record<string, string>, option?: boolean | TlsFiles) => {
    try {
      resolve(env, option);
    } catch (e) {
      return (e as WebcclError).code;
    }
    return 'accepted';
  };

  it('unset or 0: plain; 1: keyed by the token; the option overrides the variable', () => {
    expect(resolve({})).toBeUndefined();
    expect(resolve({ WEBCCL_TLS: '0' })).toBeUndefined();
    expect(resolve({ WEBCCL_TLS: '1' })?.keyedBy).toBe('token');
    expect(resolve({}, true)?.keyedBy).toBe('token');
    expect(resolve({ WEBCCL_TLS: '1' }, false)).toBeUndefined();
  });

  it("initCommGroup({ tls: 'yes' }) is refused before anything joins, naming the option", async () => {
    const { initCommGroup } = await import('../../src/index.js');
    const e = await failure(initCommGroup({ tls: 'yes' as unknown as boolean }));
    expect(e.code).toBe('INVALID_ARGUMENT');
    expect(e.message).toMatch(/\btls\b/);
  });

  it('refused: WEBCCL_TLS=yes, certificate variables without WEBCCL_TLS=1, some but not all of them, an unknown or missing tls field', () => {
    expect(refused({ WEBCCL_TLS: 'yes' })).toBe('INVALID_ARGUMENT');
    expect(refused({ WEBCCL_TLS_CERT: '/x.crt', WEBCCL_TLS_KEY: '/x.key', WEBCCL_TLS_CA: '/ca.crt' })).toBe(
      'INVALID_ARGUMENT',
    );
    expect(refused({ WEBCCL_TLS: '1', WEBCCL_TLS_CERT: '/x.crt' })).toBe('INVALID_ARGUMENT');
    expect(refused({}, 'yes' as unknown as boolean)).toBe('INVALID_ARGUMENT');
    expect(refused({}, { cert: '/x.crt', key: '/x.key', ca: '/ca.crt', passphrase: 'p' } as TlsFiles)).toBe(
      'INVALID_ARGUMENT',
    );
    expect(refused({}, {} as TlsFiles)).toBe('INVALID_ARGUMENT');
  });
});

// ---------------------------------------------------------------- jobs across processes

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = join(root, 'bin', 'webccl.js');
const check = join(root, 'test', 'fixtures', 'net-check.mjs');
const failing = join(root, 'test', 'fixtures', 'net-fail.mjs');
const node = process.execPath;

type Env = Record<string, string | undefined>;
const LAUNCHER_VARS = [
  'RANK',
  'WORLD_SIZE',
  'LOCAL_RANK',
  'LOCAL_WORLD_SIZE',
  'MASTER_ADDR',
  'MASTER_PORT',
  'TORCHELASTIC_RUN_ID',
  'XDG_RUNTIME_DIR',
];
/** This environment without any launcher's or webccl's variables, HOME in a temp dir, plus `extra`. */
function env(extra: Env = {}): Env {
  const e: Env = { ...process.env, HOME: join(tmp, 'home') };
  for (const k of Object.keys(e))
    if (LAUNCHER_VARS.includes(k) || /^(WEBCCL_|OMPI_|PMIX_|PMI_|MPI_LOCAL|SLURM_)/.test(k)) delete e[k];
  return { ...e, ...extra };
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  hung: boolean;
}
const children = new Set<ChildProcess>();
afterAll(() =>
  children.forEach((c) => {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      /* gone */
    }
  }),
);

/** Runs a command in its own process group; one still running after `guardMs` is killed as hung. */
function run(args: string[], e: Env, guardMs = 50_000): Promise<Run> {
  return new Promise((resolve) => {
    const c = spawn(node, args, { cwd: root, env: e, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    children.add(c);
    let stdout = '';
    let stderr = '';
    let hung = false;
    c.stdout!.on('data', (d) => (stdout += d));
    c.stderr!.on('data', (d) => (stderr += d));
    const guard = setTimeout(() => {
      hung = true;
      try {
        process.kill(-c.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }, guardMs);
    c.on('close', (code) => {
      clearTimeout(guard);
      children.delete(c);
      resolve({ code, stdout, stderr, hung });
    });
  });
}

const okRanks = (out: string, n: number) =>
  [...out.matchAll(/^ok rank (\d+) of (\d+) /gm)]
    .filter((m) => Number(m[2]) === n)
    .map((m) => Number(m[1]))
    .sort((a, b) => a - b);
const range = (n: number, from = 0) => Array.from({ length: n }, (_, i) => from + i);
const secured = /TLS keyed by the job token/g;

describe('jobs across processes with WEBCCL_TLS=1', () => {
  it.each([2, 3])(
    '--procs -n %i: every collective checks out, over TLS',
    async (n) => {
      const r = await run(
        [bin, 'run', '--procs', '-n', String(n), check],
        env({ WEBCCL_TLS: '1', WEBCCL_DEBUG: 'INFO' }),
      );
      expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
      expect(okRanks(r.stdout, n)).toEqual(range(n));
      expect(r.stderr.match(secured)).toHaveLength(n);
    },
    90_000,
  );

  it('--procs -n 2 without WEBCCL_TLS, initCommGroup({ tls: true }): the job runs over TLS', async () => {
    const r = await run(
      [bin, 'run', '--procs', '-n', '2', join(root, 'test', 'wire', 'fixtures', 'tls-option.mjs')],
      env({ WEBCCL_DEBUG: 'INFO' }),
    );
    expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
    expect(r.stdout.match(/^ok rank \d of 2 sum 3$/gm)).toHaveLength(2);
    expect(r.stderr.match(secured)).toHaveLength(2);
  }, 60_000);

  it.skipIf(!haveOpenssl)(
    '--procs -n 2 with WEBCCL_TLS=1 and WEBCCL_TLS_CERT/KEY/CA: every collective checks out, over mutual TLS',
    async () => {
      const files = makeCerts().ranks[0];
      const r = await run(
        [bin, 'run', '--procs', '-n', '2', check, '--sizes', '1000'],
        env({
          WEBCCL_TLS: '1',
          WEBCCL_TLS_CERT: files.cert,
          WEBCCL_TLS_KEY: files.key,
          WEBCCL_TLS_CA: files.ca,
          WEBCCL_DEBUG: 'INFO',
        }),
      );
      expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
      expect(okRanks(r.stdout, 2)).toEqual([0, 1]);
      expect(r.stderr.match(/TLS keyed by the certificates/g)).toHaveLength(2);
    },
    60_000,
  );

  it('--nnodes 2 --nproc-per-node 2: every collective checks out, hierarchical and ring, over TLS', async () => {
    const port = await freePort();
    const e = env({ WEBCCL_TLS: '1', WEBCCL_DEBUG: 'INFO', WEBCCL_TOKEN: 'nodes-token' });
    const [a, b] = await Promise.all(
      [0, 1].map((k) =>
        run(
          [
            bin,
            'run',
            '--nnodes',
            '2',
            '--node-rank',
            String(k),
            '--nproc-per-node',
            '2',
            '--master-addr',
            '127.0.0.1',
            '--master-port',
            String(port),
            check,
            '--expect-default',
            'hierarchical',
            '--algo',
            'ring',
          ],
          e,
        ),
      ),
    );
    for (const [k, r] of [a, b].entries()) {
      expect({ node: k, code: r.code, hung: r.hung }, r.stderr).toEqual({ node: k, code: 0, hung: false });
      expect(okRanks(r.stdout, 4)).toEqual(range(2, 2 * k));
      expect(r.stderr.match(secured)).toHaveLength(2);
    }
  }, 120_000);

  /** Ranks 0 and 1 started by hand with torchrun's variables, `each[k]` added to rank k's. */
  async function byHand(each: Env[], connectTimeoutMs = 6000): Promise<Run[]> {
    const port = await freePort();
    // Long enough for rank 0's store to be up under load, so rank 1 meets it (not the deadline).
    const common = {
      WORLD_SIZE: '2',
      MASTER_ADDR: '127.0.0.1',
      MASTER_PORT: String(port),
      WEBCCL_CONNECT_TIMEOUT_MS: String(connectTimeoutMs),
      WEBCCL_TOKEN: 'token-a',
      WEBCCL_JOB_ID: 'job-a',
    };
    const rs = await Promise.all(
      each.map((extra, k) => run([failing, 'join'], env({ ...common, RANK: String(k), ...extra }), 30_000)),
    );
    rs.forEach((r, k) =>
      expect({ rank: k, code: r.code, hung: r.hung, joined: r.stdout.includes('joined') }, r.stderr).toEqual({
        rank: k,
        code: 1,
        hung: false,
        joined: false,
      }),
    );
    return rs;
  }

  it('rank 1 has another WEBCCL_TOKEN: it fails AUTH_FAILED in the TLS handshake; rank 0 fails AUTH_FAILED naming rank 1 at once, not at the connect deadline', async () => {
    const t0 = Date.now();
    const [r0, r1] = await byHand([{ WEBCCL_TLS: '1' }, { WEBCCL_TLS: '1', WEBCCL_TOKEN: 'token-b' }], 60_000);
    expect(Date.now() - t0).toBeLessThan(20_000); // both have exited, far before the 60 s deadline
    expect(r1.stderr).toMatch(
      /rank 1 cannot reach the rendezvous store at 127\.0\.0\.1:\d+: .*TLS handshake with store at .* failed.*\[AUTH_FAILED\]/,
    );
    expect(r1.stderr).toMatch(/code: 'AUTH_FAILED'/);
    // The store knew the key rank 1 named was this job's: it refused a token mismatch.
    expect(r0.stderr).toMatch(/refused .*token mismatch/);
    expect(r0.stderr).toMatch(
      /rank 0: the store at .* refused .*token mismatch.*rank 1 of 2 has not joined.*\[AUTH_FAILED\]/,
    );
    expect(r0.stderr).toMatch(/code: 'AUTH_FAILED'/);
    expect(r0.stderr).toMatch(/missing: \[ 1 \]/);
  }, 60_000);

  for (const [tlsRank, plainRank] of [
    [0, 1],
    [1, 0],
  ]) {
    it(`rank ${tlsRank} with WEBCCL_TLS=1, rank ${plainRank} without: both fail, each naming the mismatch or the rank`, async () => {
      const rs = await byHand([0, 1].map((k) => (k === tlsRank ? { WEBCCL_TLS: '1' } : {})));
      const client = rs[1];
      // Rank 1 meets rank 0's store: it names the mismatch, whichever end has TLS.
      expect(client.stderr).toMatch(
        /rank 1 cannot reach the rendezvous store .*(uses TLS \(WEBCCL_TLS=1\)|does not use TLS, and this rank does).*\[PROTOCOL_ERROR\]/,
      );
      // The store names it in its refusal; rank 0 fails with a code.
      expect(rs[0].stderr).toMatch(/refused .*(does not use TLS|uses TLS \(WEBCCL_TLS=1\))/);
      expect(rs[0].stderr).toMatch(/rank 0\b.*\[(PROTOCOL_ERROR|CONNECT_FAILED|ABORTED)\]/);
    }, 60_000);
  }
});
