// Tag spaces over one transport: a peer's ABORT reaches the communicator it names, and one
// that comes before that communicator is watched (a network progress thread opens each
// communicator at its rank's first op) is kept and delivered when it is, so that the account it
// carries (the fields ranks disagree on) is not lost.
import { describe, expect, it } from 'vitest';
import { WebcclError } from '../../src/core/errors.js';
import { TransportSpaces } from '../../src/transport/spaces.js';
import type { Transport, TransportWatcher } from '../../src/transport/transport.js';

/** A transport that only records its watcher (nothing is sent). */
function base(): { t: Transport; watcher: () => TransportWatcher } {
  let w: TransportWatcher | undefined;
  const never = () => new Promise<void>(() => undefined);
  const t: Transport = {
    rank: 0,
    size: 3,
    send: never,
    recv: never,
    close: () => undefined,
    abort: () => undefined,
    watch: (x) => void (w = x),
  };
  return { t, watcher: () => w! };
}

/** A watcher that lists the ABORTs it hears. */
function listener(): { w: TransportWatcher; heard: WebcclError[] } {
  const heard: WebcclError[] = [];
  return { w: { unexpected: () => false, aborted: (e) => void heard.push(e) }, heard };
}

const abortOf = (space?: number) =>
  new WebcclError('MISMATCH', `ranks disagree (space ${space})`, {
    by: 1,
    seq: 0,
    ...(space !== undefined && { space }),
  });

describe('TransportSpaces and ABORTs', () => {
  it('an ABORT for a space watched already reaches that space only', () => {
    const { t, watcher } = base();
    const spaces = new TransportSpaces(t);
    const a = listener();
    const b = listener();
    spaces.open(0, [0, 1, 2], 0).watch!(a.w);
    spaces.open(5, [0, 1], 0).watch!(b.w);
    const e = abortOf(5);
    watcher().aborted(e);
    expect(b.heard).toEqual([e]);
    expect(a.heard).toEqual([]);
  });

  it('an ABORT for a space nobody watches yet is kept, and delivered once, when it is watched', () => {
    const { t, watcher } = base();
    const spaces = new TransportSpaces(t);
    const e = abortOf(7);
    watcher().aborted(e);
    const later = listener();
    spaces.open(7, [0, 2], 0).watch!(later.w);
    expect(later.heard).toEqual([e]);
    // Another communicator does not hear it; and a space's own ABORTs are not replayed twice.
    const other = listener();
    spaces.open(8, [0, 1], 0).watch!(other.w);
    expect(other.heard).toEqual([]);
  });

  it("the world's ABORT reaches every communicator, those watched later too", () => {
    const { t, watcher } = base();
    const spaces = new TransportSpaces(t);
    const early = listener();
    spaces.open(3, [0, 1], 0).watch!(early.w);
    const e = abortOf();
    watcher().aborted(e);
    const late = listener();
    spaces.open(0, [0, 1, 2], 0).watch!(late.w);
    expect(early.heard).toEqual([e]);
    expect(late.heard).toEqual([e]);
  });
});
