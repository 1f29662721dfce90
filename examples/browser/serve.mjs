#!/usr/bin/env node
// Serves this package over HTTP with the two headers that make a page cross-origin isolated
// (SharedArrayBuffer, so shared WebAssembly memory, needs them), and prints the example's
// address. Usage: node serve.mjs [--port 8080] [--host 127.0.0.1]   (--port 0: any free port)
import { createReadStream, statSync } from 'node:fs';
import { createServer } from 'node:http';
import { extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { port: { type: 'string', default: '8080' }, host: { type: 'string', default: '127.0.0.1' } } });
// The package root: the page imports ../../dist/browser/index.js from examples/browser/.
const root = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const TYPES = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript', '.css': 'text/css', '.json': 'application/json', '.md': 'text/plain; charset=utf-8' };

const server = createServer((req, res) => {
  const path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
  let file = resolve(join(root, path));
  if (file !== root && !file.startsWith(root + sep)) return void res.writeHead(403).end();
  try {
    if (statSync(file).isDirectory()) {
      // A folder's page loads ./main.js: its address must end in '/' for that to resolve inside it.
      if (!path.endsWith('/')) return void res.writeHead(301, { location: `${path}/` }).end();
      file = join(file, 'index.html');
    }
    statSync(file);
  } catch {
    return void res.writeHead(404).end();
  }
  res.writeHead(200, {
    'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
    'cross-origin-opener-policy': 'same-origin',
    'cross-origin-embedder-policy': 'require-corp',
  });
  createReadStream(file).pipe(res);
});
server.listen(Number(values.port), values.host, () => {
  const { port } = server.address();
  console.log(`webccl browser example: http://${values.host}:${port}/examples/browser/`);
});
