// Readies the webccl this example depends on ("webccl": "file:../.."): npm links
// node_modules/webccl to the repository root, whose package points at its built dist/ and
// resolves its own dependency (ws) from the root's node_modules. In a fresh clone neither is
// there yet: install the root's dependencies (npm ci) and build it (npm run build), once.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const npm = (...args) => {
  console.log(`setup: npm ${args.join(' ')} in ${root}`);
  const r = spawnSync('npm', args, { cwd: root, stdio: 'inherit', shell: process.platform === 'win32' });
  if (r.status !== 0) {
    console.error(`setup: npm ${args.join(' ')} failed in ${root} (exit ${r.status ?? r.signal})`);
    process.exit(1);
  }
};

if (!existsSync(new URL('../../node_modules/ws/package.json', import.meta.url))) npm('ci', '--no-audit', '--no-fund');
if (!['node/index.js', 'browser/index.js'].every((f) => existsSync(new URL(`../../dist/${f}`, import.meta.url))))
  npm('run', 'build');
