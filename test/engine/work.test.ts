// The op handle's waits (work.ts): what `await work`, then(), wait() and waitSync() do with an op
// still pending, on a thread that may block, against a driver that ends it when asked.
import { describe, expect, it } from 'vitest';
import { WebcclError } from '../../src/core/errors.js';
import { Work, type WorkDriver } from '../../src/engine/work.js';

/** A driver that ends its op when first driven with block (with `err`), counting the waits it is told of. */
function driver(err?: WebcclError) {
  const d = {
    waits: 0,
    blocking: 0,
    waiting: () => {
      d.waits++;
    },
    progress: (w: Work, block: boolean) => {
      if (!block) return;
      d.blocking++;
      w.settle(err);
    },
    progressAsync: async (w: Work) => w.settle(err),
  } satisfies WorkDriver & Record<string, unknown>;
  return d;
}

describe('Work', () => {
  it('then() on a pending op ends it and runs the callback in one job', async () => {
    const d = driver();
    const w = new Work('allReduce', 0, d, true);
    let ran = false;
    void w.then(() => {
      ran = true;
    });
    expect(ran).toBe(false); // nothing blocks inside then(): the caller's code runs on first
    await null; // one job: the op's and the callback's
    expect(ran).toBe(true);
    expect(w.observed).toBe(true);
    expect(d.waits).toBe(1);
    expect(d.blocking).toBe(1);
  });

  it('a failed op reaches onFail; an error thrown by onDone rejects and never reaches onFail', async () => {
    const err = new WebcclError('MISMATCH', 'allReduce #0: ranks disagree');
    const failed = new Work('allReduce', 0, driver(err), true);
    await expect(
      failed.then(
        () => 'done',
        (e) => e,
      ),
    ).resolves.toBe(err);
    await expect(new Work('allReduce', 1, driver(err), true).then()).rejects.toBe(err);
    const boom = new Error('in the callback');
    let failures = 0;
    const ok = new Work('allReduce', 2, driver(), true);
    await expect(
      ok.then(
        () => {
          throw boom;
        },
        () => failures++,
      ),
    ).rejects.toBe(boom);
    expect(failures).toBe(0);
  });

  it('the driver hears of the wait once, whichever of then(), wait() and waitSync() come', async () => {
    const d = driver();
    const w = new Work('broadcast', 0, d, true);
    const a = w.then(() => 1);
    const b = w.wait();
    w.waitSync();
    expect(await a).toBe(1);
    await b;
    await w;
    expect(d.waits).toBe(1);
    expect(d.blocking).toBe(1);
  });

  it('an op that cannot block the thread is awaited through the driver without blocking', async () => {
    const d = driver();
    const w = new Work('allGather', 0, d, false);
    expect(() => w.waitSync()).toThrow(/waitSync\(\)/);
    await w;
    expect(d.blocking).toBe(0);
    expect(w.observed).toBe(true);
  });
});
