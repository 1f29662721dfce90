// The rendezvous store's client (Node only): connect (retrying until the deadline, since the
// server may start later), prove the job's token and check that the server proves it too, then
// send requests tagged with ids so a blocked get never holds up a later set. A broken or closed
// connection fails every pending request with one error that lists them.
import * as net from 'node:net';
import { WebcclError } from '../../core/errors.js';
import { textBytes } from '../../wire/bytes.js';
import { AUTH_FAIL_REASONS, Challenge } from '../../wire/auth.js';
import { sameBytes } from '../../wire/hmac.js';
import { checkSecrets, hostPort } from '../../wire/secrets.js';
import {
  ACCEPTS, AUTH_LABEL, MAX_KEY_BYTES, MAX_KEYS_FRAME_BYTES, MAX_VALUE_LIMIT, NO_DEADLINE, VERSION,
  FrameParser, decode, encode, type Message,
} from '../store-protocol.js';
import { STORE_TLS_NOTICE } from './store-server.js';
import { type WireTls, secureDialled } from '../../wire/node/secure-socket.js';

export type StoreValue = Uint8Array | string;

export interface StoreClientOptions {
  host: string;
  port: number;
  token: string | Uint8Array;
  jobId: string;
  /** Connect deadline, and the default deadline of get and wait (default 300 s; Infinity waits forever). */
  timeoutMs?: number;
  /** Largest value this client accepts from the server (default 64 MiB). */
  maxValueBytes?: number;
  /** Speak TLS to the store (WEBCCL_TLS); plain when absent. */
  tls?: WireTls;
}

interface Pending {
  what: string;
  done: (m: Message) => void;
  fail: (e: WebcclError) => void;
}

/** A failure worth another attempt before the connect deadline (refused, reset, closed early). */
class Retry extends Error {}

const bad = (message: string) => new WebcclError('INVALID_ARGUMENT', message);

function wireTimeout(ms: number): number {
  if (ms === Infinity) return NO_DEADLINE;
  if (!Number.isInteger(ms) || ms < 0) throw bad(`timeoutMs must be a non-negative integer or Infinity, got ${ms}`);
  return Math.min(ms, NO_DEADLINE - 1);
}

function checkKey(key: string): string {
  if (typeof key !== 'string' || key === '' || textBytes(key).length > MAX_KEY_BYTES) {
    throw bad(`store key must be a non-empty string of at most ${MAX_KEY_BYTES} UTF-8 bytes`);
  }
  return key;
}

export class StoreClient {
  private readonly pending = new Map<number, Pending>();
  private readonly outbox: Uint8Array[][] = [];
  private blocked = false;
  private nextId = 1;
  private failure?: WebcclError;

  private constructor(
    private readonly socket: net.Socket,
    private readonly parser: FrameParser,
    private readonly where: string,
    /** Default deadline of get and wait. */
    readonly timeoutMs: number,
    /** Largest value either side accepts. */
    private readonly maxValue: number,
  ) {
    socket.on('close', () => this.fail(new WebcclError('CONNECTION_CLOSED', `connection to the store at ${where} closed`)));
  }

  /** Connects and authenticates, retrying refused connections until `timeoutMs`. */
  static async connect(o: StoreClientOptions): Promise<StoreClient> {
    const token = checkSecrets(o.token, o.jobId);
    const timeoutMs = o.timeoutMs ?? 300_000;
    wireTimeout(timeoutMs);
    const maxValue = o.maxValueBytes ?? 64 * 1024 * 1024;
    if (!Number.isInteger(maxValue) || maxValue < 1 || maxValue > MAX_VALUE_LIMIT) throw bad(`maxValueBytes ${maxValue} is not in 1..${MAX_VALUE_LIMIT}`);
    if (!Number.isInteger(o.port) || o.port < 1 || o.port > 65535) throw bad(`store port ${o.port} is not in 1..65535`);
    const where = hostPort(o.host, o.port);
    const deadline = Date.now() + timeoutMs;
    for (let delay = 20; ; delay = Math.min(delay * 2, 500)) {
      let last: string;
      try {
        return await attempt({ ...o, token, timeoutMs, maxValue, where }, deadline);
      } catch (e) {
        if (!(e instanceof Retry)) throw e;
        last = e.message;
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new WebcclError('CONNECT_FAILED', `no store reachable at ${where} within ${timeoutMs} ms (last attempt: ${last})`, { host: o.host, port: o.port });
      }
      await new Promise((r) => setTimeout(r, Math.min(delay, left)));
    }
  }

  /** Whether the connection is gone (closed, or broken). */
  /** This end's address: the interface that reaches the store. */
  get localAddress(): string {
    return this.socket.localAddress ?? '';
  }

  /** Lets the process exit while this client is connected. */
  unref(): void {
    this.socket.unref();
  }

  get closed(): boolean {
    return this.failure !== undefined;
  }

  async set(key: string, value: StoreValue): Promise<void> {
    await this.request({ type: 'set', id: 0, key: checkKey(key), value: this.valueBytes(value) }, `set(${key})`, 'ok');
  }

  /** The key's value, waiting until it exists (up to timeoutMs, default the client's). */
  async get(key: string, opts: { timeoutMs?: number } = {}): Promise<Uint8Array> {
    const ms = opts.timeoutMs ?? this.timeoutMs;
    const m = await this.request({ type: 'get', id: 0, key: checkKey(key), timeoutMs: wireTimeout(ms) }, `get(${key})`, 'value', ms);
    return m.value ?? new Uint8Array(0);
  }

  /** Adds delta to the integer counter at key (created at 0); returns the new value. */
  async add(key: string, delta: number): Promise<number> {
    if (!Number.isSafeInteger(delta)) throw bad(`add delta must be a safe integer, got ${delta}`);
    const m = await this.request({ type: 'add', id: 0, key: checkKey(key), delta: BigInt(delta) }, `add(${key})`, 'number');
    return Number(m.value);
  }

  /** Resolves once every key exists; STORE_TIMEOUT names those still missing at the deadline. */
  async wait(keys: string[], timeoutMs = this.timeoutMs): Promise<void> {
    if (!Array.isArray(keys) || keys.length > 0xffff) throw bad('wait takes an array of at most 65535 keys');
    const size = keys.reduce((n, k) => n + 2 + textBytes(checkKey(k)).length, 10);
    if (size > MAX_KEYS_FRAME_BYTES) throw bad(`wait keys take ${size} bytes, over the limit of ${MAX_KEYS_FRAME_BYTES}`);
    await this.request({ type: 'wait', id: 0, keys, timeoutMs: wireTimeout(timeoutMs) }, `wait(${keys.join(', ')})`, 'ok', timeoutMs);
  }

  /**
   * Sets key to desired if its value equals expected (null: if the key does not exist).
   * Returns the value after the call (null: the key does not exist).
   */
  async compareSet(key: string, expected: StoreValue | null, desired: StoreValue): Promise<Uint8Array | null> {
    const exp = expected === null ? null : this.valueBytes(expected);
    const m = await this.request({ type: 'compareSet', id: 0, key: checkKey(key), expected: exp, desired: this.valueBytes(desired) }, `compareSet(${key})`, 'value');
    return m.value;
  }

  /** Removes key; true when it existed. */
  async delete(key: string): Promise<boolean> {
    return (await this.request({ type: 'delete', id: 0, key: checkKey(key) }, `delete(${key})`, 'number')).value === 1n;
  }

  async numKeys(): Promise<number> {
    return Number((await this.request({ type: 'numKeys', id: 0 }, 'numKeys()', 'number')).value);
  }

  /** Closes the connection; pending requests fail with CONNECTION_CLOSED. */
  close(): Promise<void> {
    this.fail(new WebcclError('CONNECTION_CLOSED', `store client for ${this.where} closed by close()`));
    return new Promise((resolve) => (this.socket.closed ? resolve() : this.socket.once('close', () => resolve())));
  }

  private valueBytes(v: StoreValue): Uint8Array {
    const b = typeof v === 'string' ? textBytes(v) : v;
    if (!(b instanceof Uint8Array)) throw bad('store values are strings or Uint8Arrays');
    if (b.length > this.maxValue) throw bad(`store value of ${b.length} bytes is over the limit of ${this.maxValue}`);
    return b;
  }

  private request<T extends Message['type']>(m: Message, what: string, want: T, timeoutMs?: number): Promise<Extract<Message, { type: T }>> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId;
    this.nextId = this.nextId >= 0xffffffff ? 1 : this.nextId + 1;
    return new Promise((resolve, reject) => {
      const done = (r: Message) => {
        if (r.type === want) resolve(r as Extract<Message, { type: T }>);
        else if (r.type === 'timeout') {
          reject(new WebcclError('STORE_TIMEOUT', `store ${what} timed out after ${timeoutMs} ms; missing keys: ${r.keys.join(', ')}`, { keys: r.keys }));
        } else if (r.type === 'error') reject(new WebcclError('INVALID_ARGUMENT', `store ${what}: ${r.message}`));
        else {
          // This request has left `pending` already: fail() would not reach it, so it fails here too.
          this.fail(new WebcclError('PROTOCOL_ERROR', `store at ${this.where} answered ${what} with ${r.type}`));
          reject(this.failure);
        }
      };
      this.pending.set(id, { what, done, fail: reject });
      this.send(encode({ ...m, id } as Message));
    });
  }

  /** Writes frames in order, holding further frames while the socket asks us to wait. */
  private send(frame: Uint8Array[]): void {
    this.outbox.push(frame);
    this.flush();
  }

  private flush(): void {
    while (!this.blocked && this.outbox.length && !this.failure) {
      let ok = true;
      for (const part of this.outbox.shift()!) ok = this.socket.write(part);
      if (!ok) {
        this.blocked = true;
        this.socket.once('drain', () => {
          this.blocked = false;
          this.flush();
        });
      }
    }
  }

  /** Called by the parser for every frame after the handshake. */
  private receive(m: Message): void {
    if (m.type === 'protocolError') return this.fail(new WebcclError('PROTOCOL_ERROR', `store at ${this.where} hung up: ${m.message}`));
    const p = 'id' in m ? this.pending.get(m.id) : undefined;
    if (!p) return this.fail(new WebcclError('PROTOCOL_ERROR', `store at ${this.where} sent ${m.type} for no pending request`));
    this.pending.delete((m as { id: number }).id);
    p.done(m);
  }

  /** Fails every pending request with one error (the first failure wins) and drops the socket. */
  private fail(e: WebcclError): void {
    if (this.failure) return;
    const what = [...this.pending.values()].map((p) => p.what);
    this.failure = what.length ? new WebcclError(e.code, `${e.reason}; pending: ${what.join(', ')}`, { pending: what }) : e;
    this.parser.close();
    this.socket.destroy();
    for (const p of this.pending.values()) p.fail(this.failure);
    this.pending.clear();
  }

  /** One connection attempt: handshake, or Retry / AUTH_FAILED / PROTOCOL_ERROR. */
  static handshake(socket: net.Socket, o: { token: Uint8Array; jobId: string; where: string; maxValue: number; timeoutMs: number }): Promise<StoreClient> {
    return new Promise((resolve, reject) => {
      const challenge = new Challenge(o.token, o.jobId, AUTH_LABEL, ['client', 'server']);
      let snonce: Uint8Array | undefined;
      /** The server's AUTH_OK proof, computed with ours before AUTH leaves (wire/auth.ts). */
      let expected: Uint8Array | undefined;
      let maxValue = o.maxValue;
      let client: StoreClient | undefined;
      const finish = (e: Error) => { socket.destroy(); reject(e); };
      const refused = (why: string) => finish(new WebcclError('AUTH_FAILED', `store at ${o.where} ${why}`, { where: o.where }));
      const parser = new FrameParser(o.maxValue, ACCEPTS.clientHandshake, (kind, body) => {
        const m = decode(kind, body, o.maxValue);
        if (client) return client.receive(m);
        if (m.type === 'hello' && !snonce) {
          if (m.version !== VERSION) return finish(new WebcclError('PROTOCOL_ERROR', `store at ${o.where} speaks protocol version ${m.version}, we speak ${VERSION}`));
          snonce = m.nonce;
          maxValue = Math.min(maxValue, m.maxValueBytes);
          // The proofs are computed asynchronously; what the server sends meanwhile waits in the parser.
          parser.hold();
          socket.pause();
          challenge.proofs(m.nonce).then((p) => {
            if (socket.destroyed) return;
            expected = p.theirs;
            for (const part of encode({ type: 'auth', jobId: o.jobId, nonce: challenge.nonce, mac: p.mine })) socket.write(part);
            socket.resume();
            feed(() => parser.release());
          }, (e: Error) => finish(e));
        } else if (m.type === 'authFail') refused(`refused us: ${AUTH_FAIL_REASONS[m.reason] ?? `reason ${m.reason}`}`);
        else if (m.type === 'authOk' && expected) {
          if (!sameBytes(expected, m.mac)) return refused('did not prove it holds the job token (wrong token or an impostor)');
          parser.accept(ACCEPTS.clientReady);
          socket.removeListener('close', early);
          resolve((client = new StoreClient(socket, parser, o.where, o.timeoutMs, maxValue)));
        } else if (m.type === 'protocolError') finish(new WebcclError('PROTOCOL_ERROR', `store at ${o.where} hung up: ${m.message}`));
        else finish(new WebcclError('PROTOCOL_ERROR', `store at ${o.where} sent ${m.type} during the handshake`));
      });
      /** Runs `f` (which feeds the parser); a frame it cannot parse ends the connection. */
      const feed = (f: () => void) => {
        try {
          f();
        } catch (e) {
          if (client) return client.fail(e as WebcclError);
          // A frame we cannot parse before the handshake: something else listens there.
          const why = WebcclError.is(e) ? e.reason : String(e);
          finish(new WebcclError('PROTOCOL_ERROR', `the server at ${o.where} does not speak the webccl store protocol (${why}); is another program using MASTER_PORT?`));
        }
      };
      socket.on('data', (chunk: Buffer) => feed(() => parser.push(chunk)));
      const early = () => finish(new Retry('the connection closed during the handshake'));
      socket.on('close', early);
    });
  }
}

function attempt(o: { host: string; port: number; token: Uint8Array; jobId: string; where: string; maxValue: number; timeoutMs: number; tls?: WireTls }, deadline: number): Promise<StoreClient> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: o.host, port: o.port });
    socket.setNoDelay(true);
    let connected = false;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Retry(connected ? 'the connection was accepted but no store handshake came within the deadline (is another program using MASTER_PORT?)' : 'no answer within the deadline'));
    }, Math.min(Math.max(1, deadline - Date.now()), 0x7fffffff));
    socket.on('error', (e: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      reject(new Retry(e.code ?? e.message));
    });
    socket.once('connect', () => {
      connected = true;
      secureDialled(o.tls, socket, { notice: STORE_TLS_NOTICE, where: `store at ${o.where}`, timeoutMs: deadline - Date.now() })
        .then((s) => StoreClient.handshake(s, o)).then(resolve, reject).finally(() => clearTimeout(timer));
    });
  });
}
