// `npm run browser`: serves this folder with `webccl serve` (cross-origin isolated, webccl's
// browser build at /webccl.js) and prints the address of the training page. Flags go to
// `webccl serve` (default --port 8080; --port 0 picks a free one).
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = fileURLToPath(new URL('.', import.meta.url));
const bin = fileURLToPath(new URL('node_modules/webccl/bin/webccl.js', import.meta.url));
const args = process.argv.slice(2);
const server = spawn(process.execPath, [bin, 'serve', here, ...(args.length ? args : ['--port', '8080'])], {
  stdio: ['ignore', 'pipe', 'inherit'],
});
createInterface({ input: server.stdout }).on('line', (line) => {
  console.log(line);
  const at = / at (http:\/\/\S+?)\/ \(/.exec(line);
  if (at) console.log(`the training page: ${at[1]}/browser/  (?ranks=4 for 4 workers; Ctrl-C ends the server)`);
});
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'])
  process.on(signal, () => {
    stopping = true;
    server.kill(signal);
  });
// Ended by the signal passed on (or by its own, from the same Ctrl-C): a clean stop.
server.on('exit', (code) => process.exit(code ?? (stopping ? 0 : 1)));
