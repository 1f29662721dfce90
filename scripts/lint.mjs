#!/usr/bin/env node
// `npm run lint`: every check of the code that is not a test, in one command (CI runs it).
//   1. Biome: formatting, lint rules and import order of the TypeScript and JavaScript;
//   2. the AssemblyScript formatted as Biome formats it (it parses `@inline` on functions only
//      in its error-tolerant mode, so the files are compared with what it prints);
//   3. no line over 120 characters but one a long literal holds (scripts/long-lines.mjs);
//   4. the layering of src/ (scripts/check-imports.mjs).
// With --fix (`npm run format`) it rewrites what it can instead: formatting, import order,
// safe lint fixes, long lines.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const fix = process.argv.includes('--fix');
const CODE = ['src', 'test', 'bench', 'scripts', 'examples', 'vitest.config.ts'];
const biome = join(root, 'node_modules', '.bin', 'biome');
let failed = 0;

function step(name, ok) {
  console.log(`lint: ${name}: ${ok ? 'ok' : 'FAILED'}`);
  if (!ok) failed++;
}

// 1. Biome over the TypeScript and JavaScript.
const checked = spawnSync(biome, ['check', '--error-on-warnings', ...(fix ? ['--write'] : []), ...CODE], {
  cwd: root,
  stdio: 'inherit',
});
step('biome check', checked.status === 0);

// 2. The AssemblyScript, as Biome prints it.
const assembly = execFileSync('git', ['ls-files', 'assembly/*.ts', 'assembly/**/*.ts'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter(Boolean);
const unformatted = [];
for (const file of assembly) {
  const text = readFileSync(join(root, file), 'utf8');
  const printed = execFileSync(biome, ['format', `--stdin-file-path=${file}`], {
    cwd: root,
    input: text,
    encoding: 'utf8',
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  if (printed === text) continue;
  if (fix) writeFileSync(join(root, file), printed);
  else unformatted.push(file);
}
for (const f of unformatted) console.log(`${f}: not formatted (npm run format)`);
step('assembly formatted', unformatted.length === 0);

// 3. Line length, 4. layering.
for (const [name, script] of [
  ['lines of at most 120 characters', 'long-lines.mjs'],
  ['layering of src/', 'check-imports.mjs'],
]) {
  const args = name.startsWith('lines') && fix ? ['--fix'] : [];
  const r = spawnSync(process.execPath, [join(root, 'scripts', script), ...args], { cwd: root, stdio: 'inherit' });
  step(name, r.status === 0);
}

process.exit(failed ? 1 : 0);
