// A rank script for worker-thread tests: runs the scenario named in argv[2] with the JSON
// parameters in argv[3], and posts { ok } or { error: { code, message, details } } to the test.
// Run as a process (webccl run --procs), or with SCENARIO_REPORT=stdout (ranks of a launcher
// that is not the test), it prints each report as a line: REPORT <world rank> <json>.
import { parentPort } from 'node:worker_threads';
import * as ccl from 'webccl';
import { encode, expectedArray, fill, firstWrong, inputArray, makeBuffer, opsFor } from '../helpers/closed-form.mjs';

const [name, json] = process.argv.slice(2);
const p = JSON.parse(json ?? '{}');
const report = (m) =>
  parentPort && process.env.SCENARIO_REPORT !== 'stdout'
    ? parentPort.postMessage(m)
    : console.log(`REPORT ${ccl.getRank()} ${JSON.stringify(m)}`);
const errorOf = (e) => ({ code: e?.code, message: String(e?.message ?? e), details: e?.details });
/** Awaits an op and reports { error: null } or { error: { code, message, details } }. */
const reportOutcome = (work) =>
  work.then(
    () => report({ error: null }),
    (e) => report({ error: errorOf(e) }),
  );
/**
 * The op `issue` makes, or its error: a rank that issues once it knows its communicator is
 * aborted gets the coded error at issue (a throw), one that issued before gets it from the Work.
 */
const issued = (issue) => {
  try {
    return issue();
  } catch (e) {
    return Promise.reject(e);
  }
};
/** The first few wrong elements rank r finds, and the check that records them. */
function checker(r) {
  const wrong = [];
  const check = (what, data, want) => {
    const i = firstWrong(data, want);
    if (i >= 0 && wrong.length < 5)
      wrong.push(
        `${what}: rank ${r} element ${i} is ${data[i]}, expected ${typeof want === 'function' ? want(i) : want[i]}`,
      );
  };
  return { wrong, check };
}

const scenarios = {
  /** Every collective on closed-form data, chunked through small slots. */
  async grid() {
    const comm = await ccl.initCommGroup();
    const { rank: r, size: n } = comm;
    const { wrong, check } = checker(r);
    for (const dtype of p.dtypes)
      for (const count of p.counts) {
        for (const op of opsFor(dtype))
          for (const algo of ['direct', 'twoshot'])
            for (const zc of [false, true]) {
              const x = zc ? comm.alloc(dtype, count) : makeBuffer(dtype, count).arg;
              const data = x.data ?? x;
              fill(data, dtype, op, r);
              await comm.allReduce(x, { op, algo });
              check(
                `allReduce ${dtype} ${op} ${count} ${algo}${zc ? ' zero-copy' : ''}`,
                data,
                expectedArray(op, dtype, n, count),
              );
              if (zc) comm.free(x);
            }
        const out = makeBuffer(dtype, n * count);
        const part = makeBuffer(dtype, count);
        fill(part.data, dtype, 'sum', r);
        await comm.allGather(out.arg, part.arg);
        const blocks = Array.from({ length: n }, (_, q) => inputArray('sum', dtype, q, count));
        check(`allGather ${dtype} ${count}`, out.data, (i) => blocks[Math.floor(i / count)][i % count]);
        const rsIn = makeBuffer(dtype, n * count);
        fill(rsIn.data, dtype, 'max', r);
        const rsOut = makeBuffer(dtype, count);
        await comm.reduceScatter(rsOut.arg, rsIn.arg, { op: 'max' });
        check(
          `reduceScatter ${dtype} ${count}`,
          rsOut.data,
          expectedArray('max', dtype, n, n * count).subarray(r * count),
        );
        const b = makeBuffer(dtype, count);
        if (r === n - 1) fill(b.data, dtype, 'prod', 7);
        await comm.broadcast(b.arg, { root: n - 1 });
        check(`broadcast ${dtype} ${count}`, b.data, inputArray('prod', dtype, 7, count));
        const y = makeBuffer(dtype, count);
        fill(y.data, dtype, 'min', r);
        await comm.reduce(y.arg, { op: 'min', root: 0 });
        if (r === 0) check(`reduce ${dtype} ${count}`, y.data, expectedArray('min', dtype, n, count));
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
    const pick = (v) => (Array.isArray(v) ? (v[r] ?? v[v.length - 1]) : v);
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
      await reportOutcome(issued(() => comm.allReduce(new Float32Array(4))));
      return;
    }
    await reportOutcome(comm.allReduce(new Float32Array(4)));
  },

  /**
   * Rank 1's script ends after a barrier; rank 0's next allReduce fails for it and rank 0 then
   * throws (the launcher aborts the node for rank 0's death); rank 2 issues its allReduce only
   * after that abort. Rank 2 reports what it saw.
   */
  async leaveThenDeath() {
    const comm = await ccl.initCommGroup();
    await comm.barrier();
    if (comm.rank === 1) return;
    if (comm.rank === 0) {
      await reportOutcome(comm.allReduce(new Float32Array(4)));
      throw new Error('rank 0 fails after its op failed');
    }
    await new Promise((res) => setTimeout(res, 1000));
    await reportOutcome(comm.allReduce(new Float32Array(4)));
  },

  /**
   * Rank 1 throws 200 ms after a barrier (the launcher aborts the node); rank 0's script ends at
   * 500 ms without another op (it leaves after the abort); rank 2 issues an allReduce at 1 s and
   * reports what it saw.
   */
  async deathThenLeave() {
    const comm = await ccl.initCommGroup();
    await comm.barrier();
    if (comm.rank === 1) {
      await new Promise((res) => setTimeout(res, 200));
      throw new Error('rank 1 fails on purpose');
    }
    if (comm.rank === 0) return new Promise((res) => setTimeout(res, 500));
    await new Promise((res) => setTimeout(res, 1000));
    await reportOutcome(comm.allReduce(new Float32Array(4)));
  },

  /** Rank `dies` throws while the others wait in an allReduce. */
  async death() {
    const comm = await ccl.initCommGroup();
    if (comm.rank === p.dies) {
      await new Promise((res) => setTimeout(res, 200));
      throw new Error(`rank ${comm.rank} fails on purpose`);
    }
    await reportOutcome(comm.allReduce(new Float32Array(1 << 16)));
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
    await reportOutcome(comm.allReduce(new Float32Array(1 << 12)));
  },

  /**
   * comm.alloc()/free() around every rooted op on alloc() buffers: each rank
   * allocates in its own order (some with a spacer block, so addresses differ between ranks),
   * checks every result, and frees per op or, with p.hold, only at the end of an iteration (the
   * heap then outgrows the memory, which grows under ranks that are allocating).
   */
  async heapStress() {
    const comm = await ccl.initCommGroup();
    const { rank: r, size: n } = comm;
    const { wrong, check } = checker(r);
    const alloc = (dtype, count) => {
      const a = comm.alloc(dtype, count);
      return { arg: a, data: a.data ?? a };
    };
    let ops = 0;
    for (let iter = 0; iter < p.iters; iter++) {
      const held = [];
      const release = (...bs) => {
        if (p.hold) held.push(...bs);
        else for (const b of bs) comm.free(b.arg);
      };
      for (const dtype of p.dtypes)
        for (const count of p.counts)
          for (const kind of ['broadcast', 'reduce'])
            for (const op of ['sum', 'min']) {
              if (kind === 'broadcast' && op === 'min') continue;
              for (let root = 0; root < n; root++)
                for (const withOut of [false, true]) {
                  const spacer = (r + root + iter) % 3 === 0 ? alloc('u8', 1 + ((r * 37) % 200)) : null;
                  const outFirst = (r + count) % 2 === 1;
                  const out0 = withOut && outFirst ? alloc(dtype, count) : null;
                  const x = alloc(dtype, count);
                  const out = withOut ? (out0 ?? alloc(dtype, count)) : null;
                  if (spacer) comm.free(spacer.arg);
                  if (out) out.data.fill(dtype === 'i64' ? 0n : 0);
                  fill(x.data, dtype, op, r);
                  const o = { root, ...(out ? { out: out.arg } : {}), ...(kind === 'reduce' ? { op } : {}) };
                  const what = `${kind} ${dtype} ${op} count=${count} root=${root}${withOut ? ' out' : ''} iter ${iter}`;
                  await (kind === 'broadcast' ? comm.broadcast(x.arg, o) : comm.reduce(x.arg, o));
                  ops++;
                  const res = out ?? x;
                  if (kind === 'broadcast') check(what, res.data, inputArray(op, dtype, root, count));
                  else if (r === root) check(what, res.data, expectedArray(op, dtype, n, count));
                  else check(`${what} (input kept)`, x.data, inputArray(op, dtype, r, count));
                  release(...(out ? [x, out] : [x]));
                }
              if (p.unrooted) {
                const x = alloc(dtype, count);
                fill(x.data, dtype, op, r);
                await comm.allReduce(x.arg, { op });
                check(`allReduce ${dtype} ${op} ${count}`, x.data, expectedArray(op, dtype, n, count));
                const gathered = alloc(dtype, n * count);
                await comm.allGather(gathered.arg, x.arg);
                const reduced = expectedArray(op, dtype, n, count);
                check(`allGather ${dtype} ${count}`, gathered.data, (i) => reduced[i % count]);
                const piece = alloc(dtype, count);
                fill(gathered.data, dtype, 'max', r);
                await comm.reduceScatter(piece.arg, gathered.arg, { op: 'max' });
                check(
                  `reduceScatter ${dtype} ${count}`,
                  piece.data,
                  expectedArray('max', dtype, n, n * count).subarray(r * count),
                );
                ops += 3;
                release(piece, x, gathered);
              }
            }
      for (const b of held) comm.free(b.arg);
    }
    await comm.barrier();
    report({ ok: wrong.length === 0, wrong, ops });
  },

  /**
   * Two allReduces in flight on overlapping views: rank 0 issues first and
   * its op stays pending; the others issue later, so theirs may already have completed. Every
   * rank must refuse the second op alike, then go on.
   */
  async busyAlike() {
    const comm = await ccl.initCommGroup({ timeoutMs: p.timeoutMs });
    const x = new Float32Array(1000).fill(1);
    if (comm.rank !== 0) await new Promise((res) => setTimeout(res, 300));
    const w = comm.allReduce(x);
    let error = null;
    try {
      await comm.allReduce(x.subarray(100, 600));
    } catch (e) {
      error = errorOf(e);
    }
    await w;
    await comm.allReduce(x.subarray(100, 600)); // released once waited for
    report({ error, first: x[0], mid: x[300], size: comm.size });
  },

  /**
   * WEBCCL_CHECK=1: rank 0 writes its input while its allReduce is in flight
   * (the others join 300 ms later, so the op is surely suspended when the write happens).
   */
  async writeInFlight() {
    const comm = await ccl.initCommGroup({ timeoutMs: p.timeoutMs });
    const x = new Float32Array(p.count).fill(1);
    if (comm.rank !== 0) await new Promise((res) => setTimeout(res, 300));
    const t0 = performance.now();
    try {
      const w = comm.allReduce(x);
      if (comm.rank === 0) x[p.count - 1] = 42;
      await w;
      report({ error: null, last: x[p.count - 1] });
    } catch (e) {
      report({ error: errorOf(e), ms: performance.now() - t0 });
    }
  },

  /** A partly overlapping out is refused on threads; the NCCL in-place forms work. */
  async overlap() {
    const comm = await ccl.initCommGroup({ timeoutMs: p.timeoutMs });
    const { rank: r, size: n } = comm;
    const codes = [];
    const buf = comm.alloc('f32', 1004);
    buf.fill(r + 1);
    for (const issue of [
      () => comm.allReduce(buf.subarray(0, 1000), { out: buf.subarray(4, 1004) }),
      () => comm.broadcast(buf.subarray(4, 1004), { out: buf.subarray(0, 1000) }),
      () => comm.reduce(buf.subarray(0, 1000), { out: buf.subarray(1, 1001), root: n - 1 }),
    ]) {
      try {
        issue();
        codes.push(null);
      } catch (e) {
        codes.push(e.code);
      }
    }
    const g = new Float32Array(n * 10);
    g.subarray(r * 10, r * 10 + 10).fill(r + 1);
    await comm.allGather(g, g.subarray(r * 10, r * 10 + 10));
    const rs = new Float32Array(n * 10).fill(r + 1);
    await comm.reduceScatter(rs.subarray(r * 10, r * 10 + 10), rs);
    report({ codes, gathered: Array.from(g.filter((_, i) => i % 10 === 0)), scattered: rs[r * 10] });
  },
  /**
   * allToAll (equal blocks and per-peer counts), gather, scatter and allGather over plain,
   * alloc() and mixed buffers (rank 0 plain, the others alloc()), every root, with heap churn
   * between ops; then a counts-matrix and a root disagreement (coded errors, reported) and a
   * correct op after them.
   */
  async moreCollectives() {
    const comm = await ccl.initCommGroup();
    const { rank: r, size: n } = comm;
    const { wrong, check } = checker(r);
    const val = (dtype, who, i) => encode(dtype, ((who * 31 + i * 7) % 101) - (dtype === 'u8' ? 0 : 50));
    const held = [];
    const buffer = (dtype, count, shared) => {
      if (!shared) return makeBuffer(dtype, count);
      const a = comm.alloc(dtype, count);
      held.push(a);
      return { arg: a, data: a.data ?? a };
    };
    const filled = (dtype, count, shared, who) => {
      const b = buffer(dtype, count, shared);
      for (let i = 0; i < count; i++) b.data[i] = val(dtype, who, i);
      return b;
    };
    const sum = (a) => a.reduce((x, y) => x + y, 0);
    const offs = (a) => a.map((_, k) => sum(a.slice(0, k)));
    for (const placement of p.placements) {
      const shared = placement === 'alloc' || (placement === 'mixed' && r !== 0);
      for (const dtype of p.dtypes)
        for (const count of p.counts) {
          const tag = `${dtype} ${count} ${placement}`;
          const spacer = (r + count) % 3 === 0 ? comm.alloc('u8', 1 + ((r * 37) % 200)) : null;
          const x = filled(dtype, n * count, shared, r);
          const y = buffer(dtype, n * count, shared);
          if (spacer) comm.free(spacer);
          await comm.allToAll(y.arg, x.arg);
          check(`allToAll ${tag}`, y.data, (i) => val(dtype, Math.floor(i / count), r * count + (i % count)));
          // per-peer: m[j][i] = elements rank j sends to rank i
          const m = Array.from({ length: n }, (_, j) =>
            Array.from({ length: n }, (_, i) =>
              (i * 7 + j * 13 + count) % 5 === 0 ? 0 : ((i + 2 * j) % 3) * count + (i % 2),
            ),
          );
          const recv = m.map((row) => row[r]);
          const xs = filled(dtype, sum(m[r]), shared, r);
          const ys = buffer(dtype, sum(recv), shared);
          await comm.allToAll(ys.arg, xs.arg, { sendCounts: m[r], recvCounts: recv });
          const want = [];
          for (let j = 0; j < n; j++) for (let k = 0; k < m[j][r]; k++) want.push(val(dtype, j, offs(m[j])[r] + k));
          check(`allToAll per-peer ${tag}`, ys.data, (i) => want[i]);
          for (let root = 0; root < n; root++) {
            const g = filled(dtype, count, shared, r + root);
            const gOut = r === root ? buffer(dtype, n * count, shared) : null;
            await comm.gather(gOut?.arg ?? null, g.arg, { root });
            if (gOut)
              check(`gather ${tag} root ${root}`, gOut.data, (i) =>
                val(dtype, Math.floor(i / count) + root, i % count),
              );
            const sIn = r === root ? filled(dtype, n * count, shared, 500 + root) : null;
            const sOut = buffer(dtype, count, shared);
            await comm.scatter(sOut.arg, sIn?.arg ?? null, { root });
            check(`scatter ${tag} root ${root}`, sOut.data, (i) => val(dtype, 500 + root, r * count + i));
          }
          await comm.allGather(
            y.arg,
            x.arg.dtype ? { data: x.data.subarray(0, count), dtype } : x.arg.subarray(0, count),
          );
          check(`allGather ${tag}`, y.data, (i) => val(dtype, Math.floor(i / count), i % count));
          for (const a of held.splice(0)) comm.free(a);
        }
    }
    const codes = [];
    const send = Array(n).fill(1);
    const recv = Array(n).fill(1);
    if (r === n - 1) recv[0] = 2; // rank 0 sends it 1
    await comm
      .allToAll(new Float32Array(r === n - 1 ? n + 1 : n), new Float32Array(n), { sendCounts: send, recvCounts: recv })
      .then(
        () => codes.push(null),
        (e) => codes.push(e.code),
      );
    const root = r === n - 1 ? 1 : 0;
    await comm.gather(r === root ? new Float32Array(n) : null, new Float32Array(1), { root }).then(
      () => codes.push(null),
      (e) => codes.push(e.code),
    );
    const after = new Float32Array(n).fill(r);
    const got = new Float32Array(n);
    await comm.allToAll(got, after);
    check('allToAll after the mismatches', got, (i) => i);
    report({ ok: wrong.length === 0, wrong: wrong.slice(0, 5), codes });
  },

  /**
   * send/recv on real threads: ping-pong 0 <-> 1, a ring sends-first and recvs-first, `many`
   * messages each way issued before any wait, every dtype width at sizes 0 / 1 / 40 B / `large`
   * in alloc() and plain buffers, a ring of wrong sizes, and a recv that rank 0 must serve
   * while it waits in an allReduce (rank 1 waits for its send before joining it).
   */
  async p2p() {
    const comm = await ccl.initCommGroup({ timeoutMs: 60_000 });
    const { rank: r, size: n } = comm;
    const next = (r + 1) % n,
      prev = (r + n - 1) % n;
    const wrong = [];
    const pat = (from, to, tag, k, j) => (from * 31 + to * 7 + tag * 13 + k * 3 + j) & 0xff;
    const bytes = (d) => new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
    const fillB = (b, from, to, tag, k) => b.forEach((_, j) => (b[j] = pat(from, to, tag, k, j)));
    const checkB = (what, b, from, to, tag, k) => {
      const j = b.findIndex((v, i) => v !== pat(from, to, tag, k, i));
      if (j >= 0 && wrong.length < 5)
        wrong.push(`${what}: rank ${r} byte ${j} of ${b.length} is ${b[j]}, expected ${pat(from, to, tag, k, j)}`);
    };
    for (let k = 0; k < 20 && r < 2; k++) {
      const x = new Uint8Array(8);
      if (r === 0) {
        fillB(x, 0, 1, 0, k);
        await comm.send(x, 1);
        await comm.recv(x, 1);
        checkB('pong', x, 1, 0, 0, k);
      } else {
        await comm.recv(x, 0);
        checkB('ping', x, 0, 1, 0, k);
        fillB(x, 1, 0, 0, k);
        await comm.send(x, 0);
      }
    }
    for (const recvFirst of [false, true]) {
      const out = new Float32Array(300),
        into = new Float32Array(300);
      fillB(bytes(out), r, next, 5, recvFirst ? 1 : 0);
      const s = () => comm.send(out, next, { tag: 5 }),
        v = () => comm.recv(into, prev, { tag: 5 });
      const ws = recvFirst ? [v(), s()] : [s(), v()];
      for (const w of ws) await w;
      checkB('ring', bytes(into), prev, r, 5, recvFirst ? 1 : 0);
    }
    const works = [],
      got = [];
    for (let i = 0; i < p.many; i++) {
      const m = new Uint8Array(1 + (i % 40));
      fillB(m, r, next, i % 7, Math.floor(i / 7));
      works.push(comm.send(m, next, { tag: i % 7 }));
    }
    for (let i = 0; i < p.many; i++) {
      const m = new Uint8Array(1 + (i % 40));
      got.push([m, i % 7, Math.floor(i / 7)]);
      works.push(comm.recv(m, prev, { tag: i % 7 }));
    }
    for (const w of works) await w;
    for (const [m, tag, k] of got) checkB('many', m, prev, r, tag, k);
    const widths = { u8: 1, bf16: 2, f32: 4, f64: 8 };
    let k = 0;
    for (const [dtype, w] of Object.entries(widths)) {
      for (const size of [0, w, 40, p.large]) {
        for (const [zs, zr] of [
          [false, false],
          [true, true],
          [true, false],
          [false, true],
        ]) {
          const make = (z) =>
            z
              ? comm.alloc(dtype, size / w)
              : dtype === 'bf16'
                ? { data: new Uint16Array(size / w), dtype }
                : new { u8: Uint8Array, f32: Float32Array, f64: Float64Array }[dtype](size / w);
          const sb = make(zs),
            rb = make(zr);
          fillB(bytes(sb.data ?? sb), r, next, 9, k);
          const ws = [comm.send(sb, next, { tag: 9 }), comm.recv(rb, prev, { tag: 9 })];
          for (const x of ws) await x;
          checkB(
            `${dtype} ${size} B ${zs ? 'alloc' : 'plain'}->${zr ? 'alloc' : 'plain'}`,
            bytes(rb.data ?? rb),
            prev,
            r,
            9,
            k,
          );
          if (zs) comm.free(sb);
          if (zr) comm.free(rb);
          k++;
        }
      }
    }
    const sizeCodes = [];
    const bad = [comm.send(new Float32Array(10), next, { tag: 4 }), comm.recv(new Float32Array(12), prev, { tag: 4 })];
    for (const w of bad)
      await w.then(
        () => sizeCodes.push(null),
        (e) => sizeCodes.push(e.code),
      );
    if (r === 0) {
      const y = new Float64Array(50);
      const recv = comm.recv(y, 1, { tag: 2 });
      const a = new Float32Array(4).fill(1);
      await comm.allReduce(a);
      await recv;
      checkB('served recv', bytes(y), 1, 0, 2, 0);
      if (a[0] !== n) wrong.push(`allReduce after a pending recv: ${a[0]}`);
    } else {
      if (r === 1) {
        const y = new Float64Array(50);
        fillB(bytes(y), 1, 0, 2, 0);
        await comm.send(y, 0, { tag: 2 });
      }
      await comm.allReduce(new Float32Array(4).fill(1));
    }
    report({ wrong, sizeCodes });
  },

  /** Rank 0 sends to rank 1, which never posts a recv until long after rank 0's deadline. */
  async p2pTimeout() {
    const comm = await ccl.initCommGroup({ timeoutMs: 60_000 });
    if (comm.rank === 1) {
      await new Promise((res) => setTimeout(res, p.timeoutMs * 3));
      await reportOutcome(comm.recv(new Uint8Array(4), 0));
      return;
    }
    await reportOutcome(comm.send(new Uint8Array(4), 1, { timeoutMs: p.timeoutMs }));
  },

  /** Rank 1's script ends at once; rank 0 waits in a recv from it. */
  async p2pLeave() {
    const comm = await ccl.initCommGroup({ timeoutMs: p.timeoutMs });
    if (comm.rank === 1) return;
    await reportOutcome(comm.recv(new Uint8Array(4), 1));
  },

  // Ops run every way auto mode runs them (held at issue and run on the rank, handed to the
  // progress thread, taken back from it by a wait right after issue): each once in the flight record.
  async flightOnce() {
    const comm = await ccl.initCommGroup();
    const x = comm.alloc('f32', 32 * 1024); // above what a rank starts itself at issue
    const small = new Float32Array(8);
    for (let i = 0; i < 3; i++) comm.allReduce(small).waitSync(); // waited at once, small: run here at issue
    for (let i = 0; i < 6; i++) comm.allReduce(x).waitSync(); // waited at once: held, then run here
    const lead = comm.barrier(); // small: started here at issue, not waited at once
    const sent = comm.allReduce(x); // held (the last wait came at once), then left alone
    const end = performance.now() + 20;
    while (performance.now() < end); // the thread takes `sent` meanwhile (its hold is bounded)
    sent.waitSync();
    lead.waitSync(); // a wait that came late: the next op goes to the thread, first in its hands
    const taken = comm.allReduce(x);
    taken.waitSync(); // at once, within the thread's grace (HOLD_MS): taken back and run here
    comm.barrier().waitSync();
    const rec = comm.flightRecord();
    report({
      seqs: rec.map((e) => e.seq),
      states: [...new Set(rec.map((e) => e.state))],
      heldOps: comm.stats().heldOps,
      threadOps: comm.stats().threadOps,
    });
  },

  /**
   * Every collective issued, then a compute loop that never calls webccl (p.busyMs), then a
   * look: did the op end during the compute? Plain buffers and alloc() buffers.
   */
  async progressOverlap() {
    const comm = await ccl.initCommGroup();
    const { rank: r, size: n } = comm;
    const { wrong, check } = checker(r);
    const busy = () => {
      const end = performance.now() + p.busyMs;
      let acc = 0;
      while (performance.now() < end) acc += Math.sqrt(acc + 1);
      return acc;
    };
    const c = p.count;
    const during = [];
    const startedAfterCall = [];
    for (const zc of [false, true]) {
      const buf = (k) => (zc ? comm.alloc('f32', k) : new Float32Array(k));
      const x = buf(c),
        out = buf(n * c),
        part = buf(c),
        big = buf(n * c),
        root = buf(c);
      const cases = [
        [
          'allReduce',
          () => {
            x.fill(r + 1);
            return comm.allReduce(x);
          },
          () => check('allReduce', x, () => (n * (n + 1)) / 2),
        ],
        [
          'allGather',
          () => {
            part.fill(r + 1);
            return comm.allGather(out, part);
          },
          () => check('allGather', out, (i) => Math.floor(i / c) + 1),
        ],
        [
          'reduceScatter',
          () => {
            big.fill(r + 1);
            return comm.reduceScatter(part, big);
          },
          () => check('reduceScatter', part, () => (n * (n + 1)) / 2),
        ],
        [
          'broadcast',
          () => {
            root.fill(r === 1 % n ? 7 : 0);
            return comm.broadcast(root, { root: 1 % n });
          },
          () => check('broadcast', root, () => 7),
        ],
        [
          'allToAll',
          () => {
            big.forEach((_, i) => {
              big[i] = r * 1000 + Math.floor(i / c);
            });
            return comm.allToAll(out, big);
          },
          () => check('allToAll', out, (i) => Math.floor(i / c) * 1000 + r),
        ],
        ['barrier', () => comm.barrier(), () => undefined],
      ];
      for (const [what, issue, verify] of cases) {
        await comm.barrier(); // every rank issues at about the same time: the compute below outlasts the op
        // p.staggerMs: rank r issues r·staggerMs later (ranks that get a core one by one). Asleep,
        // not spinning: spinning ranks on 2 cores under a loaded suite arrived up to 100 ms late.
        if (p.staggerMs) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, r * p.staggerMs);
        // p.lead: the op follows an op not waited for (a burst, as a backward pass issues them):
        // in auto mode a rank that waited at once has its next op held until its next call.
        const lead = p.lead ? comm.barrier() : undefined;
        const heldBefore = comm.stats().heldOps;
        const w = issue();
        const held = comm.stats().heldOps > heldBefore;
        busy();
        const calledAt = performance.now();
        during.push(`${what}${zc ? ' alloc' : ''}: ${w.isCompleted()}${lead ? ` (lead ${lead.isCompleted()})` : ''}`);
        await lead;
        await w;
        // When this rank's part started, from the first call after the compute (< 0: during it).
        // `held`: auto mode kept it unstarted at issue (the rank's last wait came at once).
        startedAfterCall.push(
          `${what}${zc ? ' alloc' : ''}${held ? ' held' : ''}: ${(w.timing.startedAt - calledAt).toFixed(2)}`,
        );
        verify();
      }
      if (zc) for (const b of [x, out, part, big, root]) comm.free(b);
    }
    const s = comm.stats();
    report({
      wrong,
      during,
      startedAfterCall,
      threadOps: s.threadOps,
      heldOps: s.heldOps,
      mode: comm.progressMode,
      algorithms: s.allReduceAlgorithms,
    });
  },

  /** Synchronous-style calls (waitSync) back to back, plain and alloc() buffers: results right. */
  async progressSync() {
    const comm = await ccl.initCommGroup();
    const { rank: r, size: n } = comm;
    const { wrong, check } = checker(r);
    for (const count of [1, 1000, 300_000]) {
      for (const x of [new Float32Array(count), comm.alloc('f32', count)]) {
        x.fill(r + 1);
        comm.allReduce(x).waitSync();
        check(`allReduce ${count}`, x, () => (n * (n + 1)) / 2);
        x.fill(r === 0 ? 5 : 0);
        comm.broadcast(x, { root: 0 }).waitSync();
        check(`broadcast ${count}`, x, () => 5);
      }
    }
    comm.barrier().waitSync();
    report({ wrong, threadOps: comm.stats().threadOps, mode: comm.progressMode });
  },

  /**
   * Ops in flight on the world and on a group at once, issued in turn, waited for at the end:
   * each communicator ends its ops in the order issued, with the right results.
   */
  async progressOrder() {
    const comm = await ccl.initCommGroup();
    const { rank: r, size: n } = comm;
    const group = await comm.split(0, n - 1 - r); // every rank, numbered backwards
    const { wrong, check } = checker(r);
    const ops = [];
    for (let k = 0; k < p.ops; k++) {
      const a = new Float32Array(p.count).fill(r + k);
      const b = new Float64Array(p.count + k).fill(r * k);
      ops.push({ comm: 'world', w: comm.allReduce(a), a, want: n * k + (n * (n - 1)) / 2 });
      ops.push({ comm: 'group', w: group.allReduce(b), a: b, want: (k * n * (n - 1)) / 2 });
    }
    const end = performance.now() + p.busyMs;
    while (performance.now() < end);
    await Promise.all(ops.map((o) => o.w));
    const order = { world: [], group: [] };
    for (const o of ops) {
      check(`${o.comm} op`, o.a, () => o.want);
      order[o.comm].push(o.w.timing.completedAt);
    }
    const inOrder = (t) => t.every((v, i) => i === 0 || v >= t[i - 1]);
    report({
      wrong,
      inOrder: inOrder(order.world) && inOrder(order.group),
      threadOps: comm.stats().threadOps + group.stats().threadOps,
    });
    group.destroy();
  },

  /**
   * The job's default ('auto') mode across nodes: collectives of p.small elements run on the
   * rank, of p.big on the network progress thread; alternating, all in flight, they end in issue
   * order with the right results. waitSync() is refused on a small op (it ends on the event
   * loop) and works on a large one.
   */
  async netRoute() {
    const comm = await ccl.initCommGroup();
    const { rank: r, size: n } = comm;
    const group = await comm.split(0, n - 1 - r); // every rank, numbered backwards
    const gr = group.rank;
    const { wrong, check } = checker(r);
    const ops = { world: [], group: [] };
    for (let k = 0; k < p.ops; k++) {
      const a = new Float32Array(k % 2 ? p.big : p.small).fill(r + k);
      ops.world.push({ w: comm.allReduce(a), a, want: n * k + (n * (n - 1)) / 2 });
      // The group's sizes alternate the other way round: its small ops run beside the world's large.
      const b = new Float64Array(k % 2 ? p.small : p.big).fill(gr * k);
      ops.group.push({ w: group.allReduce(b), a: b, want: (k * n * (n - 1)) / 2 });
    }
    let endedBefore = 0;
    let inOrder = true;
    for (const [name, list] of Object.entries(ops)) {
      // Waiting for the last op waits for them all: each ends only after those issued before it.
      await list.at(-1).w;
      endedBefore += list.filter((o) => !o.w.isCompleted()).length;
      await Promise.all(list.map((o) => o.w));
      for (const [k, o] of list.entries()) check(`${name} allReduce #${k}`, o.a, () => o.want);
      const ends = list.map((o) => o.w.timing.completedAt);
      inOrder &&= ends.every((v, i) => i === 0 || v >= ends[i - 1]);
    }
    const groupThreadOps = group.stats().threadOps;
    group.destroy();
    const small = comm.allReduce(new Float32Array(4).fill(1));
    let smallSync = 'returned';
    try {
      small.waitSync();
    } catch (e) {
      smallSync = e.code;
    }
    await small;
    const big = new Float32Array(p.big).fill(1);
    comm.allReduce(big).waitSync();
    check('waitSync big', big, () => n);
    report({
      wrong,
      inOrder,
      endedBefore,
      threadOps: comm.stats().threadOps,
      groupThreadOps,
      mode: comm.progressMode,
      smallSync,
      ...(!inOrder && {
        ends: Object.fromEntries(Object.entries(ops).map(([k, l]) => [k, l.map((o) => o.w.timing.completedAt)])),
      }),
    });
  },

  /**
   * Rank 0 passes p.small elements to an allReduce, the others p.big: the two run it on different paths (net-route.ts).
   */
  async netStraddle() {
    const comm = await ccl.initCommGroup({ timeoutMs: p.timeoutMs });
    await comm.barrier();
    await reportOutcome(issued(() => comm.allReduce(new Float32Array(comm.rank === 0 ? p.small : p.big))));
  },

  /**
   * A group across nodes destroyed, the next formed (its blocks likely where the first's were),
   * then abort() of the destroyed one: it must do nothing, and the next group's allReduce of
   * p.count f32 (on the network threads, their node phase in the new block) is right.
   */
  async abortDestroyed() {
    const world = await ccl.initCommGroup();
    const all = [...Array(world.size).keys()];
    const { wrong, check } = checker(world.rank);
    const sum = (g) => {
      const x = new Float32Array(p.count).fill(world.rank + 1);
      return g
        .allReduce(x)
        .then(() => check(`allReduce on group ${g.placement.id}`, x, () => (world.size * (world.size + 1)) / 2));
    };
    // p.rounds times (default 1): the heap puts the next group where the first was in most rounds, not all.
    let error = null;
    let threadOps = 0;
    for (let round = 0; round < (p.rounds ?? 1) && !error; round++) {
      const first = await world.createGroup(all);
      await sum(first);
      first.destroy();
      await world.barrier(); // every rank has let go: the next group's block is allocated where the first's was
      const next = await world.createGroup(all);
      first.abort('too late');
      await sum(next)
        .then(() => sum(next))
        .catch((e) => (error = errorOf(e)));
      threadOps = next.stats().threadOps;
      next.destroy();
    }
    report({ wrong, error, threadOps });
  },

  /**
   * An op the network progress thread runs, awaited while this rank has work of its own on its
   * own connections that a peer needs first (an await of such an op may block the rank's thread
   * only when it has none): rank 0 sends a message larger than a socket takes at once, or issues
   * a small op on a group (run on the rank's connections), and awaits a large world op before
   * it; the peers await the send's message or the group's op first.
   */
  async awaitBehind() {
    const comm = await ccl.initCommGroup();
    const { rank: r, size: n } = comm;
    const { wrong, check } = checker(r);
    const group = await comm.split(0, r);
    const sum = (n * (n + 1)) / 2;
    const big = () => new Float32Array(p.big).fill(r + 1);
    for (let round = 0; round < p.rounds; round++) {
      const msg = new Uint8Array(p.msgBytes);
      const x = big();
      if (r === 0) {
        const s = comm.send(msg.fill(round + 7), 1);
        await comm.allReduce(x);
        await s;
      } else {
        if (r === 1) await comm.recv(msg, 0);
        await comm.allReduce(x);
      }
      if (r === 1) check('message', msg, () => round + 7);
      check('allReduce behind a send', x, () => sum);
      const small = new Float32Array(4).fill(r + 1);
      const y = big();
      if (r === 0) {
        const w = group.allReduce(small);
        await comm.allReduce(y);
        await w;
      } else {
        await group.allReduce(small);
        await comm.allReduce(y);
      }
      check("a group's small allReduce", small, () => sum);
      check('allReduce behind it', y, () => sum);
    }
    report({ wrong, threadOps: comm.stats().threadOps, groupThreadOps: group.stats().threadOps });
    group.destroy();
  },

  /** Rank 0 hands an op to the progress thread and says so; rank 1 issues its op only after p.lateMs. */
  async progressHeld() {
    const comm = await ccl.initCommGroup({ timeoutMs: 60_000 });
    if (comm.rank === 1) await new Promise((res) => setTimeout(res, p.lateMs));
    if (p.dies === comm.rank) throw new Error('rank 1 fails on purpose');
    // (rank 1 may know of the abort by the time it issues: seen both ways under load)
    const w = issued(() => comm.allReduce(new Float32Array(p.count).fill(1)));
    report({ posted: comm.rank });
    await reportOutcome(w);
  },
};

await scenarios[name]();
