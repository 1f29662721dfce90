// stallRoot: a timed-out rank follows "whom does it wait for" through the job's store to the rank
// at the root of the stall. Here the store is a map in memory that can also go away mid-chain,
// as the real one does when rank 0 (which serves it) fails and ends first.
import { describe, expect, it } from 'vitest';
import { WebcclError } from '../../src/core/errors.js';
import { type JobStore, stallRoot } from '../../src/net/blame.js';

/** A store holding `entries` (rank → ranks it awaits); it stops answering after `answers` gets. */
function memoryStore(entries: Record<number, number[]>, answers = Infinity): JobStore & { keys: Map<string, string> } {
  const keys = new Map<string, string>(
    Object.entries(entries).map(([r, awaited]) => [`webccl/stall/${r}`, JSON.stringify({ seq: 7, awaited })]),
  );
  let gets = 0;
  return {
    keys,
    set: async (k, v) => {
      keys.set(k, v);
    },
    get: async (k) => {
      if (++gets > answers) throw new WebcclError('CONNECTION_CLOSED', 'store connection closed');
      const v = keys.get(k);
      if (v === undefined) throw new WebcclError('STORE_TIMEOUT', `key ${k} not set`);
      return new TextEncoder().encode(v);
    },
    wait: async () => undefined,
    compareSet: async () => null,
  };
}

describe('stallRoot', () => {
  it('publishes whom this rank waits for', async () => {
    const store = memoryStore({});
    await stallRoot(store, 1, 7, [0], 50);
    expect(JSON.parse(store.keys.get('webccl/stall/1')!)).toEqual({ seq: 7, awaited: [0] });
  });

  it('follows the chain to a rank that has not said whom it waits for', async () => {
    expect(await stallRoot(memoryStore({ 0: [2] }), 1, 7, [0], 50)).toEqual({ missing: [2], chain: [1, 0] });
  });

  it('a rank the store knows nothing of is the root itself', async () => {
    expect(await stallRoot(memoryStore({}), 1, 7, [0], 50)).toEqual({ missing: [0], chain: [1] });
  });

  it('a store that goes away mid-chain leaves the deepest rank known (not the node mate waiting on it)', async () => {
    expect(await stallRoot(memoryStore({ 0: [2] }, 1), 1, 7, [0], 50)).toEqual({ missing: [2], chain: [1, 0] });
  });

  it('a store that cannot answer at the first step, a cycle, or no store: just the ranks waited for', async () => {
    expect(await stallRoot(memoryStore({ 0: [2] }, 0), 1, 7, [0, 3], 50)).toEqual({ missing: [0, 3], chain: [] });
    expect(await stallRoot(memoryStore({ 0: [2], 2: [1] }), 1, 7, [0], 50)).toEqual({ missing: [0], chain: [] });
    expect(await stallRoot(undefined, 1, 7, [0], 50)).toEqual({ missing: [0], chain: [] });
  });
});
