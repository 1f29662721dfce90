// Errors carry a stable code. Bad arguments are refused before anything moves; ranks that
// disagree are told so on every rank; a rank that never arrives is named in a TIMEOUT.
//   node bin/webccl.js run -n 3 examples/errors.mjs
import * as ccl from 'webccl';

const comm = await ccl.initCommGroup({ timeoutMs: 1000 });
const say = (msg) => console.log(`rank ${comm.rank}: ${msg}`);

try {
  comm.allReduce(new Int32Array(4), { op: 'avg' });
} catch (e) {
  if (comm.rank === 0) say(`${e.code}: ${e.message}`);
}

try {
  // Rank 0 sends 10 elements, the others 12.
  await comm.allReduce(new Float32Array(comm.rank === 0 ? 10 : 12));
} catch (e) {
  say(`${e.code} on ${e.details.field}: ranks ${e.details.ranks} have ${e.details.values}`);
}
await comm.allReduce(new Float32Array(4)); // still usable after a mismatch

if (comm.rank !== comm.size - 1) {
  try {
    await comm.allReduce(new Float32Array(4)); // the last rank never joins this one
  } catch (e) {
    say(`${e.code}: ${e.message}`);
    // The flight recorder kept this rank's last ops (also printed on stderr at the TIMEOUT).
    const last = comm.flightRecord().at(-1);
    say(`flight record: ${last.collective} #${last.seq} ${last.state}, waiting on rank ${last.peers}, ${last.error}`);
  }
} else {
  // The last rank stays, but away from the op, past the others' deadline. (Had its script
  // ended instead, the others would fail at once with CONNECTION_CLOSED naming it.)
  await new Promise((res) => setTimeout(res, 3000));
}
