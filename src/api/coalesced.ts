// Coalesced collectives (torch's all_reduce_coalesced, Horovod's grouped allreduce): a list of
// arrays of one dtype runs as the fewest ops. The arrays are copied end to end into buckets of
// the node memory (comm.alloc(), used in place by the engines), one allReduce or broadcast per
// bucket is issued at once, and the results are copied back when every bucket has ended
// (coalesced-work.ts). The ops are element-wise, so an array may straddle two buckets.
//
// Every check is made before a bucket is allocated or an op issued: a refused call takes no
// place in the communicator's op sequence, on whichever ranks refuse it.

import { DTYPE_SIZE, type Dtype, type DtypeName, parseOp } from '../core/dtypes.js';
import { fail, type WebcclError } from '../core/errors.js';
import { showValue } from '../core/options.js';
import type { Buf, BufferArg, TypedArray } from '../engine/buffers.js';
import { inGroup, type Placement } from '../engine/placement.js';
import type { Work } from '../engine/work.js';
import { rootRank } from './arguments.js';
import type { CommBuffers } from './call-buffers.js';
import { CoalescedWork, type Piece } from './coalesced-work.js';
import type { BuffersInFlight } from './in-flight.js';
import {
  type AllReduceCoalescedOptions,
  type AllReduceOptions,
  type BroadcastCoalescedOptions,
  type BroadcastOptions,
  coalescedOptions,
} from './options.js';

/**
 * The most bytes one bucket holds (64 MiB): a list up to it runs as one op; a longer one as
 * several, so that a huge list never needs one block of node memory as large as itself.
 */
export const COALESCED_BUCKET_BYTES = 64 * 1024 * 1024;

/**
 * An option key that sets the bucket size in bytes (tests cross bucket boundaries with small
 * lists). A registered symbol: rank scripts reach it without an export, and no user types it.
 */
export const BUCKET_BYTES_OPTION: unique symbol = Symbol.for('webccl.coalescedBucketBytes') as never;

/** What a coalesced call uses of its communicator's public face. */
export interface CoalescingComm {
  readonly rank: number;
  readonly size: number;
  readonly placement: Placement;
  allReduce(x: BufferArg, opts?: AllReduceOptions): Work;
  broadcast(x: BufferArg, opts?: BroadcastOptions): Work;
  alloc(dtype: DtypeName, count: number): TypedArray | { data: Uint16Array; dtype: Dtype };
  free(x: BufferArg): void;
}

/** What a coalesced call needs of its communicator. */
export interface CoalescedParts {
  comm: CoalescingComm;
  /** The buffers its calls pass, checked and described (call-buffers.ts). */
  bufs: CommBuffers;
  /** The buffers its ops still hold (in-flight.ts). */
  inFlight: BuffersInFlight;
  /** Why it takes no more ops (aborted, destroyed), if so. */
  failure(): WebcclError | undefined;
}

type Name = 'allReduceCoalesced' | 'broadcastCoalesced';

/** allReduce of every array of `list` (one dtype, any lengths), in place, as one call. */
export function allReduceCoalesced(p: CoalescedParts, list: unknown, opts?: AllReduceCoalescedOptions): Work {
  const name = 'allReduceCoalesced';
  const o = coalescedOptions(name, opts);
  const limit = bucketBytes(name, opts);
  const bufs = listed(p, name, list);
  const op = parseOp(o.op, bufs[0]?.dtype ?? 'f32');
  const timeoutMs = o.timeoutMs;
  return coalesce(p, name, bufs, limit, true, true, (b) => p.comm.allReduce(b, { op, timeoutMs }));
}

/** broadcast of every array of `list` from the root, in place, as one call. */
export function broadcastCoalesced(p: CoalescedParts, list: unknown, opts?: BroadcastCoalescedOptions): Work {
  const name = 'broadcastCoalesced';
  const o = coalescedOptions(name, opts);
  const limit = bucketBytes(name, opts);
  const root = rootRank(o.root, name, p.comm.size);
  const bufs = listed(p, name, list);
  const timeoutMs = o.timeoutMs;
  // The root's arrays go in, the others' come out.
  const isRoot = p.comm.rank === root;
  return coalesce(p, name, bufs, limit, isRoot, !isRoot, (b) => p.comm.broadcast(b, { root, timeoutMs }));
}

/** The bucket size: the internal option's, else COALESCED_BUCKET_BYTES. */
function bucketBytes(name: Name, opts: unknown): number {
  const v =
    typeof opts === 'object' && opts !== null ? (opts as Record<symbol, unknown>)[BUCKET_BYTES_OPTION] : undefined;
  if (v === undefined) return COALESCED_BUCKET_BYTES;
  if (!Number.isSafeInteger(v) || (v as number) < 1)
    fail('INVALID_ARGUMENT', `${name}: the bucket size must be a positive integer of bytes, got ${showValue(v)}`, {
      option: 'bucketBytes',
      value: v,
    });
  return v as number;
}

/** The list's arrays, checked: buffers of one dtype, row-major, none in flight, no two sharing a byte. */
function listed(p: CoalescedParts, name: Name, list: unknown): Buf[] {
  if (!Array.isArray(list))
    fail(
      'INVALID_ARGUMENT',
      `${name}: expected an array of buffers (TypedArrays or { data, dtype }), got ${showValue(list)}`,
      { value: list },
    );
  const bufs: Buf[] = [];
  for (let i = 0; i < list.length; i++) {
    const b = p.bufs.of(list[i], `${name}: list[${i}]`);
    if (b.layout && b.layout.layout !== 'NCHW')
      fail(
        'INVALID_ARGUMENT',
        `${name}: list[${i}] is a ${b.layout.layout} tensor; coalesced collectives take row-major data only (convertLayout it to NCHW first)`,
        { index: i, layout: b.layout.layout },
      );
    const first = bufs[0];
    if (first && b.dtype !== first.dtype)
      fail(
        'INVALID_ARGUMENT',
        `${name}: list[${i}] is ${b.dtype} but list[0] is ${first.dtype}; the arrays of one call must share a dtype (make one call per dtype)`,
        { index: i, dtype: b.dtype, expected: first.dtype },
      );
    const busy = p.inFlight.heldBy(b);
    if (busy)
      fail(
        'BUFFER_BUSY',
        `${name}: list[${i}] is still in use by ${busy}, which has not been waited for; wait for it (or a later op) first`,
        { index: i },
      );
    bufs.push(b);
  }
  noSharedBytes(name, bufs);
  return bufs;
}

/** Two arrays of the list over the same bytes would each receive the results of both. */
function noSharedBytes(name: Name, bufs: readonly Buf[]): void {
  const byMemory = new Map<ArrayBufferLike, number[]>();
  bufs.forEach((b, i) => {
    if (b.bytes.byteLength === 0) return;
    const at = byMemory.get(b.memory);
    if (at) at.push(i);
    else byMemory.set(b.memory, [i]);
  });
  for (const idx of byMemory.values()) {
    if (idx.length < 2) continue;
    idx.sort((a, b) => bufs[a].bytes.byteOffset - bufs[b].bytes.byteOffset);
    let reach = -1; // the array reaching furthest so far
    for (const i of idx) {
      const x = bufs[i].bytes;
      if (reach >= 0 && x.byteOffset < bufs[reach].bytes.byteOffset + bufs[reach].bytes.byteLength) {
        const [a, b] = reach < i ? [reach, i] : [i, reach];
        fail('INVALID_ARGUMENT', `${name}: list[${a}] and list[${b}] share bytes; pass arrays apart`, {
          overlap: [a, b],
        });
      }
      if (reach < 0 || x.byteOffset + x.byteLength > bufs[reach].bytes.byteOffset + bufs[reach].bytes.byteLength)
        reach = i;
    }
  }
}

/** Packs the arrays into buckets, issues one op per bucket and returns the call's one Work. */
function coalesce(
  p: CoalescedParts,
  name: Name,
  bufs: Buf[],
  limit: number,
  copyIn: boolean,
  copyOut: boolean,
  issue: (bucket: BufferArg) => Work,
): Work {
  const issuedAt = performance.now();
  const broken = p.failure();
  if (broken) throw broken;
  const dtype = bufs[0]?.dtype ?? 'f32';
  const size = DTYPE_SIZE[dtype];
  const total = bufs.reduce((n, b) => n + b.count, 0);
  const perBucket = Math.max(1, Math.floor(limit / size));
  const counts = Array.from({ length: Math.ceil(total / perBucket) }, (_, k) =>
    Math.min(perBucket, total - k * perBucket),
  );
  const buckets: (TypedArray | { data: Uint16Array; dtype: Dtype })[] = [];
  const freeBuckets = () => {
    for (const b of buckets.splice(0)) {
      try {
        p.comm.free(b);
      } catch {
        // (the node was aborted while freeing: its memory goes with it)
      }
    }
  };
  try {
    for (const n of counts) buckets.push(p.comm.alloc(dtype, n));
  } catch (e) {
    freeBuckets();
    throw e;
  }
  const pieces = piecesOf(bufs, buckets.map(bytesOf));
  if (copyIn) for (const q of pieces) q.bucket.set(q.array.subarray(q.arrayAt, q.arrayAt + q.bytes), q.bucketAt);
  const works: Work[] = [];
  let refused: WebcclError | undefined;
  for (const b of buckets) {
    try {
      works.push(issue(b));
    } catch (e) {
      if (works.length === 0) {
        freeBuckets();
        throw e;
      }
      // The communicator broke between two buckets: the issued ones end (failing too), and the call with them.
      refused = e as WebcclError;
      break;
    }
  }
  const { placement, rank } = p.comm;
  const label = placement.group ? (e: WebcclError) => inGroup(e, placement, rank) : undefined;
  const call = new CoalescedWork({ name, copyOut, pieces, freeBuckets, label }, works, refused, issuedAt, bufs);
  if (works.length) p.inFlight.add(call.work, null, null, call);
  else freeBuckets();
  return call.work;
}

/** The byte ranges that move between the arrays, laid end to end, and the buckets. */
function piecesOf(bufs: readonly Buf[], buckets: readonly Uint8Array[]): Piece[] {
  const pieces: Piece[] = [];
  let k = 0;
  let bucketAt = 0;
  for (const b of bufs) {
    const array = b.bytes;
    for (let arrayAt = 0; arrayAt < array.byteLength; ) {
      if (bucketAt === buckets[k].byteLength) {
        k++;
        bucketAt = 0;
      }
      const bytes = Math.min(array.byteLength - arrayAt, buckets[k].byteLength - bucketAt);
      pieces.push({ array, arrayAt, bucket: buckets[k], bucketAt, bytes });
      arrayAt += bytes;
      bucketAt += bytes;
    }
  }
  return pieces;
}

function bytesOf(x: TypedArray | { data: Uint16Array }): Uint8Array {
  const d = ArrayBuffer.isView(x) ? x : x.data;
  return new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
}
