// The files of WEBCCL_TRACE=path (Node only; core/trace.ts records the events).
//
// Threads and processes share no writer, so each thread that recorded events writes them at
// its end to `<path>.<pid>-<thread>.part`, and whoever started the threads merges the parts
// into `<path>`:
// - webccl's launchers (`webccl run` threads, `--procs`, `--nnodes`, launch(),
//   launchProcesses()) when the job ends, taking the parts of their own ranks only;
// - a process that no launcher started and that is not one rank of a multi-process job (no
//   RANK / WORLD_SIZE > 1 in its environment): its main thread, at its exit, with the parts its
//   threads left;
// - otherwise (ranks started by torchrun, mpirun, srun) the parts stay, one per rank, and
//   `webccl trace merge OUT PARTS...` makes one file of them.
// A merge appends to `<path>` when `<path>` holds the same job's events, written since the
// merging launcher started (the nodes of one `--nnodes` job on one machine each merge their own
// ranks; a file left by an earlier run of the same job id is older), under a lock; else it
// replaces it.
import {
  accessSync,
  constants,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { isMainThread, threadId } from 'node:worker_threads';
import { LAUNCHER_FD_VAR } from '../config.js';
import { WebcclError } from '../errors.js';
import { TRACE_SINK, TRACING, type TraceEvent, type TraceSink } from '../trace.js';

/** How long a merge waits for another merge into the same file (a lock left by a killed launcher is then ignored). */
const LOCK_WAIT_MS = 5000;

/** The job id of merges made by this process (its launcher, or its own main thread at exit). */
export const PROCESS_JOB = `pid ${process.pid} at ${Math.round(performance.timeOrigin)}`;

/** WEBCCL_TRACE of `env`, resolved against the working folder; undefined when unset. */
export function tracePath(env: Record<string, string | undefined> = process.env): string | undefined {
  const v = env.WEBCCL_TRACE;
  return v ? resolve(v) : undefined;
}

/** Refuses a trace path no file can be written at (a launcher calls it before starting any rank). */
export function checkTracePath(path: string): void {
  const why = unwritable(path);
  if (why)
    throw new WebcclError('INVALID_ARGUMENT', `WEBCCL_TRACE=${path}: ${why}`, { variable: 'WEBCCL_TRACE', path });
}

function unwritable(path: string): string | undefined {
  try {
    if (statSync(path, { throwIfNoEntry: false })?.isDirectory()) return 'is a folder; name a file, e.g. trace.json';
    accessSync(dirname(path), constants.W_OK);
    return undefined;
  } catch (e) {
    return `its folder ${dirname(path)} is not writable (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`;
  }
}

const partName = (path: string, pid: number, thread: number): string => `${path}.${pid}-${thread}.part`;

/** The part files of `path` written by threads of the processes `pids`. */
export function partsOf(path: string, pids: readonly number[]): string[] {
  const dir = dirname(path);
  const prefix = `${basename(path)}.`;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .filter(
      (n) =>
        n.startsWith(prefix) &&
        n.endsWith('.part') &&
        pids.includes(Number(/^(\d+)-\d+$/.exec(n.slice(prefix.length, -5))?.[1])),
    )
    .map((n) => join(dir, n));
}

function readEvents(file: string): { events: TraceEvent[]; job?: unknown } {
  let json: { traceEvents?: TraceEvent[]; otherData?: { job?: unknown } } | TraceEvent[];
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new WebcclError(
      'INVALID_ARGUMENT',
      `${file}: not a readable trace (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
      { path: file },
    );
  }
  if (Array.isArray(json)) return { events: json };
  if (!Array.isArray(json.traceEvents))
    throw new WebcclError('INVALID_ARGUMENT', `${file} holds no traceEvents array`, { path: file });
  return { events: json.traceEvents, job: json.otherData?.job };
}

/**
 * Writes the events of `inputs` (part files or whole traces) to `out`, metadata first, then in
 * time order (a parent slice before the children that start with it). With `job`, an `out`
 * holding that job's events already (written at `since` or later, epoch ms) is added to, not
 * replaced. `remove`: delete the inputs.
 */
export function mergeTraceFiles(
  out: string,
  inputs: readonly string[],
  opts: { job?: string; since?: number; remove?: boolean } = {},
): number {
  const lock = `${out}.lock`;
  const locked = takeLock(lock);
  try {
    const events: TraceEvent[] = [];
    if (
      opts.job !== undefined &&
      (statSync(out, { throwIfNoEntry: false })?.mtimeMs ?? -Infinity) >= (opts.since ?? -Infinity)
    ) {
      try {
        const prior = readEvents(out);
        if (prior.job === opts.job) for (const e of prior.events) events.push(e);
      } catch {
        // not a trace of ours: replaced
      }
    }
    // (a spread of a million overflows the stack)
    for (const f of inputs) for (const e of readEvents(f).events) events.push(e);
    const meta = events.filter((e) => e.ph === 'M');
    const timed = events.filter((e) => e.ph !== 'M').sort((a, b) => a.ts - b.ts || (b.dur ?? 0) - (a.dur ?? 0));
    const tmp = `${out}.${process.pid}.tmp`;
    writeFileSync(tmp, traceJson(unique(meta).concat(timed), opts.job));
    renameSync(tmp, out);
    if (opts.remove) for (const f of inputs) rmSync(f, { force: true });
    return timed.length;
  } finally {
    if (locked) rmdirSync(lock);
  }
}

/** Metadata once per (name, pid, tid): a process named by each of its threads' parts. */
function unique(meta: TraceEvent[]): TraceEvent[] {
  const seen = new Set<string>();
  return meta.filter((e) => {
    const k = `${e.name} ${e.pid} ${e.tid}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/** One event per line: readable, and diffable. */
function traceJson(events: TraceEvent[], job?: string): string {
  const head = `{"displayTimeUnit":"ms",${job !== undefined ? `"otherData":${JSON.stringify({ job })},` : ''}"traceEvents":[\n`;
  return `${head + events.map((e) => JSON.stringify(e)).join(',\n')}\n]}\n`;
}

function takeLock(lock: string): boolean {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  const until = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      mkdirSync(lock);
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || Date.now() > until) return false;
      Atomics.wait(pause, 0, 0, 20);
    }
  }
}

/**
 * A launcher's job ended: merges its ranks' parts (threads of the processes `pids`) into `path`.
 * A failure is reported on stderr, never raised: the job's own result stands.
 */
export function mergeJobTrace(path: string, pids: readonly number[], job: string, since: number): void {
  try {
    const parts = partsOf(path, pids);
    if (parts.length) mergeTraceFiles(path, parts, { job, since, remove: true });
  } catch (e) {
    process.stderr.write(
      `webccl: WEBCCL_TRACE: could not merge the trace parts into ${path}: ${(e as Error).message}\n`,
    );
  }
}

/** Whether this process merges its own threads' parts at exit (see the header). */
function mergesOwnParts(): boolean {
  const env = process.env;
  if (env[LAUNCHER_FD_VAR] !== undefined) return false; // a rank process of webccl run --procs
  const size = Number(env.WORLD_SIZE ?? env.OMPI_COMM_WORLD_SIZE ?? env.PMI_SIZE ?? env.SLURM_NTASKS ?? 1);
  return !(size > 1);
}

/** Installs the Node sink: each thread writes its part at its end. */
export function installTraceSink(): void {
  // off, or installed by the other build (ESM / CJS)
  if (!TRACING || (globalThis as Record<symbol, unknown>)[TRACE_SINK]) return;
  const path = tracePath()!;
  const why = unwritable(path);
  if (why) {
    process.stderr.write(`webccl: WEBCCL_TRACE=${path}: ${why}; no trace will be written\n`);
    return;
  }
  const write = (events: () => TraceEvent[]) => {
    try {
      const ev = events();
      if (ev.length) writeFileSync(partName(path, process.pid, threadId), traceJson(ev));
    } catch (e) {
      process.stderr.write(
        `webccl: WEBCCL_TRACE: could not write the trace of thread ${threadId}: ${(e as Error).message}\n`,
      );
    }
  };
  let mine: (() => TraceEvent[]) | undefined;
  const sink: TraceSink = {
    pid: process.pid,
    thread: threadId,
    atExit(events) {
      mine = events;
      if (!isMainThread) process.on('exit', () => write(events));
    },
    flush: () => mine && write(mine),
  };
  // The main thread writes its own part first, then merges every part of this process.
  if (isMainThread) {
    process.on('exit', () => {
      if (mine) write(mine);
      if (mergesOwnParts()) mergeJobTrace(path, [process.pid], PROCESS_JOB, performance.timeOrigin);
    });
  }
  (globalThis as Record<symbol, TraceSink | undefined>)[TRACE_SINK] = sink;
}
