// The rendezvous store's client state machine over any byte pipe (browser-safe): prove the job's
// token and check that the server proves it too, then send requests tagged with ids so a blocked
// get never holds up a later set. A broken or closed connection fails every pending request with
// one error that lists them. The carriers are a TCP socket (bootstrap/nodejs/store-client.ts) and a
// WebSocket, Node's `ws` or a page's own (store-websocket-client.ts); the bytes are the same.
import { WebcclError } from '../core/errors.js';
import { AUTH_FAIL_REASONS, Challenge } from '../wire/auth.js';
import { textBytes } from '../wire/bytes.js';
import { sameBytes } from '../wire/hmac.js';
import {
  ACCEPTS,
  AUTH_LABEL,
  decode,
  encode,
  FrameParser,
  MAX_KEY_BYTES,
  MAX_KEYS_FRAME_BYTES,
  MAX_VALUE_LIMIT,
  type Message,
  NO_DEADLINE,
  VERSION,
} from './store-protocol.js';

export type StoreValue = Uint8Array | string;

/** What the client needs of a connection, whatever carries it (the carrier feeds it ConnEvents). */
export interface StoreConn {
  readonly destroyed: boolean;
  /** Sends one frame's parts in order; false when the carrier asks us to wait for `onceDrain`. */
  write(parts: Uint8Array[]): boolean;
  onceDrain(f: () => void): void;
  /** Stops and restarts delivery of incoming bytes (a carrier that cannot may ignore it). */
  pause(): void;
  resume(): void;
  destroy(): void;
  /** Resolves once the connection is closed. */
  whenClosed(): Promise<void>;
  /** Lets a Node process exit while the connection is open (absent where there is nothing to keep alive). */
  unref?(): void;
}

/** How the carrier delivers what it reads, and tells of the close. */
export interface ConnEvents {
  data(chunk: Uint8Array): void;
  close(): void;
}

/** A failure worth another attempt before the connect deadline (refused, reset, closed early). */
export class Retry extends Error {}

export interface SessionOptions {
  token: Uint8Array;
  jobId: string;
  /** How the store is named in errors (host:port, or a ws:// URL). */
  where: string;
  /** Largest value this client accepts. */
  maxValue: number;
  /** Default deadline of get and wait. */
  timeoutMs: number;
}

interface Pending {
  what: string;
  done: (m: Message) => void;
  fail: (e: WebcclError) => void;
}

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

/** Checks a client's deadline and value limit at the API boundary; returns them with defaults. */
export function clientLimits(o: { timeoutMs?: number; maxValueBytes?: number }): {
  timeoutMs: number;
  maxValue: number;
} {
  const timeoutMs = o.timeoutMs ?? 300_000;
  wireTimeout(timeoutMs);
  const maxValue = o.maxValueBytes ?? 64 * 1024 * 1024;
  if (!Number.isInteger(maxValue) || maxValue < 1 || maxValue > MAX_VALUE_LIMIT)
    throw bad(`maxValueBytes ${maxValue} is not in 1..${MAX_VALUE_LIMIT}`);
  return { timeoutMs, maxValue };
}

/**
 * Runs `attempt` until it connects, or fails with something other than Retry, or the deadline
 * passes (CONNECT_FAILED naming `where` and the last attempt's trouble).
 */
export async function retrying<T>(
  where: string,
  timeoutMs: number,
  details: Record<string, unknown>,
  attempt: (deadline: number) => Promise<T>,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let delay = 20; ; delay = Math.min(delay * 2, 500)) {
    let last: string;
    try {
      return await attempt(deadline);
    } catch (e) {
      if (!(e instanceof Retry)) throw e;
      last = e.message;
    }
    const left = deadline - Date.now();
    if (left <= 0)
      throw new WebcclError(
        'CONNECT_FAILED',
        `no store reachable at ${where} within ${timeoutMs} ms (last attempt: ${last})`,
        details,
      );
    await new Promise((r) => setTimeout(r, Math.min(delay, left)));
  }
}

export class StoreSession {
  private readonly pending = new Map<number, Pending>();
  private readonly outbox: Uint8Array[][] = [];
  private blocked = false;
  private nextId = 1;
  private failure?: WebcclError;

  protected constructor(
    protected readonly conn: StoreConn,
    private readonly parser: FrameParser,
    private readonly where: string,
    /** Default deadline of get and wait. */
    readonly timeoutMs: number,
    /** Largest value either side accepts. */
    private readonly maxValue: number,
  ) {}

  get closed(): boolean {
    return this.failure !== undefined;
  }

  /** Lets a Node process exit while the store connection is open. */
  unref(): void {
    this.conn.unref?.();
  }

  async set(key: string, value: StoreValue): Promise<void> {
    await this.request({ type: 'set', id: 0, key: checkKey(key), value: this.valueBytes(value) }, `set(${key})`, 'ok');
  }

  /** The key's value, waiting until it exists (up to timeoutMs, default the client's). */
  async get(key: string, opts: { timeoutMs?: number } = {}): Promise<Uint8Array> {
    const ms = opts.timeoutMs ?? this.timeoutMs;
    const m = await this.request(
      { type: 'get', id: 0, key: checkKey(key), timeoutMs: wireTimeout(ms) },
      `get(${key})`,
      'value',
      ms,
    );
    return m.value ?? new Uint8Array(0);
  }

  /** Adds delta to the integer counter at key (created at 0); returns the new value. */
  async add(key: string, delta: number): Promise<number> {
    if (!Number.isSafeInteger(delta)) throw bad(`add delta must be a safe integer, got ${delta}`);
    const m = await this.request(
      { type: 'add', id: 0, key: checkKey(key), delta: BigInt(delta) },
      `add(${key})`,
      'number',
    );
    return Number(m.value);
  }

  /** Resolves once every key exists; STORE_TIMEOUT names those still missing at the deadline. */
  async wait(keys: string[], timeoutMs = this.timeoutMs): Promise<void> {
    if (!Array.isArray(keys) || keys.length > 0xffff) throw bad('wait takes an array of at most 65535 keys');
    const size = keys.reduce((n, k) => n + 2 + textBytes(checkKey(k)).length, 10);
    if (size > MAX_KEYS_FRAME_BYTES)
      throw bad(`wait keys take ${size} bytes, over the limit of ${MAX_KEYS_FRAME_BYTES}`);
    await this.request(
      { type: 'wait', id: 0, keys, timeoutMs: wireTimeout(timeoutMs) },
      `wait(${keys.join(', ')})`,
      'ok',
      timeoutMs,
    );
  }

  /**
   * Sets key to desired if its value equals expected (null: if the key does not exist).
   * Returns the value after the call (null: the key does not exist).
   */
  async compareSet(key: string, expected: StoreValue | null, desired: StoreValue): Promise<Uint8Array | null> {
    const exp = expected === null ? null : this.valueBytes(expected);
    const m = await this.request(
      { type: 'compareSet', id: 0, key: checkKey(key), expected: exp, desired: this.valueBytes(desired) },
      `compareSet(${key})`,
      'value',
    );
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
    return this.conn.whenClosed();
  }

  private valueBytes(v: StoreValue): Uint8Array {
    const b = typeof v === 'string' ? textBytes(v) : v;
    if (!(b instanceof Uint8Array)) throw bad('store values are strings or Uint8Arrays');
    if (b.length > this.maxValue) throw bad(`store value of ${b.length} bytes is over the limit of ${this.maxValue}`);
    return b;
  }

  private request<T extends Message['type']>(
    m: Message,
    what: string,
    want: T,
    timeoutMs?: number,
  ): Promise<Extract<Message, { type: T }>> {
    if (this.failure) return Promise.reject(this.failure);
    const id = this.nextId;
    this.nextId = this.nextId >= 0xffffffff ? 1 : this.nextId + 1;
    return new Promise((resolve, reject) => {
      const done = (r: Message) => {
        if (r.type === want) resolve(r as Extract<Message, { type: T }>);
        else if (r.type === 'timeout') {
          reject(
            new WebcclError(
              'STORE_TIMEOUT',
              `store ${what} timed out after ${timeoutMs} ms; missing keys: ${r.keys.join(', ')}`,
              { keys: r.keys },
            ),
          );
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

  /** Writes frames in order, holding further frames while the carrier asks us to wait. */
  private send(frame: Uint8Array[]): void {
    this.outbox.push(frame);
    this.flush();
  }

  private flush(): void {
    while (!this.blocked && this.outbox.length && !this.failure) {
      if (!this.conn.write(this.outbox.shift()!)) {
        this.blocked = true;
        this.conn.onceDrain(() => {
          this.blocked = false;
          this.flush();
        });
      }
    }
  }

  /** Called by the parser for every frame after the handshake. */
  private receive(m: Message): void {
    if (m.type === 'protocolError')
      return this.fail(new WebcclError('PROTOCOL_ERROR', `store at ${this.where} hung up: ${m.message}`));
    const p = 'id' in m ? this.pending.get(m.id) : undefined;
    if (!p)
      return this.fail(
        new WebcclError('PROTOCOL_ERROR', `store at ${this.where} sent ${m.type} for no pending request`),
      );
    this.pending.delete((m as { id: number }).id);
    p.done(m);
  }

  /** Fails every pending request with one error (the first failure wins) and drops the connection. */
  private fail(e: WebcclError): void {
    if (this.failure) return;
    const what = [...this.pending.values()].map((p) => p.what);
    this.failure = what.length
      ? new WebcclError(e.code, `${e.reason}; pending: ${what.join(', ')}`, { pending: what })
      : e;
    this.parser.close();
    this.conn.destroy();
    for (const p of this.pending.values()) p.fail(this.failure);
    this.pending.clear();
  }

  /**
   * Runs the handshake over `conn`: resolves with the session `make` builds once the server has
   * proven the token, or rejects with Retry (closed early) / AUTH_FAILED / PROTOCOL_ERROR.
   * Returns the events the carrier must deliver.
   */
  protected static open<S extends StoreSession>(
    conn: StoreConn,
    o: SessionOptions,
    make: (conn: StoreConn, parser: FrameParser, where: string, timeoutMs: number, maxValue: number) => S,
  ): { events: ConnEvents; session: Promise<S> } {
    let events!: ConnEvents;
    const session = new Promise<S>((resolve, reject) => {
      const challenge = new Challenge(o.token, o.jobId, AUTH_LABEL, ['client', 'server']);
      let snonce: Uint8Array | undefined;
      /** The server's AUTH_OK proof, computed with ours before AUTH leaves (wire/auth.ts). */
      let expected: Uint8Array | undefined;
      let maxValue = o.maxValue;
      let client: S | undefined;
      let settled = false;
      const finish = (e: Error) => {
        settled = true;
        conn.destroy();
        reject(e);
      };
      const refused = (why: string) =>
        finish(new WebcclError('AUTH_FAILED', `store at ${o.where} ${why}`, { where: o.where }));
      const parser = new FrameParser(o.maxValue, ACCEPTS.clientHandshake, (kind, body) => {
        const m = decode(kind, body, o.maxValue);
        if (client) return (client as StoreSession).receive(m);
        if (m.type === 'hello' && !snonce) {
          if (m.version !== VERSION)
            return finish(
              new WebcclError(
                'PROTOCOL_ERROR',
                `store at ${o.where} speaks protocol version ${m.version}, we speak ${VERSION}`,
              ),
            );
          snonce = m.nonce;
          maxValue = Math.min(maxValue, m.maxValueBytes);
          // The proofs are computed asynchronously; what the server sends meanwhile waits in the parser.
          parser.hold();
          conn.pause();
          challenge.proofs(m.nonce).then(
            (p) => {
              if (conn.destroyed) return;
              expected = p.theirs;
              conn.write(encode({ type: 'auth', jobId: o.jobId, nonce: challenge.nonce, mac: p.mine }));
              conn.resume();
              feed(() => parser.release());
            },
            (e: Error) => finish(e),
          );
        } else if (m.type === 'authFail') {
          const reason = AUTH_FAIL_REASONS[m.reason] ?? `reason ${m.reason}`;
          finish(
            new WebcclError('AUTH_FAILED', `store at ${o.where} refused us: ${reason}`, { where: o.where, reason }),
          );
        } else if (m.type === 'authOk' && expected) {
          if (!sameBytes(expected, m.mac))
            return refused('did not prove it holds the job token (wrong token or an impostor)');
          parser.accept(ACCEPTS.clientReady);
          settled = true;
          resolve((client = make(conn, parser, o.where, o.timeoutMs, maxValue)));
        } else if (m.type === 'protocolError')
          finish(new WebcclError('PROTOCOL_ERROR', `store at ${o.where} hung up: ${m.message}`));
        else finish(new WebcclError('PROTOCOL_ERROR', `store at ${o.where} sent ${m.type} during the handshake`));
      });
      /** Runs `f` (which feeds the parser); a frame it cannot parse ends the connection. */
      const feed = (f: () => void) => {
        try {
          f();
        } catch (e) {
          if (client) return (client as StoreSession).fail(e as WebcclError);
          // A frame we cannot parse before the handshake: something else listens there.
          const why = WebcclError.is(e) ? e.reason : String(e);
          finish(
            new WebcclError(
              'PROTOCOL_ERROR',
              `the server at ${o.where} does not speak the webccl store protocol (${why}); is another program using MASTER_PORT?`,
            ),
          );
        }
      };
      events = {
        data: (chunk) => feed(() => parser.push(chunk)),
        close: () => {
          if (client)
            (client as StoreSession).fail(
              new WebcclError('CONNECTION_CLOSED', `connection to the store at ${o.where} closed`),
            );
          else if (!settled) finish(new Retry('the connection closed during the handshake'));
        },
      };
    });
    return { events, session };
  }
}
