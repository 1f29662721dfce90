// Option bags at the API boundary. Every public function that takes `{ ... }` options checks
// them here: an object (not a string, an array or null), only the keys the function knows (a
// misspelt key would otherwise be ignored silently, and the call would run with a default), and
// each value of the type and range it needs. `undefined` counts as absent, so spreading a
// partly filled options object works. The messages show values with their type, name the key,
// list the known ones and suggest the closest.
import { fail } from './errors.js';

/** Checks one value (never undefined); returns a phrase of what is expected when it is wrong. */
export type Check = (v: unknown) => string | undefined;

/** A function's options: each known key and the check of its value. */
export type OptionSpec = Readonly<Record<string, Check>>;

/** A value as a message shows it: its JSON text, and its type when the text alone would hide it. */
export function showValue(v: unknown): string {
  if (typeof v === 'number') return Number.isNaN(v) ? 'NaN (a number)' : String(v);
  if (typeof v === 'bigint') return `${v}n (a bigint)`;
  if (typeof v === 'string') return `${JSON.stringify(v)} (a string)`;
  if (v === null || v === undefined || typeof v === 'boolean') return String(v);
  if (typeof v === 'function') return 'a function';
  if (typeof v === 'symbol') return `${String(v)} (a symbol)`;
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (ArrayBuffer.isView(v)) return `a ${v.constructor.name}`;
  const keys = Object.keys(v as object);
  return keys.length ? `an object with keys {${keys.join(', ')}}` : 'an empty object';
}

// ---------------------------------------------------------------- value checks

export const integer =
  (min: number, max: number): Check =>
  (v) =>
    Number.isInteger(v) && (v as number) >= min && (v as number) <= max ? undefined : `an integer in ${min}..${max}`;

/** A finite number in min..max (fractions allowed). */
export const number =
  (min: number, max: number): Check =>
  (v) =>
    typeof v === 'number' && Number.isFinite(v) && v >= min && v <= max ? undefined : `a number in ${min}..${max}`;

/** The largest delay setTimeout honours (beyond it, Node fires after 1 ms). */
export const MAX_TIMEOUT_MS = 0x7fffffff;
/** A deadline in milliseconds: positive and finite (every wait has one). */
export const timeoutMs: Check = (v) =>
  typeof v === 'number' && Number.isFinite(v) && v > 0 && v <= MAX_TIMEOUT_MS
    ? undefined
    : `a number of milliseconds in 1..${MAX_TIMEOUT_MS}`;

export const string: Check = (v) => (typeof v === 'string' ? undefined : 'a string');
export const boolean: Check = (v) => (typeof v === 'boolean' ? undefined : 'true or false');
export const func: Check = (v) => (typeof v === 'function' ? undefined : 'a function');
export const object: Check = (v) =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? undefined : 'an object';
export const stringArray: Check = (v) =>
  Array.isArray(v) && v.every((s) => typeof s === 'string') ? undefined : 'an array of strings';
/** Checked further by the callee (a buffer, a node handle): any value but undefined. */
export const anything: Check = () => undefined;

// ---------------------------------------------------------------- the bag

/**
 * Checks `o` against `spec` and returns it (`{}` when absent). `where` names the function in
 * messages; `example` is a valid options object shown when `o` is not an object at all;
 * `elsewhere` are keys of sibling functions, refused as not applying here rather than unknown.
 */
/** What an absent options bag reads as: one frozen object, not a new one per call (per op). */
export const NO_OPTIONS = Object.freeze({});

export function checkOptions<T extends object>(
  where: string,
  o: unknown,
  spec: OptionSpec,
  example: string,
  elsewhere: readonly string[] = [],
): T {
  if (o === undefined) return NO_OPTIONS as T;
  if (typeof o !== 'object' || o === null || Array.isArray(o) || ArrayBuffer.isView(o)) {
    fail('INVALID_ARGUMENT', `${where}: options must be an object like ${example}, got ${showValue(o)}`, { value: o });
  }
  for (const key of Object.keys(o)) {
    if (!Object.hasOwn(spec, key)) {
      const known = Object.keys(spec); // (made for a refusal only, not on every call)
      if (elsewhere.includes(key)) {
        if ((o as Record<string, unknown>)[key] === undefined) continue; // absent, as for a known key
        fail(
          'INVALID_ARGUMENT',
          `${where}: option ${JSON.stringify(key)} does not apply to ${where}; it takes ${known.join(', ')}`,
          { option: key, known },
        );
      }
      const near = closest(key, known);
      fail(
        'INVALID_ARGUMENT',
        `${where}: unknown option ${JSON.stringify(key)}${near ? ` (did you mean ${JSON.stringify(near)}?)` : ''}; known: ${known.join(', ')}`,
        { option: key, known, ...(near && { suggestion: near }) },
      );
    }
    const v = (o as Record<string, unknown>)[key];
    if (v === undefined) continue;
    const expected = spec[key](v);
    if (expected)
      fail('INVALID_ARGUMENT', `${where}: option ${key} must be ${expected}, got ${showValue(v)}`, {
        option: key,
        value: v,
        expected,
      });
  }
  return o as T;
}

/** A known name that `key` probably meant: same letters in another case, or a typo or two away. */
export function closest(key: string, known: readonly string[]): string | undefined {
  const lower = key.toLowerCase();
  const sameCase = known.find((k) => k.toLowerCase() === lower);
  if (sameCase) return sameCase;
  let best: string | undefined;
  let bestDist = Math.max(1, Math.floor(key.length / 3)) + 1;
  for (const k of known) {
    const d = editDistance(lower, k.toLowerCase());
    if (d < bestDist) [best, bestDist] = [k, d];
  }
  return best;
}

/** Levenshtein distance (insertions, deletions, substitutions), one row at a time. */
function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = row;
  }
  return prev[b.length];
}
