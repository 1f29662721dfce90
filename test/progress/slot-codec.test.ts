// An op's outcome through its postbox slot (src/progress/slot-codec.ts): an op that ended well
// goes as words, one that failed as JSON; a time the op never reached (NaN: it failed before it
// started) must read back as NaN either way, not as JSON's null turned into a number.
import { describe, expect, it } from 'vitest';
import { SLOT_BYTES } from '../../src/progress/postboxes.js';
import { readOutcome, slotViews, writeOutcome } from '../../src/progress/slot-codec.js';

const memory = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
const slot = 8 * SLOT_BYTES;

describe('outcome slots', () => {
  it('an op that ended well: its times as written', () => {
    const v = slotViews(memory);
    writeOutcome(memory, v, slot, { startedAt: 10.5, completedAt: 12.25, joinedAt: NaN });
    const o = readOutcome(memory, v, slot);
    expect([o.startedAt, o.completedAt, o.joinedAt]).toEqual([10.5, 12.25, NaN]);
  });

  it('an op that failed before it started: startedAt and joinedAt read back NaN', () => {
    const v = slotViews(memory);
    const error = { code: 'ABORTED' as const, message: 'aborted', details: { by: 1 } };
    writeOutcome(memory, v, slot, { startedAt: NaN, completedAt: 99, joinedAt: NaN, error });
    const o = readOutcome(memory, v, slot);
    expect([o.startedAt, o.completedAt, o.joinedAt]).toEqual([NaN, 99, NaN]);
    expect(o.error).toEqual(error);
  });
});
