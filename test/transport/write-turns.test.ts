// WriteTurns, the order of a connection's frames (src/transport/mesh/write-turns.ts): a small
// frame nothing waits before goes at once, in the caller's turn; one behind a full carrier waits,
// with every later frame behind it in order; once all have gone, frames go at once again. A large
// frame goes after the caller's turn, the frames after it behind it.
import { describe, expect, it } from 'vitest';
import { WebcclError } from '../../src/core/errors.js';
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
    void w.write(8, c.put('a'));
    expect(c.got).toEqual(['a']);
    void w.write(8, c.put('b'));
    expect(c.got).toEqual(['a', 'b']);
  });

  it('a write settles as its frame ends it', async () => {
    const w = new WriteTurns();
    await expect(w.write(8, (end) => void end.ok())).resolves.toBeUndefined();
    const e = new WebcclError('CONNECTION_CLOSED', 'gone');
    await expect(w.write(AT_ONCE_MAX + 1, (end) => void end.fail(e))).rejects.toBe(e);
  });

  it('frames behind a full carrier wait, in order, then go at once again', async () => {
    const w = new WriteTurns();
    const c = carrier();
    c.full = true;
    void w.write(8, c.put('a')); // fills the carrier
    c.full = false;
    void w.write(8, c.put('b'));
    void w.write(8, c.put('c'));
    await turn();
    expect(c.got).toEqual(['a']);
    c.release();
    await turn();
    expect(c.got).toEqual(['a', 'b', 'c']);
    void w.write(8, c.put('d'));
    expect(c.got).toEqual(['a', 'b', 'c', 'd']);
  });

  it('a frame that fills the carrier while queued holds those after it', async () => {
    const w = new WriteTurns();
    const c = carrier();
    c.full = true;
    void w.write(8, c.put('a'));
    void w.write(8, c.put('b')); // queued; fills the carrier again when it goes
    void w.write(8, c.put('c'));
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
    void w.write(AT_ONCE_MAX + 1, c.put('big'));
    void w.write(8, c.put('small'));
    expect(c.got).toEqual([]);
    await turn();
    expect(c.got).toEqual(['big', 'small']);
    void w.write(AT_ONCE_MAX, c.put('next'));
    expect(c.got).toEqual(['big', 'small', 'next']);
  });
});
