// WriteTurns, the order of a connection's frames (src/transport/mesh/write-turns.ts): a small
// frame nothing waits before goes at once, in the caller's turn; one behind a full carrier waits,
// with every later frame behind it in order; once all have gone, frames go at once again. A large
// frame goes after the caller's turn, the frames after it behind it.
import { describe, expect, it } from 'vitest';
import { AT_ONCE_MAX, WriteTurns } from '../../src/transport/mesh/write-turns.js';

/** A carrier that takes frames into `got` and is full while `full` is set (its drain: release()). */
function carrier() {
  const got: string[] = [];
  let drained: () => void = () => {};
  const c = {
    got,
    full: false,
    put: (name: string) => () => {
      got.push(name);
      if (!c.full) return undefined;
      return new Promise<void>((r) => {
        drained = r;
      });
    },
    release: () => {
      c.full = false;
      drained();
    },
  };
  return c;
}

const turn = () => new Promise((r) => setTimeout(r, 0));

describe('WriteTurns', () => {
  it('a frame nothing waits before goes in the caller’s turn', () => {
    const w = new WriteTurns();
    const c = carrier();
    w.run(c.put('a'), 8);
    expect(c.got).toEqual(['a']);
    w.run(c.put('b'), 8);
    expect(c.got).toEqual(['a', 'b']);
  });

  it('frames behind a full carrier wait, in order, then go at once again', async () => {
    const w = new WriteTurns();
    const c = carrier();
    c.full = true;
    w.run(c.put('a'), 8); // fills the carrier
    c.full = false;
    w.run(c.put('b'), 8);
    w.run(c.put('c'), 8);
    await turn();
    expect(c.got).toEqual(['a']);
    c.release();
    await turn();
    expect(c.got).toEqual(['a', 'b', 'c']);
    w.run(c.put('d'), 8);
    expect(c.got).toEqual(['a', 'b', 'c', 'd']);
  });

  it('a frame that fills the carrier while queued holds those after it', async () => {
    const w = new WriteTurns();
    const c = carrier();
    c.full = true;
    w.run(c.put('a'), 8);
    w.run(c.put('b'), 8); // queued; fills the carrier again when it goes
    w.run(c.put('c'), 8);
    c.release();
    c.full = true;
    await turn();
    expect(c.got).toEqual(['a', 'b']);
    c.release();
    await turn();
    expect(c.got).toEqual(['a', 'b', 'c']);
  });

  it('a large frame goes after the caller’s turn, and a small one issued behind it after it', async () => {
    const w = new WriteTurns();
    const c = carrier();
    w.run(c.put('big'), AT_ONCE_MAX + 1);
    w.run(c.put('small'), 8);
    expect(c.got).toEqual([]);
    await turn();
    expect(c.got).toEqual(['big', 'small']);
    w.run(c.put('next'), AT_ONCE_MAX);
    expect(c.got).toEqual(['big', 'small', 'next']);
  });
});
