// Many ranks of one node in the test's own thread: each rank's ops progress without blocking,
// and the harness polls them round-robin until all complete. This exercises the whole protocol
// on the TypeScript sources; test/ranks/ runs the same on real worker threads.

import { Communicator } from '../../src/api/communicator.js';
import { joinNode } from '../../src/engine/context.js';
import type { Work } from '../../src/engine/work.js';
import { createNode } from '../../src/progress/create-node.js';

/**
 * `cores`: the cores the ranks take the machine to have (default: what joinNode finds, 1 under Node 20, so the ranks
 * count as outnumbering them).
 */
export function inprocRanks(
  n: number,
  o: { slotBytes?: number; simd?: boolean; timeoutMs?: number; cores?: number } = {},
): Communicator[] {
  const node = createNode({ nranks: n, slotBytes: o.slotBytes ?? 4096, progress: false });
  return Array.from(
    { length: n },
    (_, r) =>
      new Communicator(joinNode(node, r, { simd: o.simd, spinUs: 0, cores: o.cores }), {
        timeoutMs: o.timeoutMs ?? 20_000,
      }),
  );
}

/** Polls until every work completes; returns the errors (undefined where an op succeeded). */
export async function settleAll(works: Work[], limitMs = 20_000): Promise<(Error | undefined)[]> {
  const t0 = performance.now();
  // Poll every rank each round (every() would stop at the first pending one and starve the rest).
  while (!works.map((w) => w.isCompleted()).every(Boolean)) {
    if (performance.now() - t0 > limitMs) throw new Error(`settleAll: ops still pending after ${limitMs} ms`);
  }
  return Promise.all(
    works.map((w) =>
      w.wait().then(
        () => undefined,
        (e: Error) => e,
      ),
    ),
  );
}

/** Runs one op per rank (issued in rank order) and fails the test with the first error. */
export async function together(comms: Communicator[], issue: (c: Communicator, r: number) => Work): Promise<void> {
  const errs = await settleAll(comms.map((c, r) => issue(c, r)));
  const e = errs.find((x) => x);
  if (e) throw e;
}
