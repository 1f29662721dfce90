// Checks of what a store client is asked for, at the API boundary: keys, deadlines and the value
// limit, refused with INVALID_ARGUMENT before anything is sent, so that the server never has to
// refuse a frame a well-behaved client built.
import { WebcclError } from '../core/errors.js';
import { textBytes } from '../wire/bytes.js';
import { MAX_KEY_BYTES, MAX_VALUE_LIMIT, NO_DEADLINE } from './store-protocol.js';

export const bad = (message: string) => new WebcclError('INVALID_ARGUMENT', message);

/** A get or wait deadline as the wire carries it (Infinity: NO_DEADLINE). */
export function wireTimeout(ms: number): number {
  if (ms === Infinity) return NO_DEADLINE;
  if (!Number.isInteger(ms) || ms < 0) throw bad(`timeoutMs must be a non-negative integer or Infinity, got ${ms}`);
  return Math.min(ms, NO_DEADLINE - 1);
}

export function checkKey(key: string): string {
  if (typeof key !== 'string' || key === '' || textBytes(key).length > MAX_KEY_BYTES) {
    throw bad(`store key must be a non-empty string of at most ${MAX_KEY_BYTES} UTF-8 bytes`);
  }
  return key;
}

/** Checks a client's deadline and value limit at the API boundary; returns them with defaults. */
export function clientLimits(o: { timeoutMs?: number; maxValueBytes?: number }): {
  timeoutMs: number;
  maxValue: number;
} {
  const timeoutMs = o.timeoutMs ?? 300_000;
  wireTimeout(timeoutMs);
  const maxValue = o.maxValueBytes ?? 64 * 1024 * 1024;
  if (!Number.isInteger(maxValue) || maxValue < 1 || maxValue > MAX_VALUE_LIMIT)
    throw bad(`maxValueBytes ${maxValue} is not in 1..${MAX_VALUE_LIMIT}`);
  return { timeoutMs, maxValue };
}
