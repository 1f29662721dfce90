// What a communicator remembers of the ops in flight (in-flight.ts), and the lists it keeps them
// in (keep-list.ts): bounded by what the caller has not yet seen end, whatever ops it issues.
import { describe, expect, it } from 'vitest';
import { BuffersInFlight } from '../../src/api/in-flight.js';
import { KeepList, KeepQueue } from '../../src/core/keep-list.js';
import { toBuf } from '../../src/engine/buffers.js';
import { Work, type WorkDriver } from '../../src/engine/work.js';
import { inprocRanks, settleAll } from '../helpers/inproc.js';

const idle: WorkDriver = { progress: () => undefined, progressAsync: async () => undefined };
/** An op that ended; the caller sees it end with see(). */
function ended(name: string, seq: number): Work {
  const w = new Work(name, seq, idle, true);
  w.settle();
  return w;
}
const see = (w: Work) => w.waitSync();
const buf = (bytes: number) => toBuf(new Uint8Array(bytes), 'buffer', () => false);

describe('BuffersInFlight', () => {
  it('forgets ops without buffers once seen: a loop of barriers keeps no record of each (it grew by ~300 B an op)', () => {
    const f = new BuffersInFlight();
    for (let i = 0; i < 10_000; i++) {
      const w = ended('barrier', i);
      f.add(w, null, null);
      see(w);
    }
    expect(f.size).toBeLessThanOrEqual(1);
  });

  it('keeps what the caller has not seen end, and refuses its buffers', () => {
    const f = new BuffersInFlight();
    const x = buf(16);
    f.add(ended('allReduce', 0), x, x);
    for (let i = 1; i < 100; i++) {
      const w = ended('send', i);
      f.add(w, null, null);
      see(w);
    }
    expect(f.size).toBe(1); // the allReduce (each send, seen to end before the next op, is never recorded)
    expect(f.heldBy(x)).toBe('allReduce #0');
  });

  it('a later collective seen ending releases earlier collectives, not sends or recvs', () => {
    const f = new BuffersInFlight();
    const x = buf(8),
      y = buf(8),
      z = buf(8);
    f.add(ended('allReduce', 0), x, x);
    f.add(ended('send', 0), y, null);
    expect(f.heldBy(x)).toBe('allReduce #0');
    const b = ended('barrier', 1);
    f.add(b, null, null);
    expect(f.heldBy(x)).toBe('allReduce #0');
    see(b);
    expect(f.heldBy(x)).toBeUndefined();
    expect(f.heldBy(y)).toBe('send #0');
    expect(f.heldBy(z)).toBeUndefined();
  });

  it('the send or recv added last holds its buffer at once, though recorded only at the next call', () => {
    const f = new BuffersInFlight();
    const x = buf(8);
    const s = ended('send', 0);
    f.add(s, x, null);
    expect(f.heldBy(x)).toBe('send #0');
    expect(f.unsettled()).toEqual([]); // (it ended; the caller has not seen it)
    expect(f.size).toBe(1);
    see(s);
    expect(f.heldBy(x)).toBeUndefined();
    const r = ended('recv', 1);
    f.add(r, null, x);
    see(r); // seen before the next call: never recorded
    expect(f.size).toBe(0);
  });

  it('a collective released unseen and seen later does not count twice: later ops still hold their buffers', () => {
    // The record empties itself without a look once it counts no op unseen; a count that went
    // low would let a buffer in flight be taken.
    const f = new BuffersInFlight();
    const x = buf(8),
      y = buf(8),
      z = buf(8);
    const a = ended('allReduce', 0);
    f.add(a, x, x);
    const b = ended('allReduce', 1);
    f.add(b, y, y);
    see(b); // releases a, unseen
    expect(f.heldBy(x)).toBeUndefined();
    const s = ended('send', 0);
    f.add(s, z, null);
    see(a); // a's own end: already released, counts for nothing now
    expect(f.heldBy(z)).toBe('send #0');
    see(s);
    expect(f.heldBy(z)).toBeUndefined();
    expect(f.size).toBe(0);
  });

  it('a burst of ops on distinct buffers, none waited: each is found, none released', () => {
    const f = new BuffersInFlight();
    const bufs = Array.from({ length: 300 }, () => buf(4));
    bufs.forEach((b, i) => f.add(ended('send', i), b, null));
    expect(f.size).toBe(300);
    expect(f.heldBy(bufs[123])).toBe('send #123');
    expect(f.heldBy(buf(4))).toBeUndefined();
  });
});

describe('KeepQueue and KeepList', () => {
  it('a queue takes items in order through emptying, refilling and growing past its storage', () => {
    const q = new KeepQueue<number>();
    let next = 0,
      want = 0;
    for (let round = 0; round < 50; round++) {
      for (let k = 0; k < (round % 7) + 1; k++) q.push(next++);
      for (let k = 0; k < (round % 5) + 1 && q.length; k++) {
        expect(q.peek()).toBe(want);
        expect(q.shift()).toBe(want++);
      }
    }
    expect([...q]).toEqual(Array.from({ length: next - want }, (_, i) => want + i));
    q.clear();
    expect(q.length).toBe(0);
    expect(q.shift()).toBeUndefined();
    expect(q.peek()).toBeUndefined();
  });

  it('a list compacts in place and clears what it drops', () => {
    const l = new KeepList<{ v: number }>();
    for (let i = 0; i < 10; i++) l.push({ v: i });
    let kept = 0;
    for (let i = 0; i < l.length; i++) if (l.at(i).v % 3 === 0) l.set(kept++, l.at(i));
    l.truncate(kept);
    expect([...l].map((o) => o.v)).toEqual([0, 3, 6, 9]);
    l.clear();
    expect(l.length).toBe(0);
    l.push({ v: 42 });
    expect(l.at(0).v).toBe(42);
  });
});

describe('a communicator after many ops without buffers', () => {
  it('2 ranks, 2000 barriers: the in-flight record stays bounded', async () => {
    const comms = inprocRanks(2);
    for (let i = 0; i < 2000; i++) await settleAll(comms.map((c) => c.barrier()));
    for (const c of comms)
      expect((c as unknown as { issue: { inFlight: BuffersInFlight } }).issue.inFlight.size).toBeLessThanOrEqual(1);
    comms.forEach((c) => c.destroy());
  });
});
