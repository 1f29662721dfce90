// Issuing one op per rank and collecting how each ended: 'ok', or its error's code, details and
// message, with the time from issue (for "fails at once" bounds).
import type { Communicator } from '../../src/api/communicator.js';
import type { Work } from '../../src/engine/work.js';

export interface Outcome {
  code: string;
  details: Record<string, any>;
  message: string;
  ms: number;
}

/** Issues one op per rank (none where `issue` returns undefined: code 'none'); each rank's outcome. */
export async function outcomes(
  comms: Communicator[],
  issue: (c: Communicator, r: number) => Work | undefined,
): Promise<Outcome[]> {
  const t0 = performance.now();
  return Promise.all(
    comms.map(async (c, r) => {
      const w = issue(c, r);
      if (!w) return { code: 'none', details: {}, message: '', ms: 0 };
      return w.wait().then(
        () => ({ code: 'ok', details: {}, message: '', ms: performance.now() - t0 }),
        (e: any) => ({ code: e.code, details: e.details, message: e.message, ms: performance.now() - t0 }),
      );
    }),
  );
}
