// WEBCCL_DEBUG: WARN (default), INFO (per-rank setup) or TRACE (every op) on stderr.
import { envString } from './config.js';

const LEVELS = { WARN: 0, INFO: 1, TRACE: 2 } as const;
type Level = keyof typeof LEVELS;

let current: number | undefined;
function level(): number {
  if (current === undefined) {
    const v = (envString('WEBCCL_DEBUG') ?? 'WARN').toUpperCase();
    current = v in LEVELS ? LEVELS[v as Level] : LEVELS.WARN;
    if (!(v in LEVELS))
      console.warn(`webccl: WEBCCL_DEBUG=${v} is not one of ${Object.keys(LEVELS).join(', ')}; using WARN`);
  }
  return current;
}

export function enabled(l: Level): boolean {
  return level() >= LEVELS[l];
}

/**
 * Who this thread is: "rank 3" (a worker thread or process is one rank), or "progress thread"; null once two ranks
 * joined in it (tests).
 */
let thisThread: string | null | undefined;

/** Called as a rank joins: lines that name no rank (the tuner's) then name this one. */
export function setLogRank(rank: number): void {
  setLogThread(`rank ${rank}`);
}

export function setLogThread(who: string): void {
  thisThread = thisThread === undefined || thisThread === who ? who : null;
}

let writeLine = (line: string): void => console.error(line);

/**
 * Where this thread's lines go (default console.error). A Node worker's console reaches the
 * process's stderr through the main thread's event loop, so its last lines are lost when the
 * process ends right after them: a thread that must not lose them writes to fd 2 itself.
 */
export function setLogWriter(w: (line: string) => void): void {
  writeLine = w;
}

/** Every line says who printed it: "webccl INFO rank 3: tuner: ...". */
export function log(l: Level, msg: string): void {
  if (!enabled(l)) return;
  const who = thisThread && !msg.startsWith('rank ') ? `${thisThread}: ` : '';
  writeLine(`webccl ${l} ${who}${msg}`);
}
