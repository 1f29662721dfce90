// `npm run start:nodes`: the training as a job of 2 nodes × 2 threads on this machine — two
// `webccl run --nnodes 2` launchers, as two machines would start it, meeting at a free port of
// 127.0.0.1. Shared memory carries the ops inside each node, TCP between the nodes. Flags go to
// train.mjs (e.g. --zero adam).
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

const bin = fileURLToPath(new URL('node_modules/webccl/bin/webccl.js', import.meta.url));
const script = fileURLToPath(new URL('train.mjs', import.meta.url));

/** A port no one listens on now (the master's launcher takes it a moment later). */
const freePort = () =>
  new Promise((resolve, reject) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });

const port = String(await freePort());
const launcher = (nodeRank) =>
  spawn(
    process.execPath,
    [
      bin,
      'run',
      '--nnodes',
      '2',
      '--node-rank',
      String(nodeRank),
      '--nproc-per-node',
      '2',
      '--master-addr',
      '127.0.0.1',
      '--master-port',
      port,
      script,
      ...process.argv.slice(2),
    ],
    { stdio: 'inherit' },
  );
const codes = await Promise.all([0, 1].map((k) => new Promise((resolve) => launcher(k).on('exit', resolve))));
process.exit(codes.every((c) => c === 0) ? 0 : 1);
