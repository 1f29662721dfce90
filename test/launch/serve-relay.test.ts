// `webccl serve --token`: the relay at /webccl-relay that pairs two pages' ranks, and the store's
// fresh start for each run. Clients are Node `ws` sockets standing in for pages: the relay pairs
// (from=a, to=b, c) with (from=b, to=a, c) and forwards binary messages both ways in order,
// holding what a waiting socket sends; it refuses a bad query (400), another job (404), a
// duplicate slot (1008), too many held bytes (1009), text (1003), and closes the partner of a
// socket that leaves. The served store forgets its keys once its last client has gone.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { connectStore } from '../../src/bootstrap/nodejs/connect-store.js';
import { StoreClient } from '../../src/bootstrap/nodejs/store-client.js';
import { WebcclError } from '../../src/core/errors.js';
import { HELD_LIMIT, RELAY_MAX_MESSAGE } from '../../src/launch/serve/relay.js';
import { type Served, startServe } from '../../src/launch/serve/serve-job.js';
import { CHUNK } from '../../src/transport/ws/messages.js';
import { upgradeStatus } from '../helpers/upgrade-status.js';

const TOKEN = 'relay-token';
const JOB = 'relay-job';
const root = fileURLToPath(new URL('../..', import.meta.url));
const browserBuild = join(root, 'dist', 'browser', 'index.js');
const tmp = mkdtempSync(join(tmpdir(), 'webccl-serve-relay-'));

let served: Served;
beforeAll(async () => {
  served = await startServe({
    dir: tmp,
    host: '127.0.0.1',
    port: 0,
    browserBuild,
    store: { token: TOKEN, jobId: JOB, port: 0 },
  });
});
afterAll(async () => {
  await served?.close();
  rmSync(tmp, { recursive: true, force: true });
});

const relayUrl = (s: Served, q: string) => `${s.store!.relayUrl}?${q}`;
const slot = (from: number, to: number, channel = 0, job = JOB) =>
  `job=${job}&from=${from}&to=${to}&channel=${channel}`;

/** Polls `f` until it holds (the relay learns of a close a moment after the client does). */
async function until(f: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1000 && !f(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!f()) throw new Error(`never: ${what}`);
}

/** A relay client: the binary messages it got, and its close (code, reason). */
interface Peer {
  s: WebSocket;
  got: Buffer[];
  closed: Promise<{ code: number; reason: string }>;
  /** Resolves once the relay has handled everything sent before (a ping is answered in order). */
  synced(): Promise<void>;
}

function peer(url: string): Promise<Peer> {
  return new Promise((resolve, reject) => {
    const s = new WebSocket(url, { maxPayload: RELAY_MAX_MESSAGE });
    const got: Buffer[] = [];
    const closed = new Promise<{ code: number; reason: string }>((r) =>
      s.on('close', (code, reason) => r({ code, reason: reason.toString() })),
    );
    s.on('message', (d: Buffer) => got.push(d));
    s.on('error', reject);
    s.on('open', () =>
      resolve({
        s,
        got,
        closed,
        synced: () =>
          new Promise<void>((r) => {
            s.once('pong', () => r());
            s.ping();
          }),
      }),
    );
  });
}

const msg = (tag: string, i: number) => Buffer.from(`${tag}${i}`);
const texts = (bs: Buffer[]) => bs.map((b) => b.toString());

async function rejected(p: Promise<unknown>): Promise<WebcclError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(WebcclError.is(e), String(e)).toBe(true);
  return e as WebcclError;
}

describe('the relay pairs two ranks and forwards their messages', () => {
  it('messages sent before the partner arrives are held and flushed first; then both ways, in order, as binary', async () => {
    const relay = served.store!.relay;
    const before = relay.stats().bytesForwarded;
    const a = await peer(relayUrl(served, slot(0, 1, 3)));
    for (let i = 0; i < 3; i++) a.s.send(msg('early', i));
    await a.synced();
    expect(relay.stats()).toMatchObject({ waiting: 1, pairs: 0 });
    const b = await peer(relayUrl(served, slot(1, 0, 3)));
    expect(relay.stats()).toMatchObject({ waiting: 0, pairs: 1 });
    const n = 200;
    for (let i = 0; i < n; i++) {
      a.s.send(msg('a', i));
      b.s.send(msg('b', i));
    }
    await until(() => b.got.length === 3 + n && a.got.length === n, 'every message arrives');
    expect(texts(b.got)).toEqual([
      ...[0, 1, 2].map((i) => `early${i}`),
      ...Array.from({ length: n }, (_, i) => `a${i}`),
    ]);
    expect(texts(a.got)).toEqual(Array.from({ length: n }, (_, i) => `b${i}`));
    const bytes = [...a.got, ...b.got].reduce((s, m) => s + m.length, 0);
    expect(relay.stats().bytesForwarded - before).toBe(bytes);
    a.s.close();
    expect((await b.closed).code).toBe(1000);
    await until(() => relay.stats().pairs === 0, 'the pair is gone');
  });

  it("relays a message of a link's largest size (CHUNK, 1 MiB) whole, and refuses one over the limit by its length", async () => {
    const a = await peer(relayUrl(served, slot(2, 3)));
    const b = await peer(relayUrl(served, slot(3, 2)));
    const big = Buffer.alloc(CHUNK);
    for (let i = 0; i < big.length; i += 4) big.writeUInt32LE(i, i);
    a.s.send(big);
    await until(() => b.got.length === 1, 'the large message arrives');
    expect(b.got[0].equals(big)).toBe(true);
    a.s.send(Buffer.alloc(RELAY_MAX_MESSAGE + 1));
    expect((await a.closed).code).toBe(1009);
    expect((await b.closed).code).toBe(1000); // its partner left
  });

  it('ranks with many messages in flight to a slow reader get them all, in order (the sender is paused, not dropped)', async () => {
    const a = await peer(relayUrl(served, slot(4, 5)));
    const b = await peer(relayUrl(served, slot(5, 4)));
    b.s.pause(); // b reads nothing: the relay's queue to b grows past its high-water mark
    const part = 256 * 1024;
    const count = 48; // 12 MiB
    const before = served.store!.relay.stats().bytesForwarded;
    for (let i = 0; i < count; i++) a.s.send(Buffer.alloc(part, i));
    // The relay forwards at least its high-water mark (4 MiB) before it pauses a (a, paused, would not answer a
    // ping).
    await until(
      () => served.store!.relay.stats().bytesForwarded - before >= 4 << 20,
      'the relay has queued 4 MiB for b',
    );
    b.s.resume();
    await until(() => b.got.length === count, 'every part arrives');
    expect(b.got.map((m) => [m.length, m[0], m[part - 1]])).toEqual(
      Array.from({ length: count }, (_, i) => [part, i, i]),
    );
    b.s.close();
    expect((await a.closed).code).toBe(1000);
  });

  it('one side leaving closes the other after what was forwarded to it', async () => {
    const a = await peer(relayUrl(served, slot(6, 7)));
    const b = await peer(relayUrl(served, slot(7, 6)));
    for (let i = 0; i < 20; i++) a.s.send(msg('last', i));
    a.s.close(1000);
    const c = await b.closed;
    expect(c).toEqual({ code: 1000, reason: 'partner closed' });
    expect(texts(b.got)).toEqual(Array.from({ length: 20 }, (_, i) => `last${i}`));
    // An abrupt end (no close handshake) closes the partner too.
    const x = await peer(relayUrl(served, slot(6, 7)));
    const y = await peer(relayUrl(served, slot(7, 6)));
    x.s.terminate();
    expect((await y.closed).code).toBe(1000);
  });
});

describe('the relay refuses', () => {
  it('a malformed query with 400 and another job with 404, before upgrading; /store is still the store', async () => {
    const bad = [
      'from=0&to=1&channel=0',
      `job=${JOB}&to=1&channel=0`,
      `job=${JOB}&from=0&channel=0`,
      `job=${JOB}&from=0&to=1`,
      slot(1, 1),
      `job=${JOB}&from=x&to=1&channel=0`,
      `job=${JOB}&from=1.5&to=1&channel=0`,
      `job=${JOB}&from=-1&to=1&channel=0`,
      slot(65536, 0),
      slot(0, 65536),
      slot(0, 1, 64),
      `${slot(0, 1)}&from=2`,
      `job=${JOB}&from=&to=1&channel=0`,
    ];
    for (const q of bad) expect({ q, status: await upgradeStatus(relayUrl(served, q)) }).toEqual({ q, status: 400 });
    expect(await upgradeStatus(relayUrl(served, slot(0, 1, 0, 'another-job')))).toBe(404);
    const ws = served.http.url.replace(/^http/, 'ws');
    expect(await upgradeStatus(`${ws}/webccl-relay/x?${slot(0, 1)}`)).toBe(404);
    expect(await upgradeStatus(`${ws}/elsewhere`)).toBe(404);
    expect(await upgradeStatus(`${ws}/store`)).toBe(101);
    expect(served.store!.relay.stats().waiting).toBe(0);
  });

  it('a second socket for a slot already waiting or already paired, with 1008', async () => {
    const a = await peer(relayUrl(served, slot(10, 11, 1)));
    const dup = await peer(relayUrl(served, slot(10, 11, 1)));
    const c1 = await dup.closed;
    expect(c1.code).toBe(1008);
    expect(c1.reason).toMatch(/duplicate/);
    const b = await peer(relayUrl(served, slot(11, 10, 1)));
    const dup2 = await peer(relayUrl(served, slot(11, 10, 1)));
    expect((await dup2.closed).code).toBe(1008);
    // The pair is untouched, and another channel of the same ranks is a slot of its own.
    a.s.send(msg('still', 0));
    await until(() => b.got.length === 1, 'the pair still forwards');
    const other = await peer(relayUrl(served, slot(10, 11, 2)));
    expect(served.store!.relay.stats().waiting).toBe(1);
    for (const p of [a, b, other]) p.s.close();
    await until(() => served.store!.relay.stats().waiting === 0 && served.store!.relay.stats().pairs === 0, 'all gone');
  });

  it('more than 64 KiB sent before the partner arrives, with 1009; a text message, with 1003', async () => {
    const a = await peer(relayUrl(served, slot(20, 21)));
    a.s.send(Buffer.alloc(HELD_LIMIT / 2));
    a.s.send(Buffer.alloc(HELD_LIMIT / 2));
    a.s.send(Buffer.alloc(1));
    expect((await a.closed).code).toBe(1009);
    const t = await peer(relayUrl(served, slot(22, 23)));
    t.s.send('text');
    expect((await t.closed).code).toBe(1003);
    await until(() => served.store!.relay.stats().waiting === 0, 'no one waits');
  });
});

describe("the relay's timers and limits (a serve of its own)", () => {
  it('closes a socket left without a partner (1008 no partner), refuses waiters over the cap with 503, and close() ends every socket', async () => {
    const s = await startServe({
      dir: tmp,
      host: '127.0.0.1',
      port: 0,
      browserBuild,
      store: { token: TOKEN, jobId: JOB, port: 0, relay: { pairTimeoutMs: 200, maxWaiting: 2 } },
    });
    let open = true;
    try {
      const lonely = await peer(relayUrl(s, slot(0, 1)));
      expect(await lonely.closed).toEqual({ code: 1008, reason: 'no partner' });
      await until(() => s.store!.relay.stats().waiting === 0, 'the timed-out socket is forgotten');
      // Its slot is free again at once.
      const w1 = await peer(relayUrl(s, slot(0, 1)));
      const w2 = await peer(relayUrl(s, slot(0, 2)));
      expect(s.store!.relay.stats()).toMatchObject({ waiting: 2, pairs: 0 });
      expect(await upgradeStatus(relayUrl(s, slot(0, 3)))).toBe(503);
      // A partner still pairs with a waiting socket (pairing lowers the count of waiters).
      const p1 = await peer(relayUrl(s, slot(1, 0)));
      expect(s.store!.relay.stats()).toMatchObject({ waiting: 1, pairs: 1 });
      open = false;
      await s.close();
      for (const p of [w1, w2, p1]) expect((await p.closed).code).toBe(1006); // terminated
    } finally {
      if (open) await s.close();
    }
  });
});

describe('the served store starts afresh for each run', () => {
  const tcp = () =>
    StoreClient.connect({
      host: served.store!.host,
      port: served.store!.port,
      token: TOKEN,
      jobId: JOB,
      timeoutMs: 10_000,
    });
  const ws = () => connectStore({ url: served.store!.url, token: TOKEN, jobId: JOB, timeoutMs: 10_000 });
  const connections = () => served.store!.server.stats().connections;

  it('forgets every key when its last client (of either carrier) leaves', async () => {
    const [a, b] = [await tcp(), await ws()];
    await a.set('world_size', '2');
    await b.set('card/1', 'x');
    expect(await a.numKeys()).toBe(2);
    await Promise.all([a.close(), b.close()]);
    await until(() => connections() === 0, 'both clients are gone');
    const c = await tcp();
    expect(await c.numKeys()).toBe(0);
    expect((await rejected(c.get('world_size', { timeoutMs: 200 }))).code).toBe('STORE_TIMEOUT');
    await c.close();
    await until(() => connections() === 0, 'c is gone');
  });

  it('keeps the keys while any client stays', async () => {
    const [a, b] = [await ws(), await tcp()];
    await b.set('run', 'one');
    await b.close();
    await until(() => connections() === 1, 'b is gone');
    const c = await tcp();
    expect(new TextDecoder().decode(await c.get('run', { timeoutMs: 5_000 }))).toBe('one');
    await Promise.all([a.close(), c.close()]);
  });
});
