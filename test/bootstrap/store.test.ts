// The rendezvous store on loopback: the pure wire protocol, request semantics (over IPv4 and,
// where the machine has it, IPv6), authentication on both sides, hostile peers sending
// oversize or premature frames, deadlines, connect retries and closing. Small and bounded.
// The behaviour that does not depend on the carrier runs over TCP and over WebSocket (the same
// server, its WebSocket face on an HTTP server's /store; the client connectStore over `ws`).
import { createHmac } from 'node:crypto';
import { createServer } from 'node:http';
import * as net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { connectStore } from '../../src/bootstrap/nodejs/connect-store.js';
import { StoreClient, type StoreClientOptions } from '../../src/bootstrap/nodejs/store-client.js';
import {
  type StoreServer,
  type StoreServerOptions,
  startStoreServer,
} from '../../src/bootstrap/nodejs/store-server.js';
import { attachStoreWebSocket } from '../../src/bootstrap/nodejs/store-websocket.js';
import {
  ACCEPTS,
  authPayload,
  decode,
  encode,
  FrameParser,
  Kind,
  type Message,
} from '../../src/bootstrap/store-protocol.js';
import type { StoreSession } from '../../src/bootstrap/store-session.js';
import { WebcclError } from '../../src/core/errors.js';
import { canListen } from '../helpers/net.js';

const TOKEN = 'test-token';
const JOB = 'job-7';
const text = (b: Uint8Array | null) => (b === null ? null : new TextDecoder().decode(b));

const hasIPv6 = await canListen('::1');
if (!hasIPv6) console.warn('bootstrap-store: no IPv6 loopback (::1) on this machine; skipping the IPv6 store tests');

const open: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((x) => x.close()));
});

async function server(o: Partial<StoreServerOptions> = {}): Promise<StoreServer & { rejects: string[] }> {
  const rejects: string[] = [];
  const s = await startStoreServer({
    token: TOKEN,
    jobId: JOB,
    onReject: (r) => rejects.push(`${r.kind}: ${r.reason}`),
    ...o,
  });
  open.push(s);
  return Object.assign(s, { rejects });
}

async function client(port: number, o: Partial<StoreClientOptions> = {}): Promise<StoreClient> {
  const c = await StoreClient.connect({ host: '127.0.0.1', port, token: TOKEN, jobId: JOB, timeoutMs: 5000, ...o });
  open.push(c);
  return c;
}

type Carrier = 'tcp' | 'ws';

/** A store whose WebSocket face, for the ws carrier, listens on an HTTP server of its own. */
async function storeOver(
  carrier: Carrier,
  o: Partial<StoreServerOptions> = {},
): Promise<StoreServer & { rejects: string[]; url: string }> {
  const s = await server(o);
  if (carrier === 'tcp') return Object.assign(s, { url: '' });
  const http = createServer();
  const upgrades = attachStoreWebSocket(http, s);
  const host = o.host ?? '127.0.0.1';
  await new Promise<void>((r) => http.listen(0, host, r));
  open.push({
    close: () =>
      new Promise<void>((r) => {
        upgrades.close();
        http.close(() => r());
        http.closeAllConnections();
      }),
  });
  const port = (http.address() as net.AddressInfo).port;
  return Object.assign(s, { url: `ws://${host.includes(':') ? `[${host}]` : host}:${port}/store` });
}

/** A client of `s` over `carrier` (StoreClient over TCP, connectStore over WebSocket). */
async function clientOver(
  carrier: Carrier,
  s: StoreServer & { url: string },
  o: Partial<StoreClientOptions> = {},
): Promise<StoreSession> {
  if (carrier === 'tcp') return client(s.port, o);
  const c = await connectStore({
    url: s.url,
    token: o.token ?? TOKEN,
    jobId: o.jobId ?? JOB,
    timeoutMs: o.timeoutMs ?? 5000,
    maxValueBytes: o.maxValueBytes,
  });
  open.push(c);
  return c;
}

async function rejection(p: Promise<unknown>): Promise<WebcclError> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(WebcclError.is(e), `expected a WebcclError, got ${String(e)}`).toBe(true);
  return e as WebcclError;
}

/** A hand-driven socket: collects decoded frames, optionally after a valid handshake. */
async function raw(port: number, authenticate: boolean) {
  const socket = net.connect({ host: '127.0.0.1', port });
  const frames: Message[] = [];
  const closed = new Promise<void>((r) => socket.on('close', () => r()));
  socket.on('error', () => {});
  let arrived = () => {};
  const parser = new FrameParser(1 << 20, [...ACCEPTS.clientHandshake, ...ACCEPTS.clientReady], (k, b) => {
    frames.push(decode(k, b, 1 << 20));
    arrived();
  });
  socket.on('data', (d: Buffer) => parser.push(d));
  const next = async (): Promise<Message> => {
    while (frames.length === 0) await new Promise<void>((r) => (arrived = r));
    return frames.shift()!;
  };
  const hello = await next();
  if (hello.type !== 'hello') throw new Error('no HELLO');
  const nonce = new Uint8Array(32).fill(7);
  const auth = (token: string) =>
    encode({
      type: 'auth',
      jobId: JOB,
      nonce,
      mac: createHmac('sha256', token)
        .update(authPayload('client', hello.nonce, JOB, nonce))
        .digest(),
    });
  if (authenticate) {
    for (const p of auth(TOKEN)) socket.write(p);
    expect((await next()).type).toBe('authOk');
  }
  return { socket, frames, closed, next, auth };
}

const header = (kind: number, len: number) => {
  const b = Buffer.alloc(5);
  b.writeUInt8(kind, 0);
  b.writeUInt32LE(len, 1);
  return b;
};

describe('wire protocol (pure)', () => {
  const v = (s: string) => new TextEncoder().encode(s);
  const messages: Message[] = [
    { type: 'hello', version: 1, maxValueBytes: 1024, nonce: new Uint8Array(32).fill(1) },
    { type: 'auth', jobId: 'j', nonce: new Uint8Array(32).fill(2), mac: new Uint8Array(32).fill(3) },
    { type: 'set', id: 1, key: 'ключ', value: v('value') },
    { type: 'set', id: 9, key: 'big', value: new Uint8Array(17_000).fill(5) },
    { type: 'wait', id: 2, keys: ['a', 'b'], timeoutMs: 10 },
    { type: 'compareSet', id: 3, key: 'k', expected: null, desired: v('') },
    { type: 'add', id: 4, key: 'n', delta: -5n },
    { type: 'value', id: 5, value: null },
    { type: 'timeout', id: 6, keys: ['x'] },
    { type: 'error', id: 7, message: 'no' },
  ];

  it('round-trips every frame through the parser, fed one byte at a time', () => {
    const got: Message[] = [];
    const all = Object.values(Kind);
    const p = new FrameParser(1 << 20, all, (k, b) => got.push(decode(k, b, 1 << 20)));
    for (const m of messages) for (const part of encode(m)) for (const byte of part) p.push(Uint8Array.of(byte));
    expect(got).toEqual(messages);
  });

  it('refuses an unexpected kind or an oversize length from the 5-byte header alone', () => {
    const p = new FrameParser(1024, ACCEPTS.serverReady, () => {});
    expect(() => p.push(header(Kind.set, 1024 + 4 + 2 + 4096 + 4 + 1))).toThrow(/over its limit/);
    const q = new FrameParser(1024, ACCEPTS.serverHandshake, () => {});
    expect(() => q.push(header(Kind.set, 8))).toThrow(/not expected/);
    expect(() => decode(Kind.get, new Uint8Array(3), 1024)).toThrow(/truncated/);
  });
});

describe.each([
  ['127.0.0.1', true, 'tcp'],
  ['::1', hasIPv6, 'tcp'],
  ['127.0.0.1', true, 'ws'],
  ['::1', hasIPv6, 'ws'],
] as const)('store over %s (%s, %s)', (host, available, carrier) => {
  it.skipIf(!available)('serves set, get, add, wait, compareSet, delete and numKeys', async () => {
    const s = await storeOver(carrier, { host });
    expect(s.address).toBe(host);
    const c = await clientOver(carrier, s, { host });
    await c.set('a', 'one');
    await c.set('bin', Uint8Array.of(0, 255));
    expect(text(await c.get('a'))).toBe('one');
    expect([...(await c.get('bin'))]).toEqual([0, 255]);
    expect(await c.add('n', 5)).toBe(5);
    expect(await c.add('n', -2)).toBe(3);
    expect(text(await c.get('n'))).toBe('3');
    expect((await rejection(c.add('a', 1))).code).toBe('INVALID_ARGUMENT');
    await c.wait(['a', 'n']);
    await c.wait([]);
    expect(await c.compareSet('new', null, 'x').then(text)).toBe('x');
    expect(await c.compareSet('new', 'wrong', 'y').then(text)).toBe('x');
    expect(await c.compareSet('new', 'x', 'z').then(text)).toBe('z');
    expect(await c.compareSet('absent', 'x', 'z')).toBeNull();
    expect(await c.numKeys()).toBe(4);
    expect(await c.delete('new')).toBe(true);
    expect(await c.delete('new')).toBe(false);
    expect(await c.numKeys()).toBe(3);
    const big = new Uint8Array(4 << 20);
    for (let i = 0; i < big.length; i += 4096) big[i] = i >> 12;
    await c.set('big', big);
    expect(Buffer.compare(await c.get('big'), big)).toBe(0);
  });
});

describe('store', () => {
  it('rejects a server that cannot prove the token', async () => {
    const fake = net.createServer((sock) => {
      for (const p of encode({ type: 'hello', version: 1, maxValueBytes: 1024, nonce: new Uint8Array(32) }))
        sock.write(p);
      sock.once('data', () => encode({ type: 'authOk', mac: new Uint8Array(32) }).forEach((p) => sock.write(p)));
      sock.on('error', () => {});
    });
    await new Promise<void>((r) => fake.listen(0, '127.0.0.1', r));
    open.push({ close: () => new Promise<void>((r) => fake.close(() => r())) });
    const e = await rejection(client((fake.address() as net.AddressInfo).port));
    expect(e.code).toBe('AUTH_FAILED');
    expect(e.message).toContain('did not prove');
  });

  it('never executes a request from an unauthenticated socket', async () => {
    const s = await server();
    const early = await raw(s.port, false);
    for (const p of encode({ type: 'set', id: 1, key: 'evil', value: new Uint8Array(1) })) early.socket.write(p);
    await early.closed;
    const bad = await raw(s.port, false);
    // A failed proof followed by a request in the same write: the request must be dropped.
    bad.socket.write(
      Buffer.concat([...bad.auth('wrong'), ...encode({ type: 'set', id: 2, key: 'evil', value: new Uint8Array(1) })]),
    );
    await bad.closed;
    expect(bad.frames.map((f) => f.type)).toEqual(['authFail']);
    const c = await client(s.port);
    expect(await c.numKeys()).toBe(0);
    expect(s.stats()).toMatchObject({ protocolErrors: 1, authFailures: 1 });
  });

  it('disconnects a peer announcing an oversize frame, before or after the handshake, and serves on', async () => {
    const s = await server({ maxValueBytes: 1024 });
    const before = await raw(s.port, false);
    before.socket.write(header(Kind.auth, 1_000_000_000));
    await before.closed;
    const after = await raw(s.port, true);
    after.socket.write(header(Kind.set, 0xfffffff0));
    await after.closed;
    expect(after.frames[0]).toMatchObject({
      type: 'protocolError',
      message: expect.stringContaining('over its limit'),
    });
    expect(s.rejects).toEqual([
      expect.stringMatching(/^protocol: .*over its limit/),
      expect.stringMatching(/^protocol: .*over its limit/),
    ]);
    const c = await client(s.port);
    await c.set('k', 'v');
    expect(text(await c.get('k'))).toBe('v');
    expect((await rejection(c.set('k', new Uint8Array(2048)))).code).toBe('INVALID_ARGUMENT');
  });

  it('reports a port already in use', async () => {
    const s = await server();
    const e = await rejection(startStoreServer({ token: TOKEN, jobId: JOB, port: s.port }));
    expect(e.code).toBe('ADDRESS_IN_USE');
    expect(e.message).toContain(`127.0.0.1:${s.port}`);
  });

  it('retries connecting until the server starts, and names host:port when none does', async () => {
    const probe = await server();
    const port = probe.port;
    await probe.close();
    const connecting = client(port, { timeoutMs: 10_000 });
    await new Promise((r) => setTimeout(r, 200));
    await server({ port });
    const c = await connecting;
    expect(await c.numKeys()).toBe(0);
    await c.close();
    const dead = await server();
    const free = dead.port;
    await dead.close();
    const e = await rejection(client(free, { timeoutMs: 150 }));
    expect(e.code).toBe('CONNECT_FAILED');
    expect(e.message).toContain(`127.0.0.1:${free}`);
  });
});

describe.each(['tcp', 'ws'] as const)('store over %s', (carrier) => {
  it('blocks get until another client sets, without holding up later requests', async () => {
    const s = await storeOver(carrier);
    const [a, b] = [await clientOver(carrier, s), await clientOver(carrier, s)];
    const pending = a.get('late');
    await a.set('other', '1'); // same connection, answered while the get waits
    await b.set('late', 'here');
    expect(text(await pending)).toBe('here');
    const w = a.wait(['w1', 'w2']);
    await b.set('w1', '');
    await b.set('w2', '');
    await w;
  });

  it('gives 8 concurrent adders distinct results', async () => {
    const s = await storeOver(carrier);
    const cs = await Promise.all(Array.from({ length: 8 }, () => clientOver(carrier, s)));
    const got = await Promise.all(cs.map((c) => c.add('counter', 1)));
    expect([...got].sort((x, y) => x - y)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('times out get and wait naming the missing keys', async () => {
    const s = await storeOver(carrier);
    const c = await clientOver(carrier, s);
    await c.set('here', '1');
    const e = await rejection(c.wait(['here', 'gone1', 'gone2'], 50));
    expect(e.code).toBe('STORE_TIMEOUT');
    expect(e.details.keys).toEqual(['gone1', 'gone2']);
    expect(e.message).toContain('gone1, gone2');
    expect((await rejection(c.get('nope', { timeoutMs: 0 }))).message).toContain('nope');
    expect(await c.numKeys()).toBe(1); // the connection is still good
  });

  it('rejects a wrong token or job id on both sides', async () => {
    const s = await storeOver(carrier);
    const e1 = await rejection(clientOver(carrier, s, { token: 'wrong' }));
    expect(e1.code).toBe('AUTH_FAILED');
    expect(e1.message).toContain('token');
    expect(e1.details.reason).toMatch(/^token mismatch/);
    const e2 = await rejection(clientOver(carrier, s, { jobId: 'other-job' }));
    expect(e2.code).toBe('AUTH_FAILED');
    expect(e2.message).toContain('job id');
    expect(e2.details.reason).toBe('job id mismatch');
    expect(s.rejects).toEqual([expect.stringMatching(/^auth: token/), expect.stringMatching(/^auth: job id/)]);
    expect(s.stats()).toMatchObject({ authFailures: 2, authenticated: 0 });
  });

  it('fails pending gets with a clear error on close(), and when the server goes away', async () => {
    const s = await storeOver(carrier);
    const c = await clientOver(carrier, s);
    const g = c.get('never', { timeoutMs: Infinity });
    await c.numKeys(); // the get is on the wire
    const failed = rejection(g); // handled before close() ends (a WebSocket's closing handshake takes a while)
    await c.close();
    const e = await failed;
    expect(e.code).toBe('CONNECTION_CLOSED');
    expect(e.message).toContain('get(never)');
    expect((await rejection(c.set('x', '1'))).code).toBe('CONNECTION_CLOSED');
    const d = await clientOver(carrier, s);
    const w = d.wait(['never']);
    await d.numKeys();
    await s.close();
    expect((await rejection(w)).code).toBe('CONNECTION_CLOSED');
  });
});
