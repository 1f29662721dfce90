// createNode: a node's memory (the header, the world communicator's block, the heap) and, where
// the platform can run one, its progress thread. Whoever starts the node's ranks calls it once
// and hands the handle (core/node.ts) to every rank.

import { type MasterOptions, pageJob } from '../bootstrap/page-job.js';
import { envNumber } from '../core/config.js';
import { fail, WebcclError } from '../core/errors.js';
import { freshI32 } from '../core/fresh-buffer.js';
import { DEFAULT_SLOT_BYTES, type NodeHandle, type PageJob } from '../core/node.js';
import { anything, boolean, checkOptions, integer, type OptionSpec, showValue, string } from '../core/options.js';
import { C, commBlockBytes, LAYOUT_VERSION, MAX_RANKS, N, NODE_BASE, NODE_MAGIC_VALUE } from '../core/shm-map.js';
import { createSharedMemory, loadWasm } from '../core/wasm.js';
import { startProgressThread } from './start.js';

/**
 * The options of createNode: `nranks` (required), `slotBytes`, `progress`; and for a node whose
 * ranks join a job that `webccl serve` hosts, `master` with `firstRank`, `worldSize`, `token`, `jobId`.
 */
export interface NodeOptions extends MasterOptions {
  /** The node's ranks, 1..64. */
  nranks: number;
  /** With `master`: the world rank of this node's rank 0 (its ranks are world ranks firstRank.. in order). */
  firstRank?: number;
  /** Bytes of one staging slot (option > WEBCCL_BUFFSIZE > 256 KiB); chunks are at most this big. */
  slotBytes?: number;
  /**
   * Start the node's progress thread, which runs ops while their ranks compute (default true
   * where the platform can: Node; a node of one rank needs none).
   */
  progress?: boolean;
}

export const NODE_OPTIONS = {
  nranks: integer(1, MAX_RANKS),
  slotBytes: anything,
  progress: boolean,
  master: string,
  firstRank: integer(0, 0x7fffffff),
  worldSize: integer(1, 0x7fffffff),
  token: string,
  jobId: string,
} as const satisfies OptionSpec;

/**
 * Makes a node: the shared memory its ranks (threads of this process, a page's workers) run
 * collectives in, and its progress thread (unless `progress` is false or `nranks` is 1). Call it
 * once, then give the handle to each rank's thread (it survives postMessage and workerData), where
 * joinNode or initCommGroup({ node, rank }) joins it; launch() and `webccl run` do all this for you.
 * A rank thread that ends calls leaveNode(node, rank) (abortNode when it fails).
 *
 * @throws WebcclError `INVALID_ARGUMENT` for a bad option (`nranks` missing or outside 1..64,
 *   `slotBytes` not a multiple of 64 in 4 KiB..64 MiB, `firstRank` missing with `master`);
 *   `UNSUPPORTED` for `nranks` > 1 on a page that is not cross-origin isolated.
 * @example
 * ```js
 * // Worker: node:worker_threads' in Node.js (a page's Worker takes the handle the same way)
 * const node = createNode({ nranks: 4 });
 * for (let rank = 0; rank < 4; rank++) new Worker('./rank.mjs', { workerData: { node, rank } });
 * // rank.mjs: const comm = await initCommGroup({ node: workerData.node, rank: workerData.rank });
 * ```
 */
export function createNode(options: NodeOptions): NodeHandle {
  const o = checkOptions<Partial<NodeOptions>>('createNode', options, NODE_OPTIONS, '{ nranks: 4 }');
  const nranks =
    o.nranks ??
    fail('INVALID_ARGUMENT', `createNode: option nranks is required (an integer in 1..${MAX_RANKS})`, {
      option: 'nranks',
    });
  const job = nodeJob(o, nranks);
  const slotBytes = o.slotBytes ?? envNumber('WEBCCL_BUFFSIZE') ?? DEFAULT_SLOT_BYTES;
  if (!Number.isInteger(slotBytes) || slotBytes < 4096 || slotBytes % 64 !== 0 || slotBytes > 64 << 20) {
    fail(
      'INVALID_ARGUMENT',
      `createNode: slot size must be a multiple of 64 bytes in 4 KiB..64 MiB, got ${showValue(slotBytes)}`,
      { option: 'slotBytes', value: slotBytes },
    );
  }
  const world = NODE_BASE + N.HEADER_BYTES;
  const heapStart = world + commBlockBytes(nranks, slotBytes);
  const memory = createSharedMemory(heapStart + (1 << 20), nranks);
  const { exports } = loadWasm(memory);
  if (exports.heapBase() > NODE_BASE)
    throw new WebcclError('INTERNAL', `wasm static data (${exports.heapBase()} B) overlaps the node header`);
  const i32 = freshI32(memory);
  i32[(NODE_BASE + N.MAGIC) >> 2] = NODE_MAGIC_VALUE;
  i32[(NODE_BASE + N.VERSION) >> 2] = LAYOUT_VERSION;
  i32[(NODE_BASE + N.NRANKS) >> 2] = nranks;
  i32[(NODE_BASE + N.HEAP_START) >> 2] = heapStart;
  i32[(NODE_BASE + N.HEAP_TOP) >> 2] = heapStart;
  i32[(NODE_BASE + N.WORLD) >> 2] = world;
  i32[(world + C.NRANKS) >> 2] = nranks;
  i32[(world + C.SLOT_BYTES) >> 2] = slotBytes;
  i32[(world + C.NODE) >> 2] = NODE_BASE;
  const id = crypto.getRandomValues(new Uint8Array(8));
  const key = Array.from(id, (b) => b.toString(16).padStart(2, '0')).join('');
  const handle: NodeHandle = { memory, nranks, world, slotBytes, key, ...(job && { job }) };
  if (nranks > 1 && o.progress !== false) startProgressThread(handle);
  return handle;
}

/** The job `master` names, or undefined; the job's other options without master are refused. */
function nodeJob(o: Partial<NodeOptions>, nranks: number): PageJob | undefined {
  if (o.master === undefined) {
    const stray = (['firstRank', 'worldSize', 'token', 'jobId'] as const).find((k) => o[k] !== undefined);
    if (stray)
      fail(
        'INVALID_ARGUMENT',
        `createNode: option ${stray} names a job across nodes, which needs option master (ws://HOST:P of webccl serve)`,
        { option: stray },
      );
    return undefined;
  }
  if (o.firstRank === undefined)
    fail(
      'INVALID_ARGUMENT',
      "createNode: option firstRank (the world rank of this node's rank 0) is required with master",
      { option: 'firstRank' },
    );
  return pageJob('createNode', o, o.firstRank, nranks);
}
