// The rendezvous store's key-value table and the gets and waits parked on it: the request
// semantics (set, get, wait, add, compareSet, delete, numKeys), apart from any connection, so
// that every carrier (TCP, TLS, WebSocket) serves the same table the same way.
import { WebcclError } from '../../core/errors.js';
import { textBytes } from '../../wire/bytes.js';
import { type Message, NO_DEADLINE } from '../store-protocol.js';

export type Reply = (m: Message) => void;

/** A get or wait parked until its keys exist or its deadline passes. */
export interface Waiter {
  id: number;
  reply: Reply;
  missing: Set<string>;
  /** For a get: the key whose value answers it. */
  get?: string;
  timer?: ReturnType<typeof setTimeout>;
}

const SAFE = BigInt(Number.MAX_SAFE_INTEGER);

function equalValues(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && Buffer.from(a.buffer, a.byteOffset, a.length).equals(b);
}

/** The key-value map and its waiters; knows nothing of sockets. */
export class Table {
  readonly data = new Map<string, Uint8Array>();
  private readonly waiting = new Map<string, Set<Waiter>>();

  put(key: string, value: Uint8Array): void {
    this.data.set(key, value);
    const ws = this.waiting.get(key);
    if (!ws) return;
    this.waiting.delete(key);
    for (const w of ws) {
      w.missing.delete(key);
      if (w.missing.size === 0)
        this.finish(
          w,
          w.get === undefined
            ? { type: 'ok', id: w.id }
            : { type: 'value', id: w.id, value: this.data.get(w.get) ?? null },
        );
    }
  }

  park(w: Waiter, timeoutMs: number): void {
    for (const k of w.missing) {
      let ws = this.waiting.get(k);
      if (!ws) this.waiting.set(k, (ws = new Set()));
      ws.add(w);
    }
    if (timeoutMs !== NO_DEADLINE) {
      w.timer = setTimeout(
        () => this.finish(w, { type: 'timeout', id: w.id, keys: [...w.missing] }),
        Math.min(timeoutMs, 0x7fffffff),
      );
    }
  }

  /** Forgets every key; only when no connection is left, so no waiter either. */
  clear(): void {
    this.data.clear();
    for (const ws of this.waiting.values()) for (const w of ws) this.finish(w);
    this.waiting.clear();
  }

  /** Answers a waiter (or drops it when `m` is undefined) and forgets it. */
  finish(w: Waiter, m?: Message): void {
    clearTimeout(w.timer);
    for (const k of w.missing) {
      const ws = this.waiting.get(k);
      ws?.delete(w);
      if (ws?.size === 0) this.waiting.delete(k);
    }
    w.missing.clear();
    if (m) w.reply(m);
  }

  /** Serves one authenticated request; returns the parked waiter, if any. */
  // biome-ignore lint/suspicious/noConfusingVoidType: void when a reply was sent, a Waiter when one was parked
  serve(m: Message, reply: Reply): Waiter | void {
    const { data } = this;
    switch (m.type) {
      case 'set':
        this.put(m.key, m.value);
        return reply({ type: 'ok', id: m.id });
      case 'get': {
        const value = data.get(m.key);
        if (value) return reply({ type: 'value', id: m.id, value });
        return this.waitFor({ id: m.id, reply, missing: new Set([m.key]), get: m.key }, m.timeoutMs);
      }
      case 'wait':
        return this.waitFor({ id: m.id, reply, missing: new Set(m.keys.filter((k) => !data.has(k))) }, m.timeoutMs);
      case 'add': {
        const old = data.get(m.key);
        const text = old === undefined ? '0' : Buffer.from(old).toString('latin1');
        if (!/^-?[0-9]{1,16}$/.test(text))
          return reply({ type: 'error', id: m.id, message: `add("${m.key}"): the value is not an integer counter` });
        const sum = BigInt(text) + m.delta;
        if (sum > SAFE || sum < -SAFE)
          return reply({ type: 'error', id: m.id, message: `add("${m.key}"): ${sum} is beyond a safe integer` });
        this.put(m.key, textBytes(sum.toString()));
        return reply({ type: 'number', id: m.id, value: sum });
      }
      case 'compareSet': {
        const cur = data.get(m.key);
        const match = cur === undefined ? m.expected === null : m.expected !== null && equalValues(cur, m.expected);
        if (match) this.put(m.key, m.desired.slice());
        return reply({ type: 'value', id: m.id, value: data.get(m.key) ?? null });
      }
      case 'delete':
        return reply({ type: 'number', id: m.id, value: data.delete(m.key) ? 1n : 0n });
      case 'numKeys':
        return reply({ type: 'number', id: m.id, value: BigInt(data.size) });
      default:
        throw new WebcclError('PROTOCOL_ERROR', `${m.type} is not a request`);
    }
  }

  // biome-ignore lint/suspicious/noConfusingVoidType: void when a reply was sent, a Waiter when one was parked
  private waitFor(w: Waiter, timeoutMs: number): Waiter | void {
    if (w.missing.size === 0) return w.reply({ type: 'ok', id: w.id });
    this.park(w, timeoutMs);
    return w;
  }
}
