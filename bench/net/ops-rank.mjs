// The rank side of bench/net/ops.mjs: allToAll, gather and scatter over a job across processes,
// timed as `webccl perf` and bench/mpi/coll_bench time (float32, out of place, root 0,
// comm.alloc() buffers, nccl-tests sizes): warm-up; per size one untimed call, an iteration
// count from the slowest rank's time per call sized to about --time seconds, a barrier, the
// calls back to back (each awaited: ops across nodes complete on the event loop), the slowest
// rank's mean per call; then one checked call. Rank 0 prints one JSON line per size.
//   webccl run --procs -n N bench/net/ops-rank.mjs OP MIN_BYTES MAX_BYTES FACTOR SECONDS
import { initCommGroup } from 'webccl';

const [op, minBytes, maxBytes, factor, seconds] = process.argv.slice(2).map((a, i) => (i ? Number(a) : a));
const comm = await initCommGroup();
const { rank, size: n } = comm;

/** Elements per rank block, and the send and receive lengths (at least one element per block). */
function shape(bytes) {
  const per = Math.max(1, Math.floor(Math.max(1, Math.floor(bytes / 4)) / n));
  const whole = per * n;
  return { bytes: whole * 4, per, send: op === 'gather' ? per : whole, recv: op === 'scatter' ? per : whole };
}
const largest = shape(maxBytes);
const sendBase = comm.alloc('f32', largest.send);
const recvBase = comm.alloc('f32', largest.recv);
const value = (r, i) => 1 + ((r + i) % 4);

function call(s) {
  const send = sendBase.subarray(0, s.send),
    recv = recvBase.subarray(0, s.recv);
  if (op === 'alltoall') return comm.allToAll(recv, send);
  if (op === 'gather') return comm.gather(rank === 0 ? recv : null, send, { root: 0 });
  if (op === 'scatter') return comm.scatter(recv, rank === 0 ? send : null, { root: 0 });
  throw new Error(`ops-rank: unknown op ${op}`);
}
/** Element i of this rank's output after the op, from the closed form. */
function want(s, i) {
  if (op === 'alltoall') return value(Math.floor(i / s.per), rank * s.per + (i % s.per));
  if (op === 'gather') return value(Math.floor(i / s.per), i % s.per);
  return value(0, rank * s.per + i);
}

async function calls(s, k) {
  for (let j = 0; j < k; j++) await call(s).wait();
}
async function agreedMeanUs(s, k) {
  const t0 = performance.now();
  await calls(s, k);
  const mean = new Float64Array([((performance.now() - t0) * 1000) / k]);
  await comm.allReduce(mean, { op: 'max' }).wait();
  return Math.max(mean[0], 0.01);
}

await calls(largest, 5);
await calls(shape(minBytes), 105);
for (let bytes = minBytes; bytes <= maxBytes; bytes *= factor) {
  const s = shape(bytes);
  await calls(s, 1);
  const rough = await agreedMeanUs(s, 5);
  const better = await agreedMeanUs(s, Math.min(1000, Math.max(1, Math.round(20000 / rough))));
  const iters = Math.min(20000, Math.max(5, Math.ceil((seconds * 1e6) / better)));
  await comm.barrier().wait();
  const timeUs = await agreedMeanUs(s, iters);
  for (let i = 0; i < s.send; i++) sendBase[i] = value(rank, i);
  recvBase.fill(0, 0, s.recv);
  await comm.barrier().wait();
  await call(s).wait();
  const wrong = new Float64Array(1);
  if (op !== 'gather' || rank === 0) for (let i = 0; i < s.recv; i++) if (recvBase[i] !== want(s, i)) wrong[0]++;
  await comm.allReduce(wrong).wait();
  const algbw = s.bytes / (timeUs * 1e3);
  if (rank === 0)
    console.log(
      JSON.stringify({
        op,
        nranks: n,
        size: s.bytes,
        count: s.per,
        time_us: timeUs,
        algbw,
        busbw: (algbw * (n - 1)) / n,
        wrong: wrong[0],
        iters,
      }),
    );
}
await comm.barrier().wait();
