// One thread of a simulation split over threads (threads.ts): runs its share of the ranks and
// posts its part of the result.
import { parentPort, workerData } from 'node:worker_threads';
import { collectivePart, simulate } from '../../sim/index.js';
import { SharedBorder } from './shared-border.js';
import type { PlainOutcome, WorkerJob } from './threads.js';

const job = workerData as WorkerJob;
try {
  const border = new SharedBorder(job.sab, job.thread, job.threads, job.o.ranks / job.o.nodes, job.spin);
  const r = await simulate(job.o, collectivePart(job.o, job.call), border);
  const outcomes: PlainOutcome[] = r.outcomes.map(({ error, ...x }) => ({
    ...x,
    ...(error && { error: { code: error.code, reason: error.reason, details: error.details } }),
  }));
  parentPort!.postMessage({ result: { ...r, outcomes } });
} catch (e) {
  parentPort!.postMessage({ error: e instanceof Error ? e.message : String(e) });
}
