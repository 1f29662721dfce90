// Data that crosses one hop unreduced (a broadcast or an allgather between 2 ranks) is cut into
// one piece per connection of the pair (Group.lanes) from SPLIT_MIN_BYTES on, each piece under
// its own step (consecutive steps take different connections: link-table.ts), and arrives whole.
// Two ranks in one process over an in-memory group that records every message.
import { describe, expect, it } from 'vitest';
import { chainBroadcast } from '../../src/algorithms/chain.js';
import {
  type Group,
  type Mem,
  SINGLE_HOP_PIECE_BYTES,
  SPLIT_MIN_BYTES,
  type Span,
  singleHopPieces,
} from '../../src/algorithms/group.js';
import { ringAllGather } from '../../src/algorithms/ring.js';

interface Sent {
  from: number;
  step: number;
  bytes: number;
}

/** Two ranks' groups joined in memory; `log` records every message sent. */
function pair(lanes: number | undefined, log: Sent[]): Group[] {
  const waiting = new Map<string, { into: Uint8Array; resolve: () => void; reject: (e: Error) => void }>();
  const arrived = new Map<string, Uint8Array>();
  const deliver = (
    key: string,
    data: Uint8Array,
    into: Uint8Array,
    resolve: () => void,
    reject: (e: Error) => void,
  ) => {
    if (data.length !== into.length) return reject(new Error(`${key}: ${data.length} bytes for ${into.length}`));
    into.set(data);
    resolve();
  };
  return [0, 1].map((rank) => ({
    rank,
    size: 2,
    lanes,
    send: async (peer: number, step: number, data: Uint8Array) => {
      log.push({ from: rank, step, bytes: data.length });
      const key = `${rank}>${peer}:${step}`;
      const w = waiting.get(key);
      if (w) {
        waiting.delete(key);
        deliver(key, data, w.into, w.resolve, w.reject);
      } else arrived.set(key, data.slice());
    },
    recv: (peer: number, step: number, into: Uint8Array) =>
      new Promise<void>((resolve, reject) => {
        const key = `${peer}>${rank}:${step}`;
        const data = arrived.get(key);
        if (data) {
          arrived.delete(key);
          deliver(key, data, into, resolve, reject);
        } else waiting.set(key, { into, resolve, reject });
      }),
  }));
}

/** An op's memory of `bytes` bytes (f32 elements), with the reductions unused here. */
function memory(bytes: number): { m: Mem; u8: Uint8Array } {
  const u8 = new Uint8Array(bytes);
  const m: Mem = {
    elemBytes: 4,
    view: (addr, count) => u8.subarray(addr, addr + count * 4),
    copy: (dst, src, count) => u8.copyWithin(dst, src, src + count * 4),
    reduce: () => {
      throw new Error('no reduction here');
    },
    reduceFrom: () => {
      throw new Error('no reduction here');
    },
    scratch: () => {
      throw new Error('no scratch here');
    },
  };
  return { m, u8 };
}

const fill = (u8: Uint8Array, seed: number) => {
  for (let i = 0; i < u8.length; i++) u8[i] = (i * 7 + seed * 13) & 0xff;
};
/** Byte-equal, compared natively (an element-by-element deep equal of MiBs is slow). */
const same = (a: Uint8Array, b: Uint8Array) => Buffer.from(a.buffer, a.byteOffset, a.length).equals(b);
/** The data messages (not the 0-byte ack) each rank sent. */
const data = (log: Sent[], from: number) => log.filter((s) => s.from === from && s.bytes > 0);

describe('one-hop data across the connections of a pair', () => {
  const sizes = [SPLIT_MIN_BYTES - 4, SPLIT_MIN_BYTES, SPLIT_MIN_BYTES + 12, 3 * SPLIT_MIN_BYTES + 4];

  for (const lanes of [undefined, 1, 2, 3]) {
    it(`broadcast between 2 ranks, ${lanes ?? 'no'} lanes: one piece per lane from SPLIT_MIN_BYTES, the data whole`, async () => {
      for (const bytes of sizes) {
        const log: Sent[] = [];
        const groups = pair(lanes, log);
        const mems = [memory(bytes), memory(bytes)];
        fill(mems[0].u8, 1);
        const span: Span = { addr: 0, count: bytes / 4 };
        await Promise.all(groups.map((g, r) => chainBroadcast(g, mems[r].m, span, 0)));
        expect(same(mems[1].u8, mems[0].u8)).toBe(true);
        const want = bytes >= SPLIT_MIN_BYTES ? (lanes ?? 1) : 1;
        const sent = data(log, 0);
        expect(
          sent.map((s) => s.step),
          `${bytes} B`,
        ).toEqual([...Array(want).keys()]);
        expect(sent.reduce((t, s) => t + s.bytes, 0)).toBe(bytes);
        expect(Math.max(...sent.map((s) => s.bytes)) - Math.min(...sent.map((s) => s.bytes))).toBeLessThanOrEqual(4);
      }
    });

    it(`allgather between 2 ranks, ${lanes ?? 'no'} lanes: each block in one piece per lane from SPLIT_MIN_BYTES, the data whole`, async () => {
      for (const block of sizes) {
        const log: Sent[] = [];
        const groups = pair(lanes, log);
        const mems = [memory(2 * block), memory(2 * block)];
        const blocks: Span[] = [0, 1].map((r) => ({ addr: r * block, count: block / 4 }));
        for (const r of [0, 1]) fill(mems[r].u8.subarray(r * block, (r + 1) * block), r + 1);
        await Promise.all(groups.map((g, r) => ringAllGather(g, mems[r].m, blocks)));
        expect(same(mems[1].u8, mems[0].u8)).toBe(true);
        const want = block >= SPLIT_MIN_BYTES ? (lanes ?? 1) : 1;
        for (const r of [0, 1]) {
          const sent = data(log, r);
          expect(
            sent.map((s) => s.step).sort((a, b) => a - b),
            `${block} B blocks`,
          ).toEqual([...Array(want).keys()]);
          expect(sent.reduce((t, s) => t + s.bytes, 0)).toBe(block);
        }
      }
    });
  }

  it('how many pieces: one per lane from SPLIT_MIN_BYTES, and none over SINGLE_HOP_PIECE_BYTES however few lanes', () => {
    const S = SINGLE_HOP_PIECE_BYTES;
    expect(singleHopPieces(SPLIT_MIN_BYTES - 1, 4)).toBe(1);
    expect(singleHopPieces(SPLIT_MIN_BYTES, 4)).toBe(4);
    expect(singleHopPieces(SPLIT_MIN_BYTES)).toBe(1);
    expect(singleHopPieces(2 * S + 1, 2)).toBe(3);
    expect(singleHopPieces(2 * S + 1, 5)).toBe(5);
    expect(singleHopPieces(0, 2)).toBe(1);
  });
});
