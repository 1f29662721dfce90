// One of the two Web Workers that measure this page's floor (perf-floor.js): a turn passed back
// and forth through a SharedArrayBuffer word with blocking Atomics.wait/notify (what a waiting
// rank's wake-up costs here), then, on the first worker, the rate of one plain copy between two
// shared buffers (what moving a rank's data costs here). No webccl.
onmessage = ({ data: { sab, copy, side, rounds } }) => {
  const turn = new Int32Array(sab, 0, 1);
  const pass = (k) => {
    const mine = 2 * k + side;
    for (let v = Atomics.load(turn, 0); v !== mine; v = Atomics.load(turn, 0)) Atomics.wait(turn, 0, v, 100);
    Atomics.store(turn, 0, mine + 1);
    Atomics.notify(turn, 0);
  };
  const warm = Math.min(200, rounds);
  for (let k = 0; k < warm; k++) pass(k);
  const t0 = performance.now();
  for (let k = warm; k < warm + rounds; k++) pass(k);
  const oneWayUs = ((performance.now() - t0) * 1000) / (2 * rounds);
  let copyGBs;
  if (side === 0) {
    const src = new Uint8Array(copy, 0, copy.byteLength / 2).fill(1);
    const dst = new Uint8Array(copy, copy.byteLength / 2);
    dst.set(src);
    let reps = 0;
    const c0 = performance.now();
    do {
      dst.set(src);
      reps++;
    } while (performance.now() - c0 < 50);
    copyGBs = (reps * src.byteLength) / ((performance.now() - c0) * 1e6);
  }
  postMessage({ oneWayUs, copyGBs });
};
