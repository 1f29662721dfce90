// Helpers the bench scripts share: this machine is shared with other work, so a script waits
// for a quiet moment before a run and records how busy the CPUs were; and the small option
// readers every script needs.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Share (percent) of the CPUs busy over 0.5 s, from /proc/stat; undefined where there is none. */
export function cpuBusy() {
  const read = () => readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
  try {
    const a = read();
    spawnSync('sleep', ['0.5']);
    const d = read().map((x, k) => x - a[k]);
    const total = d.reduce((s, x) => s + x, 0);
    return total > 0 ? Math.round((100 * (total - d[3] - (d[4] ?? 0))) / total) : undefined;
  } catch {
    return undefined;
  }
}

/** Waits (up to `waitSec`) until at most `quiet` percent of the CPUs are busy; returns the last share seen. */
export function waitQuiet(quiet, waitSec = 120) {
  const until = performance.now() + waitSec * 1000;
  let busy = cpuBusy();
  while (busy !== undefined && busy > quiet && performance.now() < until) {
    spawnSync('sleep', ['2']);
    busy = cpuBusy();
  }
  return busy;
}

/**
 * A bench script's options, from parse(argv) (which throws on bad ones): exits 2 with the
 * message, or when the built package it runs is missing.
 */
export function benchOptions(name, parse, root) {
  let o;
  try {
    o = parse(process.argv.slice(2));
  } catch (e) {
    console.error(`bench/${name}: ${e.message}`);
    process.exit(2);
  }
  if (!existsSync(join(root, 'dist', 'node'))) {
    console.error(`bench/${name}: dist/ is missing; run \`npm run build\` first`);
    process.exit(2);
  }
  return o;
}

/** The value after flag `name` in argv, or `dflt` (simple scripts: `--ranks 1024,4096`). */
export function flagOf(args, name, dflt) {
  const i = args.indexOf(name);
  return i < 0 ? dflt : args[i + 1];
}

const UNITS = { '': 1, K: 1 << 10, M: 1 << 20, G: 1 << 30 };
/** Bytes of a size written like 1K, 32M or 1G (`what` names the flag in the error). */
export function bytesOf(text, what = 'sizes') {
  const m = /^(\d+)([KMG]?)$/.exec(text);
  if (!m) throw new Error(`${what} are like 1K, 32M, 1G; got ${text}`);
  return Number(m[1]) * UNITS[m[2]];
}

/**
 * Walks a bench script's options: `take(flag, value)` handles one (`value()` reads the word after
 * it) and returns false for a flag it does not know. -h and --help print `usage` and exit; an
 * unknown flag or a missing value throws an error that ends with `usage`.
 */
export function eachOption(argv, usage, take) {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-h' || a === '--help') {
      console.log(usage);
      process.exit(0);
    }
    const value = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value\n${usage}`);
      return argv[++i];
    };
    if (!take(a, value)) throw new Error(`unknown option ${a}\n${usage}`);
  }
}

/** The comma-separated names of `s`, each one of `known` (else an error naming the `what`). */
export function knownList(s, known, what) {
  const xs = s.split(',').filter(Boolean);
  for (const x of xs) if (!known.includes(x)) throw new Error(`unknown ${what} ${x} (known: ${known.join(', ')})`);
  return xs;
}
