// The rendezvous store's client session over any byte pipe (browser-safe): once the handshake
// (store-client-handshake.ts) has proven the token both ways, send requests tagged with ids so a
// blocked get never holds up a later set. A broken or closed connection fails every pending
// request with one error that lists them. The carriers are a TCP socket
// (bootstrap/nodejs/store-client.ts) and a WebSocket, Node's `ws` or a page's own
// (store-websocket-client.ts); the bytes are the same.
import { WebcclError } from '../core/errors.js';
import { textBytes } from '../wire/bytes.js';
import { bad, checkKey, wireTimeout } from './store-arguments.js';
import type { ConnEvents, StoreConn } from './store-carrier.js';
import { clientHandshake, type SessionOptions } from './store-client-handshake.js';
import { encode, type FrameParser, MAX_KEYS_FRAME_BYTES, type Message } from './store-protocol.js';

/** A value of the rendezvous store: bytes, or a string (stored as its UTF-8 bytes). */
export type StoreValue = Uint8Array | string;

interface Pending {
  what: string;
  done: (m: Message) => void;
  fail: (e: WebcclError) => void;
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

  /** Whether the session has ended (close(), or a failed or closed connection): every request then rejects. */
  get closed(): boolean {
    return this.failure !== undefined;
  }

  /** Lets a Node process exit while the store connection is open. */
  unref(): void {
    this.conn.unref?.();
  }

  /**
   * Sets `key` to `value`; resolves once the store has it, and rejects with INVALID_ARGUMENT for
   * an empty key, a key over 4096 UTF-8 bytes or a value over the limit.
   */
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

  /** How many keys the store holds. */
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
    return clientHandshake(conn, o, (parser, maxValue) => {
      const session = make(conn, parser, o.where, o.timeoutMs, maxValue);
      return {
        session,
        receive: (m) => (session as StoreSession).receive(m),
        fail: (e) => (session as StoreSession).fail(e),
      };
    });
  }
}
