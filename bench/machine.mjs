// This machine's business, for the bench scripts: it is shared with other work, so each script
// waits for a quiet moment before a run and records how busy the CPUs were.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

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
