// The rank script of bench/sync-floor.mjs: argv[2] barriers after a warm-up, each waited with
// waitSync(); rank 0 prints {"us": mean µs per barrier}.
import * as ccl from 'webccl';

const n = Number(process.argv[2] ?? 5000);
const WARM_UP = 20_000;
const comm = await ccl.initCommGroup();
// Warm-up: V8 compiles webccl's path in tiers over the first tens of thousands of ops (2,000
// left a 2-rank loop of 5,000 at ~9 µs a barrier against ~1 µs once warm).
for (let i = 0; i < WARM_UP; i++) comm.barrier().waitSync();
const t0 = performance.now();
for (let i = 0; i < n; i++) comm.barrier().waitSync();
const us = ((performance.now() - t0) * 1000) / n;
if (comm.rank === 0) console.log(JSON.stringify({ us: Number(us.toFixed(2)) }));
comm.destroy();
