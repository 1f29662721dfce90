// A node: the ranks that share one WebAssembly.Memory. Whoever starts the node's ranks (the
// launcher, a test, a page) calls createNode once and hands the result to every rank.
import { freshBuffer } from './fresh-buffer.js';
import { WebcclError, fail } from './errors.js';
import { ABORT_BY_LAUNCHER, C, LAYOUT_VERSION, MAX_RANKS, N, NODE_BASE, NODE_MAGIC_VALUE, commBlockBytes } from './shm-map.js';
import { writeReasonText } from './reason-text.js';
import { createSharedMemory, loadWasm } from './wasm.js';
import { envNumber } from './config.js';
import { type OptionSpec, anything, boolean, checkOptions, integer, showValue, string } from './options.js';
import { type MasterOptions, type PageJob, pageJob } from '../bootstrap/page-job.js';
import { startProgressThread } from '../progress/start.js';

/** What a rank needs to join its node; structured-clonable (postMessage / workerData). */
export interface NodeHandle {
  memory: WebAssembly.Memory;
  nranks: number;
  world: number;
  slotBytes: number;
  /** Random id of this node's memory: ranks that report the same key share memory. */
  key: string;
  /** The job across nodes this node's ranks join (createNode's `master`): its ranks dial, as a page's must. */
  job?: PageJob;
}

export interface NodeOptions extends MasterOptions {
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

export const DEFAULT_SLOT_BYTES = 256 * 1024;

export const NODE_OPTIONS = {
  nranks: integer(1, MAX_RANKS), slotBytes: anything, progress: boolean,
  master: string, firstRank: integer(0, 0x7fffffff), worldSize: integer(1, 0x7fffffff), token: string, jobId: string,
} as const satisfies OptionSpec;

export function createNode(options: NodeOptions): NodeHandle {
  const o = checkOptions<Partial<NodeOptions>>('createNode', options, NODE_OPTIONS, '{ nranks: 4 }');
  const nranks = o.nranks ?? fail('INVALID_ARGUMENT', `createNode: option nranks is required (an integer in 1..${MAX_RANKS})`, { option: 'nranks' });
  const job = nodeJob(o, nranks);
  const slotBytes = o.slotBytes ?? envNumber('WEBCCL_BUFFSIZE') ?? DEFAULT_SLOT_BYTES;
  if (!Number.isInteger(slotBytes) || slotBytes < 4096 || slotBytes % 64 !== 0 || slotBytes > 64 << 20) {
    fail('INVALID_ARGUMENT', `createNode: slot size must be a multiple of 64 bytes in 4 KiB..64 MiB, got ${showValue(slotBytes)}`, { option: 'slotBytes', value: slotBytes });
  }
  const world = NODE_BASE + N.HEADER_BYTES;
  const heapStart = world + commBlockBytes(nranks, slotBytes);
  const memory = createSharedMemory(heapStart + (1 << 20), nranks);
  const { exports } = loadWasm(memory);
  if (exports.heapBase() > NODE_BASE) throw new WebcclError('INTERNAL', `wasm static data (${exports.heapBase()} B) overlaps the node header`);
  const i32 = new Int32Array(freshBuffer(memory));
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
    if (stray) fail('INVALID_ARGUMENT', `createNode: option ${stray} names a job across nodes, which needs option master (ws://HOST:P of webccl serve)`, { option: stray });
    return undefined;
  }
  if (o.firstRank === undefined) fail('INVALID_ARGUMENT', 'createNode: option firstRank (the world rank of this node\'s rank 0) is required with master', { option: 'firstRank' });
  return pageJob('createNode', o, o.firstRank, nranks);
}

/** Refuses what is not a handle createNode made (a structured clone of one is fine). */
export function checkNodeHandle(where: string, node: unknown): asserts node is NodeHandle {
  const h = node as Partial<NodeHandle> | null;
  if (typeof h !== 'object' || h === null || !(h.memory instanceof WebAssembly.Memory) || !Number.isInteger(h.nranks) || !Number.isInteger(h.world)) {
    fail('INVALID_ARGUMENT', `${where}: node must be the handle createNode({ nranks }) returned, got ${showValue(node)}`);
  }
}

/**
 * Marks the whole node aborted (a rank died) and wakes every rank sleeping on a flag, so that
 * each fails its current op instead of waiting for the dead one. `reason` (e.g. the rank's
 * error) reaches them in their error's message and details. The first abort wins; later ones
 * only wake the sleepers again.
 */
export function abortNode(handle: NodeHandle, deadRank: number | null, code: number, reason = ''): void {
  const i32 = new Int32Array(freshBuffer(handle.memory));
  if (Atomics.compareExchange(i32, (NODE_BASE + N.ABORT_CLAIM) >> 2, 0, 1) === 0) {
    Atomics.store(i32, (NODE_BASE + N.ABORT_CODE) >> 2, code);
    writeReasonText(handle.memory, NODE_BASE + N.REASON, reason);
    Atomics.store(i32, (NODE_BASE + N.ABORT) >> 2, deadRank === null ? ABORT_BY_LAUNCHER : deadRank + 1);
  }
  ring(handle, i32);
}

/** The node header's LEFT word of a rank: its script ended, or it died (under a fault-tolerant launch). */
export const LEFT_ENDED = 1;
export const LEFT_DIED = 2;

/**
 * Records that `rank`'s thread has ended (its script returned, or called process.exit(0)): a
 * peer waiting for it in an op it never joined fails at once, naming it, instead of waiting
 * out its deadline. Ops it had finished are not touched: its peers complete them.
 */
export function leaveNode(handle: NodeHandle, rank: number, how: 'ended' | 'died' = 'ended'): void {
  if (!Number.isInteger(rank) || rank < 0 || rank >= handle.nranks) {
    fail('INVALID_ARGUMENT', `leaveNode: rank ${rank} is outside the node's 0..${handle.nranks - 1} range`);
  }
  if (how !== 'ended' && how !== 'died') fail('INVALID_ARGUMENT', `leaveNode: how must be 'ended' or 'died', got ${showValue(how)}`);
  const i32 = new Int32Array(freshBuffer(handle.memory));
  Atomics.store(i32, (NODE_BASE + N.LEFT + 4 * rank) >> 2, how === 'died' ? LEFT_DIED : LEFT_ENDED);
  ring(handle, i32);
}

/** Wakes every rank sleeping on the world communicator's doorbell, so it looks again. */
function ring(handle: NodeHandle, i32: Int32Array): void {
  Atomics.add(i32, (handle.world + C.DOORBELL) >> 2, 1);
  Atomics.notify(i32, (handle.world + C.DOORBELL) >> 2);
}
