// The rank side of `webccl perf` (bundled as dist/node/perf-rank.js; the launcher runs it on
// every rank). For each row and placement (out-of-place, then in-place):
//
//   1 untimed call, w warm-up calls
//   with -n auto: agree on the iteration count from allReduce(max) of the time per call
//   barrier, then n calls back to back, each completed with waitSync(): no promise per call
//   (--reps R: R such blocks). Across nodes an op completes on the event loop, so there each
//   call is awaited instead, one after the other.
//   post this rank's mean time per call (pingpong: per message, half a call); the launcher
//   keeps the slowest rank's (the median over blocks of the slowest rank's, with --reps)
//   with -c 1: refill with closed-form data, run once, count wrong elements, post them
//
// A call is one or more phases (cases.ts): sendrecv's recv and send complete together, pingpong's
// send and recv one after the other. Buffers are allocated once, at the largest row, and every
// row uses a prefix of them.
// With --group N every rank first calls createGroup([0..N−1]); the members run the sweep on the
// group, the others wait in a world barrier at the end (blocked, not spinning).
import { parentPort } from 'node:worker_threads';
import type { Communicator } from '../../api/communicator.js';
import { ARRAY_OF, DTYPE_SIZE, type Dtype } from '../../core/dtypes.js';
import { MAX_TIMEOUT_MS } from '../../core/options.js';
// The Node entry: only it can join a world across nodes (sockets).
import { RANK_INIT } from '../../core/wiring.js';
import type { BufferArg, TypedArray } from '../../engine/buffers.js';
import type { Work } from '../../engine/work.js';
import { initCommGroup } from '../../node.js';
import { RANK_RUNS_MAX_BYTES } from '../../progress/net-route.js';
import { type Case, makeCase, view } from './cases.js';
import { LEGS } from './collectives.js';
import { type Placement, type PlannedRow, placementsOf, planRows, type RankSpec } from './plan.js';

/** Messages a rank posts to the launcher. */
export type RankMessage =
  | { perf: 'start'; idx: number; place: Placement; iters?: number }
  | { perf: 'result'; idx: number; place: Placement; meanUs: number[]; iters: number; wrong: number | null }
  /** This rank failed (posted at once, before the error ends the thread): across nodes, the
   *  launcher learns which rank failed first, not only which node process exited. */
  | { perf: 'failed'; message: string };

export const AUTO_MIN_ITERS = 5;
export const AUTO_MAX_ITERS = 20000;

/**
 * How this rank completes ops. On one node: waitSync(), no promise per call (what the shm
 * figures were measured with). Across nodes ops complete on the event loop (waitSync() refuses
 * them): each is awaited.
 */
interface Completion {
  /** `calls` calls of `c` back to back. */
  calls(c: Case, calls: number): void | Promise<void>;
  /** One op. */
  one(w: Work): void | Promise<void>;
}

const BLOCKING: Completion = {
  calls(c, calls) {
    const phases = c.phases;
    for (let k = 0; k < calls; k++) {
      for (let p = 0; p < phases.length; p++) {
        const w = phases[p]();
        if (Array.isArray(w)) for (const x of w) x.waitSync();
        else w.waitSync();
      }
    }
  },
  one: (w) => w.waitSync(),
};

const AWAITING: Completion = {
  async calls(c, calls) {
    for (let k = 0; k < calls; k++) {
      for (const phase of c.phases) {
        const w = phase();
        if (Array.isArray(w)) for (const x of w) await x;
        else await w;
      }
    }
  },
  one: async (w) => {
    await w;
  },
};

/** µs per call of `c` agreed by every rank: the slowest rank's mean over `calls` calls. */
async function agreedMeanUs(comm: Communicator, how: Completion, c: Case, calls: number): Promise<number> {
  const t0 = performance.now();
  await how.calls(c, calls);
  const mean = new Float64Array([((performance.now() - t0) * 1000) / Math.max(calls, 1)]);
  await how.one(comm.allReduce(mean, { op: 'max' }));
  return Math.max(mean[0], 0.01);
}

/**
 * How long the warm-up at the smallest size lasts (ms, agreed by every rank). V8 swaps in
 * optimised code only after thousands of calls, and with both cores busy its compiler threads
 * wait for seconds: an 8 B allReduce between 2 processes measured 345–355 µs after 0.25 s of
 * warm-up, 128–147 µs after 1 s and 58–95 µs after 2–3 s.
 */
const WARM_MS = 2000;

/**
 * Calls each case `first` times, then in growing rounds until about WARM_MS have passed; every
 * rank decides alike from the agreed time. Every round passes a barrier and calls each case (out
 * of place and in place), as the timed blocks will: code V8 optimised for one shape of call is
 * thrown away at the first call of another, and a first row that met the barrier or the in-place
 * call only in its timed block ran 1.3-4x slower than the same size later in the sweep.
 */
async function warmUp(comm: Communicator, how: Completion, cases: Case[], first: number): Promise<void> {
  let calls = first;
  for (let spentUs = 0; spentUs < WARM_MS * 1000; ) {
    let us = 0;
    for (const c of cases) {
      await how.one(comm.barrier());
      us += await agreedMeanUs(comm, how, c, calls);
    }
    spentUs += us * calls;
    calls = Math.min(AUTO_MAX_ITERS, Math.max(calls, Math.round((WARM_MS * 1000 - spentUs) / us / 2)));
  }
}

/** Times one case; returns this rank's mean µs per call in each timed block, and the iteration count all ranks used. */
async function timeCase(
  comm: Communicator,
  how: Completion,
  spec: RankSpec,
  c: Case,
): Promise<{ meanUs: number[]; iters: number }> {
  await how.calls(c, 1); // first call: buffers touched, code compiled, untimed
  let iters = spec.iters ?? 0;
  if (spec.iters === undefined) {
    // Size the timed block in two steps: the warm-up calls give a rough figure, then about
    // 20 ms of calls a better one. Every rank derives the count from the same agreed time.
    const rough = await agreedMeanUs(comm, how, c, Math.max(spec.warmup, 1));
    const better = await agreedMeanUs(comm, how, c, Math.min(1000, Math.max(1, Math.round(20_000 / rough))));
    iters = Math.min(AUTO_MAX_ITERS, Math.max(AUTO_MIN_ITERS, Math.ceil((spec.timeSec * 1e6) / better)));
  } else {
    await how.calls(c, spec.warmup);
  }
  const meanUs: number[] = [];
  for (let rep = 0; rep < spec.reps; rep++) {
    await how.one(comm.barrier());
    const t0 = performance.now();
    const block = how.calls(c, iters);
    if (block) await block; // the blocking loop returns nothing: no promise inside the timed span
    meanUs.push(((performance.now() - t0) * 1000) / iters);
  }
  return { meanUs, iters };
}

function allocate(
  comm: Communicator,
  spec: RankSpec,
  dtype: Dtype,
  count: number,
): { arr: TypedArray; arg: BufferArg } {
  const n = Math.max(count, 1);
  if (spec.buffers === 'js')
    return view(new ARRAY_OF[dtype](new ArrayBuffer(n * DTYPE_SIZE[dtype]), 0, n) as TypedArray, dtype, 0, n);
  const arg = comm.alloc(dtype, n);
  return { arr: ('data' in arg ? arg.data : arg) as TypedArray, arg };
}

/** How long the ranks outside a --group wait for the members' sweep (a deadline all the same). */
const IDLE_DEADLINE_MS = MAX_TIMEOUT_MS;

export async function runRank(spec: RankSpec, post: (m: RankMessage) => void): Promise<void> {
  const world = await initCommGroup();
  if (spec.group === undefined) {
    await sweep(world, spec, post);
    await world.barrier();
    return;
  }
  const group = await world.createGroup(Array.from({ length: spec.group }, (_, r) => r));
  if (group) {
    await sweep(group, spec, post);
    await group.barrier();
    group.destroy();
  }
  // Awaited: on one node the wait blocks the thread (after a short spin), so an idle rank takes
  // no CPU from the group's.
  await world.barrier({ timeoutMs: IDLE_DEADLINE_MS });
}

/** The whole sweep on `comm` (the world, or the --group). */
async function sweep(comm: Communicator, spec: RankSpec, post: (m: RankMessage) => void): Promise<void> {
  const how = comm.acrossNodes ? AWAITING : BLOCKING;
  const legs = LEGS[spec.collective];
  const rows = planRows(spec, comm.size);
  for (const dtype of spec.dtypes) {
    const mine = rows.filter((r) => r.dtype === dtype);
    if (!mine.length) continue;
    const send = allocate(comm, spec, dtype, Math.max(...mine.map((r) => r.shape.sendCount)));
    const recv = allocate(comm, spec, dtype, Math.max(...mine.map((r) => r.shape.recvCount)));
    // Warm-up before the sweep, as nccl-tests: the largest size w times, the smallest 100 + w
    // times, so that the first rows do not pay for first touches; with -n auto (a measurement)
    // and -w > 0, the smallest goes on for about WARM_MS, so that they do not pay for
    // compilation either (V8 optimises a function only after thousands of calls: 105 left the
    // first row of a sweep 2-10x slower than the same size later in it).
    await how.calls(makeCase(comm, spec, mine[mine.length - 1], 'oop', send.arr, recv.arr), spec.warmup);
    const casesOf = (row: PlannedRow) =>
      placementsOf(spec.collective).map((place) => makeCase(comm, spec, row, place, send.arr, recv.arr));
    const smallest = casesOf(mine[0]);
    if (spec.iters === undefined && spec.warmup > 0) {
      // Across nodes in 'auto' progress, larger collectives run on the network progress thread:
      // its code warms up too, at the first size it runs (else that row timed it compiling);
      // first, so that the first row follows its own warm-up.
      const handed = comm.acrossNodes ? mine.find((r) => r.shape.bytes > RANK_RUNS_MAX_BYTES) : undefined;
      if (handed && handed !== mine[0]) await warmUp(comm, how, casesOf(handed), spec.warmup);
      await warmUp(comm, how, smallest, 100 + spec.warmup);
    } else await how.calls(smallest[0], 100 + spec.warmup);
    for (const row of mine) {
      for (const place of placementsOf(spec.collective)) {
        if (comm.rank === 0) post({ perf: 'start', idx: row.idx, place });
        const c = makeCase(comm, spec, row, place, send.arr, recv.arr);
        c.prepare();
        const { meanUs, iters } = await timeCase(comm, how, spec, c);
        let wrong: number | null = null;
        if (spec.check) {
          c.prepare();
          await how.one(comm.barrier());
          await how.calls(c, 1);
          wrong = c.wrong();
        }
        post({ perf: 'result', idx: row.idx, place, meanUs: meanUs.map((us) => us / legs), iters, wrong });
      }
    }
    if (spec.buffers === 'shm') {
      comm.free(send.arg);
      comm.free(recv.arg);
    }
  }
}

// Started by the launcher (which leaves the rank's identity under this symbol): the spec is the
// last argument.
if (parentPort && (globalThis as Record<symbol, unknown>)[RANK_INIT]) {
  const port = parentPort;
  const spec = JSON.parse(process.argv[process.argv.length - 1]) as RankSpec;
  const post = (m: RankMessage) => port.postMessage(m);
  try {
    await runRank(spec, post);
  } catch (e) {
    post({ perf: 'failed', message: e instanceof Error ? (e.stack ?? e.message) : String(e) });
    throw e;
  }
}
