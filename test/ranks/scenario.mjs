// A rank script for worker-thread tests: runs the scenario named in argv[2] with the JSON
// parameters in argv[3], and posts { ok } or { error: { code, message, details } } to the test.
import { parentPort } from 'node:worker_threads';
import * as ccl from 'webccl';
import { expectedArray, fill, firstWrong, inputArray, makeBuffer, opsFor } from '../helpers/closed-form.mjs';

const [name, json] = process.argv.slice(2);
const p = JSON.parse(json ?? '{}');
const report = (m) => parentPort.postMessage(m);
const errorOf = (e) => ({ code: e?.code, message: String(e?.message ?? e), details: e?.details });

const scenarios = {
  /** Every collective on closed-form data, chunked through small slots. */
  async grid() {
    const comm = await ccl.initCommGroup();
    const { rank: r, size: n } = comm;
    const wrong = [];
    const check = (what, data, want) => {
      const i = firstWrong(data, want);
      if (i >= 0) wrong.push(`${what}: rank ${r} element ${i} is ${data[i]}, expected ${want(i)}`);
    };
    for (const dtype of p.dtypes) for (const count of p.counts) {
      for (const op of opsFor(dtype)) for (const algo of ['direct', 'twoshot']) for (const zc of [false, true]) {
        const x = zc ? comm.alloc(dtype, count) : makeBuffer(dtype, count).arg;
        const data = x.data ?? x;
        fill(data, dtype, op, r);
        await comm.allReduce(x, { op, algo });
        check(`allReduce ${dtype} ${op} ${count} ${algo}${zc ? ' zero-copy' : ''}`, data, (i) => expectedArray(op, dtype, n, count)[i]);
        if (zc) comm.free(x);
      }
      const out = makeBuffer(dtype, n * count);
      const part = makeBuffer(dtype, count);
      fill(part.data, dtype, 'sum', r);
      await comm.allGather(out.arg, part.arg);
      check(`allGather ${dtype} ${count}`, out.data, (i) => inputArray('sum', dtype, Math.floor(i / count), count)[i % count]);
      const rsIn = makeBuffer(dtype, n * count);
      fill(rsIn.data, dtype, 'max', r);
      const rsOut = makeBuffer(dtype, count);
      await comm.reduceScatter(rsOut.arg, rsIn.arg, { op: 'max' });
      check(`reduceScatter ${dtype} ${count}`, rsOut.data, (i) => expectedArray('max', dtype, n, n * count)[r * count + i]);
      const b = makeBuffer(dtype, count);
      if (r === n - 1) fill(b.data, dtype, 'prod', 7);
      await comm.broadcast(b.arg, { root: n - 1 });
      check(`broadcast ${dtype} ${count}`, b.data, (i) => inputArray('prod', dtype, 7, count)[i]);
      const y = makeBuffer(dtype, count);
      fill(y.data, dtype, 'min', r);
      await comm.reduce(y.arg, { op: 'min', root: 0 });
      if (r === 0) check(`reduce ${dtype} ${count}`, y.data, (i) => expectedArray('min', dtype, n, count)[i]);
    }
    // Async handles: several ops in flight complete in issue order.
    const a = new Float32Array(1000).fill(r + 1);
    const c = new Float32Array(1000).fill(1);
    const h1 = ccl.allReduceAsync(a);
    const h2 = comm.allReduce(c, { op: 'max' });
    await ccl.wait(h2);
    if (!h1.isCompleted()) wrong.push('allReduceAsync: earlier op not complete when a later one was');
    check('allReduceAsync', a, () => (n * (n + 1)) / 2);
    await ccl.barrier();
    report({ ok: wrong.length === 0, wrong: wrong.slice(0, 5) });
  },

  /** Each rank passes its own value of one field; every rank must report MISMATCH. */
  async mismatch() {
    const comm = await ccl.initCommGroup();
    const r = comm.rank;
    const pick = (v) => (Array.isArray(v) ? v[r] ?? v[v.length - 1] : v);
    const x = pick(p.dtype) === 'f64' ? new Float64Array(pick(p.count)) : new Float32Array(pick(p.count));
    let error;
    try {
      await comm.allReduce(x, { op: pick(p.op), algo: pick(p.algo) });
    } catch (e) {
      error = errorOf(e);
    }
    // The communicator stays usable after a mismatch.
    const y = new Float32Array(5).fill(1);
    await comm.allReduce(y);
    report({ error, after: Array.from(y) });
  },

  /** Rank `late` never joins the allReduce; the others must time out naming it. */
  async timeout() {
    const comm = await ccl.initCommGroup({ timeoutMs: p.timeoutMs });
    if (comm.rank === p.late) {
      // Stay away until the others have failed, then find the communicator aborted.
      await new Promise((res) => setTimeout(res, p.timeoutMs * 3));
      try {
        await comm.allReduce(new Float32Array(4));
        report({ error: null });
      } catch (e) {
        report({ error: errorOf(e) });
      }
      return;
    }
    try {
      await comm.allReduce(new Float32Array(4));
      report({ error: null });
    } catch (e) {
      report({ error: errorOf(e) });
    }
  },

  /** Rank `dies` throws while the others wait in an allReduce. */
  async death() {
    const comm = await ccl.initCommGroup();
    if (comm.rank === p.dies) {
      await new Promise((res) => setTimeout(res, 200));
      throw new Error(`rank ${comm.rank} fails on purpose`);
    }
    try {
      await comm.allReduce(new Float32Array(1 << 16));
      report({ error: null });
    } catch (e) {
      report({ error: errorOf(e) });
    }
  },

  /**
   * Rank `leaves` joins one allReduce of `count` elements, then its script ends (returns, or
   * with `exit`, calls process.exit(0)) while the others finish theirs; after `afterMs` they
   * issue one more, which needs the departed rank.
   */
  async leave() {
    const comm = await ccl.initCommGroup({ timeoutMs: p.timeoutMs });
    const x = new Float32Array(p.count).fill(1);
    await comm.allReduce(x);
    if (comm.rank === p.leaves) {
      if (p.exit) process.exit(0);
      return;
    }
    await new Promise((res) => setTimeout(res, p.afterMs));
    const t0 = performance.now();
    try {
      await comm.allReduce(new Float32Array(4));
      report({ first: x[0], error: null });
    } catch (e) {
      report({ first: x[0], error: errorOf(e), ms: performance.now() - t0 });
    }
  },

  /** Rank `aborts` calls abort(p.reason) while the others wait in an allReduce. */
  async abortReason() {
    const comm = await ccl.initCommGroup({ timeoutMs: p.timeoutMs });
    if (comm.rank === p.aborts) {
      await new Promise((res) => setTimeout(res, 200));
      comm.abort(p.reason);
      return;
    }
    try {
      await comm.allReduce(new Float32Array(1 << 12));
      report({ error: null });
    } catch (e) {
      report({ error: errorOf(e) });
    }
  },
};

await scenarios[name]();
