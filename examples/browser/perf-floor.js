// This page's floor under a small and a large allReduce between its workers, measured before the
// sweep (perf.html draws it as a reference curve): the one-way wake-up of a worker blocked in
// Atomics.wait, and the rate of one plain copy of the sweep's largest buffer (at most 16 MiB).
// A 2-rank allReduce of S bytes needs at least two such wake-ups and, once data is large, about
// one copy of S: the curve is 2·ℓ + S / B, as bus bandwidth (perf-chart.js floorBusBw). With a
// rank on the page's main thread (?main=1), ℓ is that thread's: half a round trip between its
// Atomics.waitAsync and a worker's Atomics.wait.

/** { oneWayUs, copyGBs } of this page, from two workers of its own (about a second). */
export async function measureFloor(maxBytes, rounds = 2000) {
  const sab = new SharedArrayBuffer(4);
  const half = Math.max(1 << 20, Math.min(maxBytes, 16 << 20));
  const copy = new SharedArrayBuffer(2 * half);
  const workers = [0, 1].map(() => new Worker(new URL('./perf-floor-worker.js', import.meta.url)));
  try {
    const said = await Promise.all(
      workers.map(
        (w, side) =>
          new Promise((resolve, reject) => {
            w.onmessage = ({ data }) => resolve(data);
            w.onerror = (e) => reject(new Error(`floor worker ${side}: ${e.message}`));
            w.postMessage({ sab, copy, side, rounds });
          }),
      ),
    );
    return { oneWayUs: Math.max(said[0].oneWayUs, said[1].oneWayUs), copyGBs: said[0].copyGBs };
  } finally {
    for (const w of workers) w.terminate();
  }
}

/**
 * The floor of a rank on the page's main thread, which may not block: a turn passed between this
 * thread, waiting with Atomics.waitAsync, and a worker blocked in Atomics.wait. Half the mean
 * round trip, as { oneWayUs } (a 2-rank allReduce with one rank here needs one such round trip).
 */
export async function measureMainFloor(rounds = 1000) {
  const sab = new SharedArrayBuffer(4);
  const turn = new Int32Array(sab, 0, 1);
  const w = new Worker(new URL('./perf-floor-worker.js', import.meta.url));
  try {
    const worker = new Promise((resolve, reject) => {
      w.onmessage = ({ data }) => resolve(data);
      w.onerror = (e) => reject(new Error(`floor worker: ${e.message}`));
    });
    w.postMessage({ sab, copy: null, side: 1, rounds });
    const pass = async (k) => {
      const mine = 2 * k;
      for (let v = Atomics.load(turn, 0); v !== mine; v = Atomics.load(turn, 0)) {
        const r = Atomics.waitAsync(turn, 0, v, 100);
        if (r.async) await r.value;
      }
      Atomics.store(turn, 0, mine + 1);
      Atomics.notify(turn, 0);
    };
    const warm = Math.min(200, rounds);
    for (let k = 0; k < warm; k++) await pass(k);
    const t0 = performance.now();
    for (let k = warm; k < warm + rounds; k++) await pass(k);
    const oneWayUs = ((performance.now() - t0) * 1000) / (2 * rounds);
    await worker;
    return { oneWayUs };
  } finally {
    w.terminate();
  }
}
