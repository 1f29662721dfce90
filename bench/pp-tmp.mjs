// The rank script of bench/pingpong.mjs: a send/recv ping-pong between ranks 0 and 1, timed as
// bench/mpi/pingpong.c times MPI's. argv: JSON { b, e, f, n, w, reps, sync }. With sync (ranks
// that may block: worker threads on one node), each op is waited with waitSync(); otherwise
// (across processes, over TCP) with await. Rank 0 prints one JSON line per size.
import * as ccl from 'webccl';

const o = JSON.parse(process.argv[2]);
const comm = await ccl.initCommGroup();
const rank = comm.rank;
const wait = (w) => w;

/** Blocking waits need no await between ops (an await costs a microtask turn per op). */
function roundTripsSync(buf, iters) {
  for (let i = 0; i < iters; i++) {
    if (rank === 0) {
      comm.send(buf, 1).waitSync();
      comm.recv(buf, 1).waitSync();
    } else {
      comm.recv(buf, 0).waitSync();
      comm.send(buf, 0).waitSync();
    }
  }
}

async function roundTrips(buf, iters) {
  if (o.sync) return roundTripsSync(buf, iters);
  for (let i = 0; i < iters; i++) {
    if (rank === 0) {
      await wait(comm.send(buf, 1));
      await wait(comm.recv(buf, 1));
    } else {
      await wait(comm.recv(buf, 0));
      await wait(comm.send(buf, 0));
    }
  }
}

if (rank < 2) {
  for (let bytes = o.b; bytes <= o.e; bytes *= o.f) {
    const iters = Math.max(20, bytes > 8192 ? Math.floor((o.n * 8192) / bytes) : o.n);
    const buf = o.alloc ? comm.alloc('u8', bytes) : new Uint8Array(bytes);
    await roundTrips(buf, o.w);
    const t = [];
    for (let r = 0; r < o.reps; r++) {
      await comm.barrier();
      const t0 = performance.now();
      await roundTrips(buf, iters);
      t.push(((performance.now() - t0) * 1000) / iters / 2);
    }
    t.sort((a, b) => a - b);
    console.log(JSON.stringify({ rank, sleeps: globalThis.__sleeps, st: globalThis.__st, r: globalThis.__r, bytes, iters, us: Number(t[Math.floor(o.reps / 2)].toFixed(4)) }));
    if (o.alloc) comm.free(buf);
  }
}
await comm.barrier();
comm.destroy();
