// WEBCCL_DEBUG: WARN (default), INFO (per-rank setup) or TRACE (every op) on stderr.
import { envString } from './config.js';

const LEVELS = { WARN: 0, INFO: 1, TRACE: 2 } as const;
type Level = keyof typeof LEVELS;

let current: number | undefined;
function level(): number {
  if (current === undefined) {
    const v = (envString('WEBCCL_DEBUG') ?? 'WARN').toUpperCase();
    current = v in LEVELS ? LEVELS[v as Level] : LEVELS.WARN;
    if (!(v in LEVELS)) console.warn(`webccl: WEBCCL_DEBUG=${v} is not one of ${Object.keys(LEVELS).join(', ')}; using WARN`);
  }
  return current;
}

export function enabled(l: Level): boolean {
  return level() >= LEVELS[l];
}

/** The world rank of this thread (a worker thread or process is one rank); null once two ranks joined in it (tests). */
let thisRank: number | null | undefined;

/** Called as a rank joins: lines that name no rank (the tuner's) then name this one. */
export function setLogRank(rank: number): void {
  thisRank = thisRank === undefined || thisRank === rank ? rank : null;
}

/** Every line names its rank: "webccl INFO rank 3: tuner: ...". */
export function log(l: Level, msg: string): void {
  if (!enabled(l)) return;
  const who = typeof thisRank === 'number' && !msg.startsWith('rank ') ? `rank ${thisRank}: ` : '';
  console.error(`webccl ${l} ${who}${msg}`);
}
