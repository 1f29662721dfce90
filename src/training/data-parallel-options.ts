// The options of createDataParallel: their public types, the check each value passes at the API
// boundary, and the settings they come to once the defaults are filled in. The data-parallel
// object reads only the settings, so every default is stated here once.

import { fail } from '../core/errors.js';
import { boolean, type Check, checkOptions, integer, type OptionSpec, timeoutMs } from '../core/options.js';

/** The dtype gradients cross the wire in: f32 (exact), or bf16 / f16 (half the bytes, rounded). */
export type WireDtype = 'f32' | 'bf16' | 'f16';

/** Options of `createDataParallel`. */
export interface DataParallelOptions {
  /**
   * Bytes of each bucket's buffer on the wire (counted in `wireDtype`); default 25 MiB, torch's
   * default bucket size. A parameter larger than this gets a bucket of its own.
   */
  bucketBytes?: number;
  /** Divide the reduced gradients by the number of ranks (default true): the mean over ranks. */
  average?: boolean;
  /** The dtype the buckets cross the wire in (default 'f32'); see docs/training.md for the error of halves. */
  wireDtype?: WireDtype;
  /** The rank whose parameters `broadcastParameters()` sends (default 0). */
  root?: number;
  /** Deadline of every collective issued, ms (default: the communicator's). */
  timeoutMs?: number;
}

/** The options once checked, defaults filled in. */
export interface DataParallelSettings {
  readonly bucketBytes: number;
  readonly average: boolean;
  readonly wire: WireDtype;
  readonly root: number;
  /** Undefined: the communicator's own deadline. */
  readonly timeoutMs: number | undefined;
}

const MIB = 1 << 20;
const wireDtype: Check = (v) => (v === 'f32' || v === 'bf16' || v === 'f16' ? undefined : "'f32', 'bf16' or 'f16'");
const OPTIONS = {
  bucketBytes: integer(1, 0x7fffffff),
  average: boolean,
  wireDtype,
  root: integer(0, 0x7fffffff),
  timeoutMs,
} as const satisfies OptionSpec;

/** Checks `options` of a call named `where` over a communicator of `size` ranks; fills in the defaults. */
export function dataParallelSettings(
  where: string,
  size: number,
  options: DataParallelOptions | undefined,
): DataParallelSettings {
  const o = checkOptions<DataParallelOptions>(where, options, OPTIONS, "{ bucketBytes: 1 << 20, wireDtype: 'bf16' }");
  if (o.root !== undefined && o.root >= size)
    fail('INVALID_ARGUMENT', `${where}: root ${o.root} is outside the communicator's 0..${size - 1} range`, {
      option: 'root',
      value: o.root,
    });
  return {
    bucketBytes: o.bucketBytes ?? 25 * MIB,
    average: o.average ?? true,
    wire: o.wireDtype ?? 'f32',
    root: o.root ?? 0,
    timeoutMs: o.timeoutMs,
  };
}
