// WEBCCL_TRACE=file.json: a Chrome-trace / Perfetto timeline (the JSON "traceEvents" format).
//
// Who writes what. Every thread (a rank thread, a rank process, a worker that is no rank, such
// as a node's progress thread) records into its own buffer, on tracks it names: one track per
// name and thread. Threads and processes share no writer, so at its end each thread writes its
// events to `<path>.<pid>-<thread>.part` (see core/nodejs/trace-files.ts, installed by the Node
// entry), and webccl's launchers merge the parts into `<path>` when the job ends. Timestamps
// are wall-clock microseconds (performance.timeOrigin + performance.now()), comparable across
// threads and processes of one machine.
//
// The API, for webccl's own modules and for any thread that wants a track of its own:
//
//   const t = traceTrack('progress node 0');   // one track per (thread, name): same name, same track
//   t.instant('doorbell', { ops: 3 });          // a point in time
//   t.complete('sweep', t0, performance.now()); // a slice between two performance.now() times
//   t.span('drain', () => work());              // a slice around fn (sync or async); returns fn's result
//   traceSpan('forward', () => model(x));       // the same on this thread's current track
//
// A worker that does not load webccl's Node entry (dist/node/index.js, which installs the file
// sink) must call installTraceSink() of core/nodejs/trace-files.ts once, or its events stay in
// memory. A thread that may be terminated (worker.terminate() runs no exit handlers) calls
// traceFlush() before it can be: it writes the thread's part now (and again, whole, at exit).
//
// With WEBCCL_TRACE unset, TRACING is false, traceTrack returns a track that records nothing and
// traceSpan calls fn: every hook in the hot paths is one boolean (or one undefined) check.
import { envString } from './config.js';
import { fail } from './errors.js';

/** Whether this thread records a trace (WEBCCL_TRACE set in its environment when it loaded webccl). */
export const TRACING = envString('WEBCCL_TRACE') !== undefined;

/** Args of an event: shown in Perfetto's details pane. */
export type TraceArgs = Record<string, string | number | boolean | undefined>;

/** One Chrome-trace event. */
export interface TraceEvent {
  name: string;
  ph: 'X' | 'B' | 'E' | 'i' | 'M';
  pid: number;
  tid: number;
  ts: number;
  dur?: number;
  s?: 't' | 'p' | 'g';
  cat?: string;
  args?: Record<string, unknown>;
}

/**
 * A track of this thread's timeline (WEBCCL_TRACE), as traceTrack returns it: instants, slices of
 * given times, and spans around a function. With WEBCCL_TRACE unset it records nothing.
 */
export interface TraceTrack {
  /** The name the track was made with. */
  readonly name: string;
  /** A point in time on this track (now). */
  instant(name: string, args?: TraceArgs): void;
  /** A slice from `startMs` to `endMs` (this thread's performance.now() times). */
  complete(name: string, startMs: number, endMs: number, args?: TraceArgs): void;
  /** Runs fn inside a slice named `name`; an async fn's slice ends when its promise settles. */
  span<T>(name: string, fn: () => T): T;
}

/** What the Node entry gives the trace: who this thread is and how its events leave it. */
export interface TraceSink {
  pid: number;
  thread: number;
  /** Called once, with the function that returns this thread's events when it ends. */
  atExit(events: () => TraceEvent[]): void;
  /** Writes this thread's part now. */
  flush(): void;
}
export const TRACE_SINK = Symbol.for('webccl.traceSink');

/** Events a thread keeps at most; later ones are counted, not kept (a trace of a day-long job). */
export const MAX_EVENTS = 2_000_000;

/** This thread's clock origin (read once: the getter is slow). */
const ORIGIN = performance.timeOrigin;

/**
 * Wall-clock microseconds of a performance.now() time of this thread, in quarters of a µs: at
 * today's epoch a double holds exactly that, so a slice's end (ts + dur) is exact and a child
 * never ends after its parent by a rounding.
 */
export const toUs = (ms: number): number => Math.round((ORIGIN + ms) * 4000) / 4;

interface ThreadState {
  tracks: Map<string, Track>;
  events: TraceEvent[];
  dropped: number;
  pid: number;
  thread: number;
  /** The track traceSpan records on: the last rank track made here, else 'thread N'. */
  current?: Track;
}

const STATE = Symbol.for('webccl.traceState');

/** This thread's trace state (on globalThis: the ESM and CJS builds loaded together share it). */
function state(): ThreadState {
  const g = globalThis as Record<symbol, ThreadState | undefined>;
  let s = g[STATE];
  if (s) return s;
  const sink = (globalThis as Record<symbol, TraceSink | undefined>)[TRACE_SINK];
  s = { tracks: new Map(), events: [], dropped: 0, pid: sink?.pid ?? 1, thread: sink?.thread ?? 0 };
  g[STATE] = s;
  const st = s;
  sink?.atExit(() => eventsOf(st));
  return s;
}

/** Tracks of a thread: 1 + index, under the thread's number (tids stay apart within a process). */
const TRACKS_PER_THREAD = 1000;

class Track implements TraceTrack {
  constructor(
    readonly name: string,
    private readonly s: ThreadState,
    readonly tid: number,
  ) {}

  private push(e: TraceEvent): void {
    if (this.s.events.length < MAX_EVENTS) this.s.events.push(e);
    else this.s.dropped++;
  }

  instant(name: string, args?: TraceArgs): void {
    this.push({
      name,
      ph: 'i',
      s: 't',
      pid: this.s.pid,
      tid: this.tid,
      ts: toUs(performance.now()),
      ...(args && { args }),
    });
  }

  complete(name: string, startMs: number, endMs: number, args?: TraceArgs): void {
    const ts = toUs(startMs);
    const dur = Math.max(0, toUs(endMs) - ts);
    this.push({ name, ph: 'X', pid: this.s.pid, tid: this.tid, ts, dur, ...(args && { args }) });
  }

  span<T>(name: string, fn: () => T): T {
    const t0 = performance.now();
    let r: T;
    try {
      r = fn();
    } catch (e) {
      this.complete(name, t0, performance.now(), { error: String(e) });
      throw e;
    }
    if (r instanceof Promise) {
      return r.then(
        (v) => {
          this.complete(name, t0, performance.now());
          return v;
        },
        (e) => {
          this.complete(name, t0, performance.now(), { error: String(e) });
          throw e;
        },
      ) as T;
    }
    this.complete(name, t0, performance.now());
    return r;
  }
}

const OFF: TraceTrack = {
  name: '',
  instant: () => undefined,
  complete: () => undefined,
  span: (_name, fn) => fn(),
};

/**
 * This thread's track named `name` (made on first use; the same name gives the same track).
 * Names to use: 'rank N' (webccl's ranks use it), 'progress node N' (a node's progress thread),
 * or any label of the caller's. With WEBCCL_TRACE unset, a track that records nothing.
 */
export function traceTrack(name: string): TraceTrack {
  if (typeof name !== 'string' || name === '')
    fail(
      'INVALID_ARGUMENT',
      `traceTrack: name must be a non-empty string, got ${typeof name === 'string' ? '""' : typeof name}`,
      { argument: 'name' },
    );
  if (!TRACING) return OFF;
  const s = state();
  let t = s.tracks.get(name);
  if (!t) {
    t = new Track(name, s, s.thread * TRACKS_PER_THREAD + s.tracks.size + 1);
    s.tracks.set(name, t);
  }
  return t;
}

/**
 * The track of world rank `rank` on this thread (traceSpan records there from now on), or with
 * `group`, the track of that rank's ops in a group communicator: ops of two communicators may
 * be in flight at once, and slices on one track must nest.
 */
export function rankTrack(rank: number, group?: string): TraceTrack {
  if (group !== undefined) return traceTrack(`rank ${rank} group ${group}`);
  const t = traceTrack(`rank ${rank}`);
  if (t !== OFF) state().current = t as Track;
  return t;
}

/**
 * Runs fn (sync or async) inside a slice named `name` on this thread's track (its rank's, or
 * `thread N` on a thread with no rank) and returns fn's result. Without WEBCCL_TRACE, just fn().
 */
export function traceSpan<T>(name: string, fn: () => T): T {
  if (typeof fn !== 'function')
    fail('INVALID_ARGUMENT', `traceSpan: fn must be a function, got ${typeof fn}`, { argument: 'fn' });
  if (!TRACING) return fn();
  const s = state();
  const t = s.current ?? (s.current = traceTrack(`thread ${s.thread}`) as Track);
  return t.span(String(name), fn);
}

/** Writes this thread's events so far to its part file (see the header); nothing without WEBCCL_TRACE. */
export function traceFlush(): void {
  if (TRACING) (globalThis as Record<symbol, TraceSink | undefined>)[TRACE_SINK]?.flush();
}

/** Metadata naming the thread's tracks and its process, then its events. */
function eventsOf(s: ThreadState): TraceEvent[] {
  const meta: TraceEvent[] = [];
  const ranks = [...s.tracks.keys()].filter((n) => /^rank \d+$/.test(n)).sort();
  // A process's main thread names it by its ranks (a rank process); worker threads by its pid.
  const label = s.thread === 0 && ranks.length ? `${ranks.join(', ')} (pid ${s.pid})` : `pid ${s.pid}`;
  meta.push({ name: 'process_name', ph: 'M', pid: s.pid, tid: 0, ts: 0, args: { name: `webccl ${label}` } });
  for (const t of s.tracks.values()) {
    meta.push({ name: 'thread_name', ph: 'M', pid: s.pid, tid: t.tid, ts: 0, args: { name: t.name } });
    const rank = /^rank (\d+)( group)?/.exec(t.name);
    // Ranks in order, each followed by its group tracks, then other tracks (progress threads, plain threads).
    const order = rank ? Number(rank[1]) * 1000 + (rank[2] ? 1 + (t.tid % TRACKS_PER_THREAD) : 0) : 100_000_000 + t.tid;
    meta.push({ name: 'thread_sort_index', ph: 'M', pid: s.pid, tid: t.tid, ts: 0, args: { sort_index: order } });
  }
  if (s.dropped)
    meta.push({
      name: 'webccl_dropped_events',
      ph: 'M',
      pid: s.pid,
      tid: 0,
      ts: 0,
      args: { dropped: s.dropped, kept: MAX_EVENTS },
    });
  return s.events.length ? meta.concat(s.events) : [];
}

// ---------------------------------------------------------------- one op's events

/** Slices one op keeps at most (a huge op's steps are then counted, not drawn). */
const MAX_STEPS = 2048;

/** What an op's trace needs of its Work (kept apart from work.ts, which imports this file). */
export interface TracedWork {
  name: string;
  seq: number;
  timing: { issuedAt: number; startedAt: number; joinedAt: number; completedAt: number };
}

/**
 * One op on a rank's track: an instant when issued, and when it ends a slice from start to
 * completion with its args, holding a 'wait for peers' slice (start to joinedAt) and the op's
 * steps (shared-memory sleeps and copies, network phases). Steps are kept until the end so
 * that a step crossing joinedAt can be cut there: slices must nest.
 */
export class OpTrace {
  private readonly steps: number[] = [];
  private readonly names: string[] = [];
  private dropped = 0;
  constructor(
    private readonly track: TraceTrack,
    readonly args: TraceArgs,
  ) {}

  /** The engine took the op as `work` (running `algorithm`): marks its issue. */
  issue(work: TracedWork, algorithm: string): this {
    this.args.seq = work.seq;
    this.args.algorithm = algorithm;
    this.track.instant(`issue ${work.name} #${work.seq}`, { seq: work.seq, collective: work.name });
    return this;
  }

  /** A step of the op from t0 to t1 (performance.now() ms). */
  step(name: string, t0: number, t1: number): void {
    if (this.names.length >= MAX_STEPS) {
      this.dropped++;
      return;
    }
    this.names.push(name);
    this.steps.push(t0, t1);
  }

  /** The op ended (failed with `error`, if given). */
  end(work: TracedWork, error?: { code: string }): void {
    const { startedAt, joinedAt, completedAt } = work.timing;
    if (Number.isNaN(startedAt)) return; // failed before it started: its issue instant says enough
    const args: TraceArgs = {
      ...this.args,
      ...(error && { error: error.code }),
      ...(this.dropped && { stepsNotDrawn: this.dropped }),
    };
    const t = this.track;
    t.complete(`${work.name} #${work.seq}`, startedAt, completedAt, args);
    const joined = Number.isNaN(joinedAt) ? startedAt : joinedAt;
    if (toUs(joined) > toUs(startedAt)) t.complete('wait for peers', startedAt, joined);
    for (let i = 0; i < this.names.length; i++) {
      const a = Math.max(this.steps[2 * i], startedAt),
        b = Math.min(this.steps[2 * i + 1], completedAt);
      if (a < joined && b > joined) {
        t.complete(this.names[i], a, joined);
        t.complete(this.names[i], joined, b);
      } else t.complete(this.names[i], a, b);
    }
  }
}
