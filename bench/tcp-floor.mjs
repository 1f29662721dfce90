// The floor under any Node.js TCP ping-pong on this machine, for bench/pingpong.mjs: two
// processes bounce an 8-byte message over one loopback socket each way (noDelay, no framing,
// no library). Prints {"bytes":8,"iters":N,"us":one-way latency} (round trip / 2, median of 3).
import { fork } from 'node:child_process';
import { createServer, connect } from 'node:net';

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
    let got = 0, left = 0, t0 = 0, block = 0;
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
  server.listen(0, '127.0.0.1', () => fork(new URL(import.meta.url).pathname, [String(N), 'echo', String(server.address().port)]));
}
