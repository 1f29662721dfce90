// The floors under any Node.js TCP transfer between two processes on this machine (no framing,
// no library), for bench/pingpong.mjs and for reading bench/compare.mjs --tcp:
//   node bench/tcp-floor.mjs [N]            an 8-byte message bounced over one loopback socket
//       each way (noDelay): prints {"bytes":8,"iters":N,"us":one-way latency} (round trip / 2,
//       median of 3 blocks of N).
//   node bench/tcp-floor.mjs --stream 64M [--reps 10] [--chunk 512K] [--sockets 1] [--oneway]
//       both processes send 64 MiB to each other at once, each over its own connection(s),
//       written in --chunk writes and read straight into one preallocated buffer (Node's onread,
//       as webccl's links read): prints {"bytes","ms","GBs"} (the median exchange over --reps,
//       after one warm-up). A 2-rank ring allReduce of S bytes sends and receives S bytes per
//       rank, so S / ms is the busbw no Node.js allReduce over these sockets can pass here
//       (before any reduction). With --oneway only the parent sends (the child answers each
// transfer with one byte): the floor under a 2-rank broadcast. cpuMsPerExchange is the parent's CPU time per exchange:
// on a
//       machine with as many cores as processes, that cost bounds the time even when idle waits vanish.
import { fork } from 'node:child_process';
import { connect, createServer } from 'node:net';

if (process.argv.includes('--stream')) await stream();
else latency();

function latency() {
  const N = Number(process.argv[2] ?? 5000);
  if (process.argv[3] === 'echo') {
    const s = connect(Number(process.argv[4]), '127.0.0.1');
    s.setNoDelay(true);
    s.on('data', (d) => s.write(d));
    s.on('close', () => process.exit(0));
  } else {
    const server = createServer((sock) => {
      sock.setNoDelay(true);
      const msg = Buffer.alloc(8);
      let got = 0,
        left = 0,
        t0 = 0,
        block = 0;
      const times = [];
      const start = () => {
        left = block === 0 ? 500 : N; // a warm-up block, then 3 timed ones
        t0 = performance.now();
        sock.write(msg);
      };
      sock.on('data', (d) => {
        got += d.length;
        while (got >= 8) {
          got -= 8;
          if (--left > 0) {
            sock.write(msg);
            continue;
          }
          if (block++ > 0) times.push(((performance.now() - t0) * 1000) / N / 2);
          if (times.length === 3) {
            times.sort((a, b) => a - b);
            console.log(JSON.stringify({ bytes: 8, iters: N, us: Number(times[1].toFixed(4)) }));
            sock.destroy();
            server.close();
            return;
          }
          start();
        }
      });
      start();
    });
    server.listen(0, '127.0.0.1', () =>
      fork(new URL(import.meta.url).pathname, [String(N), 'echo', String(server.address().port)]),
    );
  }
}

function size(s) {
  const m = /^(\d+(?:\.\d+)?)([KMG]?)$/i.exec(s);
  if (!m) throw new Error(`bad size ${s}`);
  return Math.round(Number(m[1]) * { '': 1, K: 1024, M: 1 << 20, G: 1 << 30 }[m[2].toUpperCase()]);
}

/** Both processes stream `bytes` to each other at once; the parent reports the median exchange. */
async function stream() {
  const arg = (name, dflt) => {
    const k = process.argv.indexOf(name);
    return k > 0 ? process.argv[k + 1] : dflt;
  };
  const bytes = size(arg('--stream', '64M'));
  const reps = Number(arg('--reps', '10'));
  const chunk = size(arg('--chunk', '512K'));
  const nsock = Number(arg('--sockets', '1'));
  const oneway = process.argv.includes('--oneway');
  const child = process.argv.includes('--child');
  const into = new Uint8Array(bytes);
  const out = new Uint8Array(bytes).fill(7);
  let got = 0;
  let wanted = 0;
  let arrived = () => {};
  // Reads land in `into` (wrapping per exchange), as a dialled webccl link reads into a posted receive.
  const dial = (port) =>
    new Promise((resolve) => {
      const s = connect(
        {
          port,
          host: '127.0.0.1',
          onread: {
            buffer: () => into.subarray(got % bytes === 0 && got > 0 ? 0 : got % bytes),
            callback: (n) => {
              got += n;
              if (got >= wanted) arrived();
              return true;
            },
          },
        },
        () => resolve(s),
      );
      s.setNoDelay(true);
    });
  const listen = () =>
    new Promise((resolve) => {
      const socks = [];
      const server = createServer((s) => {
        s.setNoDelay(true);
        socks.push(s);
        if (socks.length === nsock) resolve({ server, socks });
      });
      server.listen(0, '127.0.0.1', () => (listen.port = server.address().port));
      listen.server = server;
    });
  const send = (socks) => {
    const per = Math.ceil(bytes / nsock);
    let pending = 0;
    return new Promise((resolve) => {
      socks.forEach((s, i) => {
        for (let at = i * per; at < Math.min(bytes, (i + 1) * per); at += chunk) {
          pending++;
          s.write(out.subarray(at, Math.min(at + chunk, (i + 1) * per, bytes)), () => --pending === 0 && resolve());
        }
      });
    });
  };
  const receive = (n) => {
    wanted += n;
    const received = new Promise((r) => (arrived = () => got >= wanted && r()));
    if (got >= wanted) arrived();
    return received;
  };
  // --oneway: the parent sends, the child receives and answers each transfer with one byte.
  const ack = new Uint8Array(1);
  const exchange = async (socks) => {
    if (!oneway) return void (await Promise.all([send(socks), receive(bytes)]));
    if (child) {
      await receive(bytes);
      socks[0].write(ack);
    } else await Promise.all([send(socks), receive(1)]);
  };
  // Each side listens (its peer writes to it) and dials (it reads what its peer writes).
  const accepted = listen();
  await new Promise((r) => setTimeout(r, 50));
  let readers;
  if (child) {
    const parentPort = Number(arg('--port'));
    process.send({ port: listen.port });
    readers = await Promise.all(Array.from({ length: nsock }, () => dial(parentPort)));
  } else {
    const { fork: forkChild } = await import('node:child_process');
    const args = [
      '--stream',
      String(bytes),
      '--reps',
      String(reps),
      '--chunk',
      String(chunk),
      '--sockets',
      String(nsock),
      '--child',
      '--port',
      String(listen.port),
      ...(oneway ? ['--oneway'] : []),
    ];
    const c = forkChild(new URL(import.meta.url).pathname, args);
    const port = await new Promise((r) => c.once('message', (m) => r(m.port)));
    readers = await Promise.all(Array.from({ length: nsock }, () => dial(port)));
  }
  const { server, socks } = await accepted;
  const times = [];
  let c0;
  for (let k = 0; k <= reps; k++) {
    if (k === 1) c0 = process.cpuUsage();
    const t0 = performance.now();
    await exchange(socks);
    if (k > 0) times.push(performance.now() - t0);
  }
  const cpu = process.cpuUsage(c0);
  times.sort((a, b) => a - b);
  const ms = times[Math.floor(times.length / 2)];
  if (!child)
    console.log(
      JSON.stringify({
        bytes,
        chunk,
        sockets: nsock,
        reps,
        oneway,
        ms: Number(ms.toFixed(3)),
        GBs: Number((bytes / ms / 1e6).toFixed(3)),
        cpuMsPerExchange: {
          user: Number((cpu.user / 1e3 / reps).toFixed(2)),
          system: Number((cpu.system / 1e3 / reps).toFixed(2)),
        },
      }),
    );
  // Let the peer finish its last exchange before closing.
  await new Promise((r) => setTimeout(r, 200));
  for (const s of [...socks, ...readers]) s.destroy();
  server.close();
  if (child) process.exit(0);
}
