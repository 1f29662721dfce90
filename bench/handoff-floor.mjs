#!/usr/bin/env node
// The floor under a collective that a network progress thread runs for its rank, on this
// machine, with no library: two processes exchange S bytes per op over one loopback socket
// (each sends S, then waits until S arrived), one op after another, in two ways:
//   rank    a worker owns the socket and awaits each exchange itself (webccl's 'caller' mode);
//   thread  a second worker owns the socket; the first posts each op through a shared word
//           (Atomics.notify) and waits with Atomics.waitAsync until the second says it is done
//           (webccl's network progress thread, and the two hand-offs every waited op pays it).
// rank/thread is the most a waited op run by such a thread can reach against the same op run
// by its rank here: what bench/progress-modes.mjs's default/caller column is held against.
// --pairs T runs T such pairs per process at once ('rank' only): the floor under T thread ranks
// per process each exchanging with its counterpart (2 launchers × T threads).
//   node bench/handoff-floor.mjs [--sizes 8,256K,1M,4M,16M] [--ops 2000] [--pairs 1] [--json FILE]
import { fork } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';

const WARM = 300;

/** One end's socket (the worker listens or dials), and an exchange of `bytes` on it. */
async function exchanger({ listen, port, bytes }) {
  const sock = await new Promise((resolve) => {
    if (listen) {
      const server = createServer((s) => {
        server.close();
        resolve(s);
      });
      server.listen(port, '127.0.0.1');
    } else {
      const dial = () => {
        const s = connect(port, '127.0.0.1', () => resolve(s));
        s.on('error', () => setTimeout(dial, 20));
      };
      dial();
    }
  });
  sock.setNoDelay(true);
  let have = 0,
    want = 0,
    wake;
  sock.on('data', (d) => {
    have += d.length;
    if (wake && have >= want) {
      wake();
      wake = undefined;
    }
  });
  const out = Buffer.alloc(bytes, 1);
  const once = () =>
    new Promise((resolve) => {
      want += bytes;
      sock.write(out);
      if (have >= want) resolve();
      else wake = resolve;
    });
  return { once, end: () => sock.end() };
}

if (!isMainThread) {
  // A worker: 'rank' times its own exchanges; 'io' serves the posts of the worker 'poster'; 'poster' posts and times.
  const w = workerData;
  if (w.role === 'poster') {
    const word = new Int32Array(w.sab);
    const alive = setInterval(() => {}, 1 << 30); // (Atomics.waitAsync alone does not keep a thread alive)
    let t0 = 0;
    for (let k = 1; k <= WARM + w.ops; k++) {
      if (k === WARM + 1) t0 = performance.now();
      Atomics.store(word, 0, k);
      Atomics.notify(word, 0);
      while (Atomics.load(word, 1) < k) {
        const r = Atomics.waitAsync(word, 1, k - 1, 1000);
        if (r.async) await r.value;
      }
    }
    parentPort.postMessage(((performance.now() - t0) * 1000) / w.ops);
    clearInterval(alive);
  } else {
    const x = await exchanger(w);
    parentPort.postMessage('ready');
    if (w.role === 'rank') {
      for (let k = 0; k < WARM; k++) await x.once();
      const t0 = performance.now();
      for (let k = 0; k < w.ops; k++) await x.once();
      parentPort.postMessage(((performance.now() - t0) * 1000) / w.ops);
    } else {
      const word = new Int32Array(w.sab);
      for (let k = 1; k <= WARM + w.ops; k++) {
        while (Atomics.load(word, 0) < k) {
          const r = Atomics.waitAsync(word, 0, k - 1, 1000);
          if (r.async) await r.value;
        }
        await x.once();
        Atomics.store(word, 1, k);
        Atomics.notify(word, 1);
      }
    }
    x.end();
  }
} else if (process.argv[2] === '--end') {
  // One process of the pair: argv JSON { listen, port, bytes, ops, mode, pairs }; prints µs per op.
  const o = JSON.parse(process.argv[3]);
  const start = (data) => new Worker(new URL(import.meta.url), { workerData: data });
  const message = (w) =>
    new Promise((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    });
  let us;
  if (o.mode === 'rank') {
    const ws = Array.from({ length: o.pairs }, (_, k) => start({ ...o, port: o.port + k, role: 'rank' }));
    await Promise.all(ws.map(message));
    us = await Promise.all(ws.map(message));
  } else {
    const sab = new SharedArrayBuffer(8);
    const io = start({ ...o, role: 'io', sab });
    await message(io);
    us = [await message(start({ ...o, role: 'poster', sab }))];
  }
  process.send(us);
} else {
  const arg = (name, def) => {
    const i = process.argv.indexOf(`--${name}`);
    return i > 0 ? process.argv[i + 1] : def;
  };
  const bytesOf = (s) =>
    Number(/^(\d+)([KM]?)$/i.exec(s)?.[1]) *
    { '': 1, K: 1024, M: 1 << 20 }[/^\d+([KM]?)$/i.exec(s)?.[1].toUpperCase() ?? ''];
  const sizes = arg('sizes', '8,256K,1M,4M,16M').split(',').map(bytesOf);
  const pairs = Number(arg('pairs', '1'));
  const budgetOps = Number(arg('ops', '2000'));
  const port = await new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
  });
  /** µs per op of one pair of processes in `mode` (the slower end's). */
  const run = async (mode, bytes, ops) => {
    const ends = [true, false].map((listen) =>
      fork(new URL(import.meta.url).pathname, ['--end', JSON.stringify({ listen, port, bytes, ops, mode, pairs })]),
    );
    const got = await Promise.all(
      ends.map(
        (e) =>
          new Promise((resolve, reject) => {
            e.once('message', resolve);
            e.once('exit', (c) => c && reject(new Error(`exit ${c}`)));
          }),
      ),
    );
    return Math.max(...got.flat());
  };
  const rows = [];
  console.log(`# bench/handoff-floor: ${pairs} pair(s) per process, Node ${process.version}`);
  console.log(
    ['bytes', 'rank µs', ...(pairs === 1 ? ['thread µs', 'rank/thread'] : [])].map((h) => h.padStart(12)).join(''),
  );
  for (const bytes of sizes) {
    const ops = Math.max(50, Math.min(budgetOps, Math.round((budgetOps * 65536) / Math.max(bytes, 65536))));
    const rank = await run('rank', bytes, ops);
    const thread = pairs === 1 ? await run('thread', bytes, ops) : undefined;
    rows.push({ bytes, ops, rankUs: rank, threadUs: thread });
    console.log(
      [bytes, rank.toFixed(1), ...(thread ? [thread.toFixed(1), (rank / thread).toFixed(2)] : [])]
        .map((c) => String(c).padStart(12))
        .join(''),
    );
  }
  const json = arg('json', undefined);
  if (json) writeFileSync(json, JSON.stringify({ node: process.version, pairs, rows }, null, 2));
}
