// The first module of every rank thread the launcher starts: it leaves the rank's identity
// where initCommGroup() looks for it, then runs the user's script.
import { workerData } from 'node:worker_threads';

// The same symbol as RANK_INIT in src/index.ts, spelled out so this entry stays a few lines
// instead of bundling the library.
const RANK_INIT = Symbol.for('webccl.rankInit');
const data = workerData as { init: unknown; script: string };
(globalThis as Record<symbol, unknown>)[RANK_INIT] = data.init;
await import(data.script);
