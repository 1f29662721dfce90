// `webccl serve --token`: the job's rendezvous store, one table behind two carriers, WebSocket
// on the HTTP port's /store (pages, and Node through `ws`) and TCP on the store port (Node ranks).
// A value set over one is read over the other, a blocked wait is released from the other, and a
// wrong token, a wrong job id or an oversized frame is refused on both ends, counted and named.
// In Chromium, a page served by it joins the store through /webccl.js. Finding the store from
// serve's HTTP port (src/bootstrap/nodejs/served-store.ts): serve answers /webccl-job; a store,
// which speaks first, and a port where nothing listens are not taken for it; an answer that is
// not serve's is not trusted.

import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { type AddressInfo, createServer as createTcpServer, type Socket, connect as tcpConnect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { connectStore } from '../../src/bootstrap/nodejs/connect-store.js';
import { askServedJob, parseAnswer } from '../../src/bootstrap/nodejs/served-store.js';
import { StoreClient } from '../../src/bootstrap/nodejs/store-client.js';
import { startStoreServer } from '../../src/bootstrap/nodejs/store-server.js';
import { attachStoreWebSocket, maxStoreMessage } from '../../src/bootstrap/nodejs/store-websocket.js';
import { ACCEPTS, decode, FrameParser, Kind, type Message } from '../../src/bootstrap/store-protocol.js';
import { connectStoreWith } from '../../src/bootstrap/store-websocket-client.js';
import { WebcclError } from '../../src/core/errors.js';
import { type Served, startServe } from '../../src/launch/serve/serve-job.js';
import { haveChromium, warnIfNoChromium, withTab } from '../helpers/chromium.js';
import { freePort } from '../helpers/net.js';
import { outputMatch } from '../helpers/output-match.js';
import { upgradeStatus } from '../helpers/upgrade-status.js';

const TOKEN = 'serve-token';
const JOB = 'serve-job';
const root = fileURLToPath(new URL('../..', import.meta.url));
const browserBuild = join(root, 'dist', 'browser', 'index.js');
warnIfNoChromium('the page tests of serve-store');
const text = (b: Uint8Array) => new TextDecoder().decode(b);

async function rejected(p: Promise<unknown>): Promise<WebcclError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(WebcclError.is(e), String(e)).toBe(true);
  return e as WebcclError;
}

const tmp = mkdtempSync(join(tmpdir(), 'webccl-serve-store-'));
// A page that joins the store with the token in its address, sets a key and waits for one.
writeFileSync(
  join(tmp, 'store.html'),
  `<!doctype html><script type="module">
import { connectStore } from '/webccl.js';
const q = new URLSearchParams(location.search);
try {
  const store = await connectStore({ url: 'ws://' + location.host + '/store', token: q.get('token'), jobId: q.get('job'), timeoutMs: 60000 });
  await store.set('from-page', 'hello from the page');
  const got = new TextDecoder().decode(await store.get('from-node'));
  await store.close();
  window.storeResult = { got };
} catch (e) {
  window.storeResult = { code: e.code, reason: e.details && e.details.reason };
}
</script>`,
);

let served: Served;
const refusals: { remote: string; kind: string; reason: string }[] = [];
beforeAll(async () => {
  served = await startServe({
    dir: tmp,
    port: 0,
    browserBuild,
    store: { token: TOKEN, jobId: JOB, port: 0, onReject: (r) => refusals.push(r) },
  });
});
afterAll(async () => {
  await served?.close();
  rmSync(tmp, { recursive: true, force: true });
});

const tcp = (o: { token?: string; jobId?: string } = {}) =>
  StoreClient.connect({
    host: served.store!.host,
    port: served.store!.port,
    token: o.token ?? TOKEN,
    jobId: o.jobId ?? JOB,
    timeoutMs: 10_000,
  });
const ws = (o: { token?: string; jobId?: string; url?: string } = {}) =>
  connectStore({ url: o.url ?? served.store!.url, token: o.token ?? TOKEN, jobId: o.jobId ?? JOB, timeoutMs: 10_000 });

/** A hand-driven WebSocket peer of the store: frames it receives, decoded. */
async function rawWs(url: string) {
  const s = new WebSocket(url);
  s.binaryType = 'nodebuffer';
  const frames: Message[] = [];
  const parser = new FrameParser(1 << 20, [...ACCEPTS.clientHandshake, ...ACCEPTS.clientReady], (k, b) =>
    frames.push(decode(k, b, 1 << 20)),
  );
  s.on('message', (d: Buffer) => parser.push(d));
  s.on('error', () => {});
  const closed = new Promise<number>((r) => s.on('close', (code) => r(code)));
  await new Promise<void>((r, j) => {
    s.once('open', () => r());
    s.once('error', j);
  });
  while (frames.length === 0) await new Promise((r) => setTimeout(r, 5));
  expect(frames[0].type).toBe('hello');
  return { s, frames, closed };
}

describe('webccl serve --token: one store, two carriers', () => {
  it('a value set over WebSocket is read over TCP, and the other way', async () => {
    const [a, b] = [await ws(), await tcp()];
    await a.set('via-ws', 'from ws');
    expect(text(await b.get('via-ws'))).toBe('from ws');
    await b.set('via-tcp', Uint8Array.of(0, 1, 255));
    expect([...(await a.get('via-tcp'))]).toEqual([0, 1, 255]);
    expect(await a.add('count', 2)).toBe(2);
    expect(await b.add('count', 3)).toBe(5);
    expect(await b.compareSet('cas', null, 'x').then(text)).toBe('x');
    expect(await a.compareSet('cas', 'x', 'y').then(text)).toBe('y');
    expect(served.store!.server.stats().connections).toBeGreaterThanOrEqual(2);
    await Promise.all([a.close(), b.close()]);
  });

  it('a wait blocked on one carrier is released by a set on the other', async () => {
    const [a, b] = [await ws(), await tcp()];
    const overWs = a.wait(['w1', 'w2']);
    const overTcp = b.get('back');
    await b.set('w1', '');
    await b.set('w2', '');
    await overWs;
    await a.set('back', 'released');
    expect(text(await overTcp)).toBe('released');
    await Promise.all([a.close(), b.close()]);
  });

  it('a wrong token or job id is AUTH_FAILED on both ends, with the reason, over either carrier', async () => {
    const before = served.store!.server.stats().authFailures;
    const from = refusals.length;
    for (const [connect, carrier] of [
      [ws, 'ws'],
      [tcp, 'tcp'],
    ] as const) {
      const e1 = await rejected(connect({ token: 'wrong' }));
      expect({ carrier, code: e1.code, reason: e1.details.reason }).toEqual({
        carrier,
        code: 'AUTH_FAILED',
        reason: expect.stringMatching(/^token mismatch/),
      });
      const e2 = await rejected(connect({ jobId: 'another-job' }));
      expect({ carrier, code: e2.code, reason: e2.details.reason }).toEqual({
        carrier,
        code: 'AUTH_FAILED',
        reason: 'job id mismatch',
      });
    }
    expect(served.store!.server.stats().authFailures - before).toBe(4);
    const got = refusals.slice(from);
    expect(got.map((r) => [r.kind, r.reason.split(' ')[0]])).toEqual([
      ['auth', 'token'],
      ['auth', 'job'],
      ['auth', 'token'],
      ['auth', 'job'],
    ]);
    expect(got[0].remote).toMatch(/^ws 127\.0\.0\.1:\d+$/); // a WebSocket peer is named as one
    expect(got[2].remote).toMatch(/^127\.0\.0\.1:\d+$/);
  });

  it('an upgrade on another path is refused with 404; /store is accepted; without a token every upgrade is 404', async () => {
    const http = served.http.url.replace(/^http/, 'ws');
    expect(await upgradeStatus(`${http}/other`)).toBe(404);
    expect(await upgradeStatus(`${http}/store/x`)).toBe(404);
    expect(await upgradeStatus(`${http}/store`)).toBe(101);
    const pagesOnly = await startServe({ dir: tmp, port: 0, browserBuild });
    try {
      expect(pagesOnly.store).toBeUndefined();
      expect(await upgradeStatus(`${pagesOnly.http.url.replace(/^http/, 'ws')}/store`)).toBe(404);
      // A client keeps retrying a 404 (a store may come up later) and names the URL at its deadline.
      const e = await rejected(
        connectStore({
          url: `${pagesOnly.http.url.replace(/^http/, 'ws')}/store`,
          token: TOKEN,
          jobId: JOB,
          timeoutMs: 300,
        }),
      );
      expect(e.code).toBe('CONNECT_FAILED');
      expect(e.details.url).toContain('/store');
    } finally {
      await pagesOnly.close();
    }
  });

  it('connectStore refuses bad options before connecting', async () => {
    const bad = [
      [{ url: 'http://127.0.0.1:1/store', token: 't', jobId: 'j' }, 'url'],
      [{ url: 'ws://127.0.0.1:1/store', jobId: 'j' }, 'token'],
      [{ url: 'ws://127.0.0.1:1/store', token: 't', jobId: 'j', timeoutMs: -1 }, 'timeoutMs'],
      [{ url: 'ws://127.0.0.1:1/store', token: 't', jobId: 'j', maxValueBytes: 0 }, 'maxValueBytes'],
      [{ url: 'ws://127.0.0.1:1/store', token: 't', jobId: 'j', tokn: 1 }, 'tokn'],
    ] as const;
    for (const [o, option] of bad) {
      const e = await rejected(connectStore(o as never));
      expect({ option, code: e.code, at: e.details.option }).toEqual({ option, code: 'INVALID_ARGUMENT', at: option });
    }
    expect((await rejected(connectStore({ url: 'ws://127.0.0.1:1/store', token: '', jobId: 'j' }))).code).toBe(
      'INVALID_ARGUMENT',
    );
  });

  it('without WebCrypto (a page outside a secure context) or without a WebSocket, connectStore is UNSUPPORTED saying why', async () => {
    const o = { url: served.store!.url, token: TOKEN, jobId: JOB, timeoutMs: 10_000 };
    const real = globalThis.crypto;
    Object.defineProperty(globalThis, 'crypto', {
      value: { getRandomValues: real.getRandomValues.bind(real) },
      configurable: true,
      writable: true,
    });
    let e: WebcclError;
    try {
      e = await rejected(connectStore(o));
    } finally {
      Object.defineProperty(globalThis, 'crypto', { value: real, configurable: true, writable: true });
    }
    expect(e.code).toBe('UNSUPPORTED');
    expect(e.message).toMatch(/secure context/);
    const none = await rejected(connectStoreWith(undefined, o));
    expect(none.code).toBe('UNSUPPORTED');
    expect(none.message).toMatch(/WebSocket/);
    const c = await ws(); // and with both, it connects
    await c.close();
  });
});

describe('the store over WebSocket: limits checked before allocation', () => {
  it('a frame announcing more than its kind may carry is refused from its header, before or after the handshake', async () => {
    const before = served.store!.server.stats().protocolErrors;
    const from = refusals.length;
    const peer = await rawWs(served.store!.url);
    const header = Buffer.alloc(5);
    header.writeUInt8(Kind.auth, 0);
    header.writeUInt32LE(1_000_000_000, 1); // a gigabyte announced, five bytes sent
    peer.s.send(header);
    await peer.closed;
    expect(peer.frames[1]).toMatchObject({
      type: 'protocolError',
      message: expect.stringContaining('over its limit'),
    });
    expect(served.store!.server.stats().protocolErrors - before).toBe(1);
    expect(refusals.slice(from)).toEqual([
      { remote: expect.stringMatching(/^ws /), kind: 'protocol', reason: expect.stringContaining('over its limit') },
    ]);
    // The store serves on.
    const c = await ws();
    await c.set('after', 'oversize');
    expect(text(await c.get('after'))).toBe('oversize');
    await c.close();
  });

  it('a WebSocket message over the largest store frame is refused by its length, counted, and the store serves on', async () => {
    const rejects: string[] = [];
    const store = await startStoreServer({
      token: TOKEN,
      jobId: JOB,
      maxValueBytes: 1024,
      onReject: (r) => rejects.push(`${r.kind}: ${r.reason}`),
    });
    const http = createServer();
    const upgrades = attachStoreWebSocket(http, store);
    await new Promise<void>((r) => http.listen(0, '127.0.0.1', r));
    const url = `ws://127.0.0.1:${(http.address() as AddressInfo).port}/store`;
    try {
      const limit = maxStoreMessage(1024);
      expect(limit).toBe(5 + (1 << 20)); // with 1 KiB values, a WAIT's keys make the largest frame
      const peer = await rawWs(url);
      peer.s.send(Buffer.alloc(limit + 1));
      expect(await peer.closed).toBe(1009); // "message too big"
      expect(rejects).toEqual([`protocol: a WebSocket message over the limit of ${limit} bytes`]);
      expect(store.stats().protocolErrors).toBe(1);
      const c = await connectStore({ url, token: TOKEN, jobId: JOB, timeoutMs: 10_000 });
      // the client knows the server's limit
      expect((await rejected(c.set('k', new Uint8Array(2048)))).code).toBe('INVALID_ARGUMENT');
      await c.set('k', new Uint8Array(1024));
      expect((await c.get('k')).length).toBe(1024);
      await c.close();
    } finally {
      upgrades.close();
      await Promise.all([store.close(), new Promise<void>((r) => http.close(() => r()))]);
    }
  });
});

describe('webccl serve --token: the built command', () => {
  it('hosts the store on both carriers, prints both addresses and a fresh job id, and logs a refused page', async () => {
    const bin = join(root, 'bin', 'webccl.js');
    const child = spawn(process.execPath, [bin, 'serve', tmp, '--port', '0'], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, WEBCCL_TOKEN: TOKEN, WEBCCL_JOB_ID: undefined },
    });
    let err = '';
    child.stderr.setEncoding('utf8').on('data', (d) => (err += d));
    try {
      const m = await outputMatch(
        child.stdout,
        /job "([^"]+)" store at (ws:\/\/127\.0\.0\.1:\d+\/store) .* tcp 127\.0\.0\.1:(\d+)/,
      );
      const [, jobId, url, port] = m;
      expect(jobId).toMatch(/^serve-[0-9a-f]{12}$/);
      const a = await connectStore({ url, token: TOKEN, jobId, timeoutMs: 10_000 });
      const b = await StoreClient.connect({
        host: '127.0.0.1',
        port: Number(port),
        token: TOKEN,
        jobId,
        timeoutMs: 10_000,
      });
      const waiting = b.wait(['from-ws']);
      await a.set('from-ws', 'v');
      await waiting;
      expect(text(await b.get('from-ws'))).toBe('v');
      await Promise.all([a.close(), b.close()]);
      expect((await rejected(connectStore({ url, token: 'wrong', jobId, timeoutMs: 10_000 }))).details.reason).toMatch(
        /^token mismatch/,
      );
      for (let i = 0; i < 200 && !err.includes('[AUTH_FAILED]'); i++) await new Promise((r) => setTimeout(r, 25));
      expect(err).toMatch(/refused ws 127\.0\.0\.1:\d+: token mismatch.*\[AUTH_FAILED\]/);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await new Promise((r) => child.once('exit', (c) => r(c)))).toBe(0);
  }, 60_000);
});

describe('webccl serve --token: the default job id', () => {
  it('on a fixed port it is HOST:STORE_PORT, what Node ranks (MASTER_ADDR:MASTER_PORT) and pages (master ws://HOST:P, P + 1) take by default', async () => {
    const port = await freePort();
    const child = spawn(process.execPath, [join(root, 'bin', 'webccl.js'), 'serve', tmp, '--port', String(port)], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, WEBCCL_TOKEN: TOKEN, WEBCCL_JOB_ID: undefined },
    });
    try {
      const [out] = await outputMatch(child.stdout, /job .* store at .*\n/);
      expect(out).toContain(`job "127.0.0.1:${port + 1}" store at ws://127.0.0.1:${port}/store`);
    } finally {
      child.kill('SIGTERM');
    }
  }, 60_000);
});

describe.skipIf(!haveChromium)('webccl serve --token: a page joins the store (Chromium)', () => {
  it('a page sets a key a Node TCP client reads and waits for a key the Node client sets; a wrong token is AUTH_FAILED on both ends', async () => {
    const node = await tcp();
    try {
      await withTab(async (tab, errors) => {
        await tab.goto(`${served.http.url}/store.html?token=${TOKEN}&job=${JOB}`);
        expect(text(await node.get('from-page', { timeoutMs: 60_000 }))).toBe('hello from the page');
        await node.set('from-node', 'hello from node');
        const got = await tab
          .waitForFunction(() => (window as any).storeResult, null, { timeout: 60_000 })
          .then((h) => h.jsonValue());
        expect(errors).toEqual([]);
        expect(got).toEqual({ got: 'hello from node' });

        const before = served.store!.server.stats().authFailures;
        const from = refusals.length;
        const wrong = await tab.context().newPage();
        await wrong.goto(`${served.http.url}/store.html?token=wrong&job=${JOB}`);
        const refused = await wrong
          .waitForFunction(() => (window as any).storeResult, null, { timeout: 60_000 })
          .then((h) => h.jsonValue());
        expect(refused).toEqual({ code: 'AUTH_FAILED', reason: expect.stringMatching(/^token mismatch/) });
        expect(served.store!.server.stats().authFailures - before).toBe(1);
        expect(refusals.slice(from)).toEqual([
          {
            remote: expect.stringMatching(/^ws 127\.0\.0\.1:/),
            kind: 'auth',
            reason: expect.stringMatching(/^token mismatch/),
          },
        ]);
      });
    } finally {
      await node.close();
    }
  }, 120_000);
});

const closers: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of closers) await c();
});

describe('askServedJob', () => {
  it("serve's HTTP port names its job and store port", async () => {
    const served = await startServe({
      dir: root,
      port: 0,
      browserBuild,
      store: { token: 't0k3n', jobId: 'probe-job', port: 0, onReject: () => {} },
    });
    closers.push(() => served.close());
    expect(await askServedJob('127.0.0.1', served.http.port)).toEqual({
      jobId: 'probe-job',
      storePort: served.store!.port,
    });
    // Its store's own port speaks first: not serve's HTTP port.
    expect(await askServedJob('127.0.0.1', served.store!.port)).toBeUndefined();
  });

  it('serve without a token hosts no store: nothing found; nor at a rendezvous store, nor where nothing listens', async () => {
    const pagesOnly = await startServe({
      dir: root,
      port: 0,
      browserBuild,
    });
    closers.push(() => pagesOnly.close());
    expect(await askServedJob('127.0.0.1', pagesOnly.http.port)).toBeUndefined();
    const store = await startStoreServer({ host: '127.0.0.1', port: 0, token: 't0k3n', jobId: 'j' });
    closers.push(() => store.close());
    expect(await askServedJob('127.0.0.1', store.port)).toBeUndefined();
    // the probe's connection is no refused peer
    expect(store.stats()).toMatchObject({ authFailures: 0, protocolErrors: 0 });
    expect(await askServedJob('127.0.0.1', await freePort())).toBeUndefined();
  });

  it("a store asked over HTTP (a rank's probe that met the store's port before the store greeted) lets it go quietly", async () => {
    const store = await startStoreServer({ host: '127.0.0.1', port: 0, token: 't0k3n', jobId: 'j' });
    closers.push(() => store.close());
    const socket = tcpConnect({ host: '127.0.0.1', port: store.port });
    const ended = new Promise<void>((r) => socket.on('close', () => r()));
    socket.on('error', () => {});
    socket.resume(); // (its HELLO is read and dropped: the end comes after it)
    socket.write('GET /webccl-job HTTP/1.0\r\nHost: x\r\n\r\n');
    await ended;
    expect(store.stats()).toMatchObject({ authFailures: 0, protocolErrors: 0 });
  });

  it('a silent program that never answers, or answers something else, is not taken for serve', async () => {
    const held = new Set<Socket>();
    const silent = createTcpServer((s) => held.add(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    closers.push(
      () =>
        new Promise((r) => {
          for (const s of held) s.destroy();
          silent.close(r);
        }),
    );
    expect(await askServedJob('127.0.0.1', (silent.address() as { port: number }).port)).toBeUndefined();
    expect(
      parseAnswer('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{"jobId":"j","storePort":8081}'),
    ).toEqual({ jobId: 'j', storePort: 8081 });
    expect(parseAnswer('HTTP/1.1 404 Not Found\r\n\r\n{"jobId":"j","storePort":8081}')).toBeUndefined();
    expect(parseAnswer('HTTP/1.1 200 OK\r\n\r\n{"jobId":"","storePort":8081}')).toBeUndefined();
    expect(parseAnswer('HTTP/1.1 200 OK\r\n\r\n{"jobId":"j","storePort":70000}')).toBeUndefined();
    expect(parseAnswer('HTTP/1.1 200 OK\r\n\r\n<html>')).toBeUndefined();
  });
});
