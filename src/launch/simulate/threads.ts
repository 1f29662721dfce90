// A size-only simulation split over worker threads: each runs the ranks of every T-th node
// (src/sim/world.ts with a SharedBorder, which says which), and they meet at the end of every
// window of virtual time. The result is the same as on one thread, message for message (the order of
// events and of messages through interfaces does not depend on the split, and the trace hash is
// a sum); what changes is the wall time: each thread holds its share of the ranks' state, which
// at thousands of ranks is what decides the speed (the state of all of them outgrows the caches).
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { fail, WebcclError } from '../../core/errors.js';
import {
  collectivePart,
  type RankOutcome,
  type SimCall,
  type SimOptions,
  type SimResult,
  simulateCollective,
} from '../../sim/index.js';
import { abandon, borderBuffer } from './shared-border.js';

export { abandon, borderBuffer, SharedBorder } from './shared-border.js';

/** Words of each thread's outbox (8 MiB): a window's records beyond it go over in rounds. */
const OUTBOX_WORDS = 1 << 20;
/** From this many ranks `threads: 'auto'` uses every core: below, one thread is as fast. */
const AUTO_FROM_RANKS = 1024;

declare const __dirname: string | undefined;

function workerPath(): string {
  const path =
    typeof __dirname === 'string'
      ? `${__dirname}/sim-worker.js`
      : fileURLToPath(new URL('./sim-worker.js', import.meta.url));
  // Run from the TypeScript sources, there is no bundle beside this module: say so.
  if (!existsSync(path))
    fail(
      'INTERNAL',
      `simulate: the simulation threads' entry ${path} is missing: run the built package (npm run build)`,
    );
  return path;
}

/** Why a run must stay on one thread (data mode, faults, a kept trace), or undefined. */
function oneThreadOnly(o: SimOptions): string | undefined {
  if (o.mode !== 'size') return 'several threads run size-only simulations (data mode runs on one)';
  if (o.faults?.length) return 'several threads run simulations without faults (faults run on one)';
  if (o.trace) return 'several threads keep no trace (a trace runs on one)';
  return undefined;
}

/** Threads a run uses: a count, or 'auto' (every core from 1,024 ranks); never more than nodes. */
export function simThreads(o: SimOptions, threads: number | 'auto'): number {
  if (threads !== 'auto' && (!Number.isSafeInteger(threads) || threads < 1))
    fail('INVALID_ARGUMENT', `simulate: threads must be a positive integer or 'auto', got ${threads}`);
  const want =
    threads === 'auto' ? (o.ranks >= AUTO_FROM_RANKS && !oneThreadOnly(o) ? availableParallelism() : 1) : threads;
  return Math.max(1, Math.min(want, o.nodes));
}

export interface WorkerJob {
  o: SimOptions;
  call: SimCall;
  sab: SharedArrayBuffer;
  thread: number;
  threads: number;
  /** Whether the barrier may spin (every thread has a core). */
  spin: boolean;
}

/** A rank's outcome as it crosses from a worker (a WebcclError does not survive structured clone). */
export type PlainOutcome = Omit<RankOutcome, 'error'> & {
  error?: { code: WebcclError['code']; reason: string; details: Record<string, unknown> };
};

export async function simulateOnThreads(o: SimOptions, call: SimCall, threads: number | 'auto'): Promise<SimResult> {
  const t = simThreads(o, threads);
  if (t === 1) return simulateCollective(o, call);
  const why = oneThreadOnly(o);
  if (why) fail('INVALID_ARGUMENT', `simulate: ${why}`);
  collectivePart(o, call); // checks the call here, before any thread starts
  const sab = borderBuffer(t, OUTBOX_WORDS);
  const workers: Worker[] = [];
  const results = Array.from(
    { length: t },
    (_, thread) =>
      new Promise<SimResult>((resolve, reject) => {
        const job: WorkerJob = { o, call, sab, thread, threads: t, spin: t <= availableParallelism() };
        const w = new Worker(workerPath(), { workerData: job });
        workers.push(w);
        let settled = false;
        w.on(
          'message',
          (m: { result?: Omit<SimResult, 'outcomes'> & { outcomes: PlainOutcome[] }; error?: string }) => {
            settled = true;
            if (m.error !== undefined)
              return reject(new WebcclError('INTERNAL', `simulate: thread ${thread}: ${m.error}`));
            const outcomes = m.result!.outcomes.map(({ error, ...x }) => ({
              ...x,
              ...(error && { error: new WebcclError(error.code, error.reason, error.details) }),
            }));
            resolve({ ...m.result!, outcomes });
          },
        );
        w.on('error', (e) => {
          settled = true;
          reject(new WebcclError('INTERNAL', `simulate: thread ${thread} failed: ${e.message}`));
        });
        w.on('exit', (code) => {
          if (!settled)
            reject(
              new WebcclError('INTERNAL', `simulate: thread ${thread} ended (exit code ${code}) without a result`),
            );
        });
      }),
  );
  // One thread failing leaves the others at the barrier: tell them, so that none waits forever.
  for (const r of results) r.catch(() => abandon(sab));
  try {
    const parts = await Promise.all(results);
    return {
      timeUs: Math.max(...parts.map((p) => p.timeUs)),
      outcomes: parts.flatMap((p) => p.outcomes).sort((a, b) => a.rank - b.rank),
      messages: parts.reduce((a, p) => a + p.messages, 0),
      bytes: parts.reduce((a, p) => a + p.bytes, 0),
      traceHash: parts.reduce((a, p) => (a + p.traceHash) >>> 0, 0),
    };
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
}
