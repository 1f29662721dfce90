// The README's example, taken from the README itself (its first `js` block) and run as a rank
// script on every launch form its first line names: 4 thread ranks and 2 processes. What each
// rank prints is what the example's comments promise.
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));

/** The README's first ```js block. */
function example(): string {
  const m = /```js\n([\s\S]*?)```/.exec(readFileSync(join(root, 'README.md'), 'utf8'));
  if (!m) throw new Error('README.md has no js block');
  return m[1];
}

/**
 * What rank `r` of `n` prints: the average then the sum of 1..n, every rank's number, and its group's root's number.
 */
function expected(r: number, n: number): string {
  const sum = (n * (n + 1)) / 2;
  const groupRank = Math.floor(r / 2);
  return `rank ${r}: sum ${sum}, ranks ${[...Array(n).keys()].join(',')}, group rank ${groupRank}, got ${r % 2}`;
}

describe("the README's example", () => {
  for (const [form, n] of [
    [[], 4],
    [['--procs'], 2],
  ] as const) {
    it(`runs on ${n} ${form.length ? 'processes' : 'thread ranks'} and prints what its comments say`, () => {
      // Inside the package, so that `import 'webccl'` resolves to it (a package may import itself by name).
      const script = join(root, 'test', `.readme-example-${process.pid}-${n}.mjs`);
      writeFileSync(script, example());
      try {
        const r = spawnSync(
          process.execPath,
          [join(root, 'bin', 'webccl.js'), 'run', ...form, '-n', String(n), script],
          { cwd: root, encoding: 'utf8', timeout: 180_000 },
        );
        expect(r.stderr).toBe('');
        expect(r.status).toBe(0);
        const lines = r.stdout.trim().split('\n').sort();
        expect(lines).toEqual([...Array(n).keys()].map((k) => expected(k, n)).sort());
      } finally {
        rmSync(script, { force: true });
      }
    }, 200_000);
  }
});
