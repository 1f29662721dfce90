// This page's floor under a small and a large allReduce between its workers, measured before the
// sweep (perf.html draws it as a reference curve): the one-way wake-up of a worker blocked in
// Atomics.wait, and the rate of one plain copy of the sweep's largest buffer (at most 16 MiB).
// A 2-rank allReduce of S bytes needs at least two such wake-ups and, once data is large, about
// one copy of S: the curve is 2·ℓ + S / B, as bus bandwidth (perf-chart.js floorBusBw).

/** { oneWayUs, copyGBs } of this page, from two workers of its own (about a second). */
export async function measureFloor(maxBytes, rounds = 2000) {
  const sab = new SharedArrayBuffer(4);
  const half = Math.max(1 << 20, Math.min(maxBytes, 16 << 20));
  const copy = new SharedArrayBuffer(2 * half);
  const workers = [0, 1].map(() => new Worker(new URL('./perf-floor-worker.js', import.meta.url)));
  try {
    const said = await Promise.all(workers.map((w, side) => new Promise((resolve, reject) => {
      w.onmessage = ({ data }) => resolve(data);
      w.onerror = (e) => reject(new Error(`floor worker ${side}: ${e.message}`));
      w.postMessage({ sab, copy, side, rounds });
    })));
    return { oneWayUs: Math.max(said[0].oneWayUs, said[1].oneWayUs), copyGBs: said[0].copyGBs };
  } finally {
    for (const w of workers) w.terminate();
  }
}
