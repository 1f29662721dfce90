// The network progress thread's loop (NCCL's proxy thread, Gloo's I/O thread): in a job whose
// nodes hold one rank each, a worker beside the rank owns its own connections to every peer's
// worker and runs the rank's collectives across nodes on them, so that an op goes on while the
// rank computes without calling webccl. The rank posts ops through postboxes in the node memory
// (postboxes.ts, net-postbox.ts; no message per op); for each postbox this thread keeps the NetEngine the
// rank would keep for itself, on the same node memory, so an op runs the same schedule either
// way. Unlike the shared-memory progress thread (hosts/shm-host.ts) it never blocks: sockets need its
// event loop, so it sleeps on the node's progress bell with Atomics.waitAsync.

import { Communicator } from '../api/communicator.js';
import { DTYPE_SIZE } from '../core/dtypes.js';
import { freshBuffer, freshI32 } from '../core/fresh-buffer.js';
import { NodeHeap } from '../core/heap.js';
import { log } from '../core/log.js';
import { C, N, NODE_BASE } from '../core/shm-map.js';
import { OpTrace, TRACING, traceFlush, traceTrack } from '../core/trace.js';
import { loadWasm } from '../core/wasm.js';
import type { RankContext } from '../engine/context.js';
import type { JobStore } from '../engine/job.js';
import type { Work } from '../engine/work.js';
import { NetEngine } from '../net/engine.js';
import { hubBellAt, hubState } from '../progress/net-hub.js';
import type { NetPostboxConfig } from '../progress/net-postbox.js';
import { abortAsked, readNetPostboxConfig } from '../progress/net-postbox.js';
import {
  AWAITED_SHOWN,
  claimSlot,
  L,
  lookForPostboxes,
  POSTBOX_BYTES,
  POSTBOX_CLOSING,
  POSTBOX_DETACHED,
  PROGRESS_STOPPING,
  SLOT_TAKEN,
  slotAt,
} from '../progress/postboxes.js';
import { readPosted, type SlotViews, viewsReaching, writeOutcome } from '../progress/slot-codec.js';
import { groupContext, releaseCommBlock } from '../shm/block.js';
import { ShmEngine } from '../shm/engine.js';
import type { TransportSpaces } from '../transport/spaces.js';
import { hostedSpec, outcomeOf, refusedWork } from './hosted-ops.js';

/** Longest sleep on the bell: how often it looks whether its rank has left. */
const IDLE_SLICE_MS = 200;

export interface NetHostInput {
  memory: WebAssembly.Memory;
  /** The thread's state block (net-hub.ts). */
  hub: number;
  /** Its rank's world rank (it serves that rank's postboxes only) and place on the node. */
  rank: number;
  localRank: number;
  /** This worker's own connections to every peer's worker, one tag space per communicator. */
  spaces: TransportSpaces;
  /** The job's store (the world's deadlines name the rank at fault through it). */
  store: JobStore;
  oneHost: boolean;
  cores: number;
  simd: boolean;
}

interface Hosted {
  addr: number;
  space: number;
  rank: number;
  size: number;
  engine: NetEngine;
  /**
   * The node phase's communicator among the node's network threads (hierarchical schedules), if the node holds several
   * members.
   */
  local: Communicator | undefined;
  /** Ops taken from the postbox and not yet ended, in order. */
  works: Work[];
  taken: number;
  ended: number;
  aborted: boolean;
}

export class NetProgressHost {
  private readonly postboxes = new Map<number, Hosted>();
  private readonly ctx: RankContext;
  private readonly track = traceTrack('network progress thread');
  private slots: SlotViews | undefined;

  constructor(private readonly i: NetHostInput) {
    const core = loadWasm(i.memory, i.simd);
    // (its node phase hands the node communicator views of the ranks' buffers, checked by them at issue)
    // A worker (in Node or a page): it may wait for the heap's lock as long as any rank's thread
    // (a holder keeps it for microseconds, but one descheduled on a loaded machine kept it over
    // the 250 ms a thread that may not block spins, and the op failed). Its ops never block
    // (canBlock below): the event loop serves their sockets.
    const heap = new NodeHeap(i.memory, { canBlock: true, runsRanksOps: true });
    this.ctx = {
      core,
      heap,
      comm: 0,
      rank: 0,
      size: 1,
      localOf: [0],
      slotBytes: 0,
      spinPolls: 0,
      tryPolls: 0,
      spinUs: 0,
      pollsPerUs: 1,
      spinGiven: false,
      canBlock: false,
      cores: i.cores,
      sharedBuffers: new Set([freshBuffer(i.memory)]),
    };
  }

  private i32(): Int32Array {
    return freshI32(this.i.memory);
  }

  /** Views that reach `h`'s postbox (made again only when the memory grew for it). */
  private views(h: Hosted): SlotViews {
    return (this.slots = viewsReaching(this.i.memory, this.slots, h.addr + POSTBOX_BYTES));
  }

  /** Serves the postboxes until its rank has left (or the thread is asked to stop); then closes them. */
  async run(): Promise<void> {
    const bellAt = hubBellAt(this.i.hub);
    for (;;) {
      const i32 = this.i32();
      const bell = Atomics.load(i32, bellAt);
      this.attach(i32);
      for (const h of [...this.postboxes.values()]) this.serve(h);
      if (hubState(this.i.memory, this.i.hub) === PROGRESS_STOPPING) break;
      if (this.postboxes.size === 0 && Atomics.load(i32, (NODE_BASE + N.LEFT + 4 * this.i.localRank) >> 2) !== 0) break;
      const r = Atomics.waitAsync(i32, bellAt, bell, IDLE_SLICE_MS);
      if (r.async) await r.value;
    }
    for (const h of this.postboxes.values()) this.detach(h);
    traceFlush();
  }

  /** Takes on the postboxes its rank has opened since the last look (`i32`: the loop's view, maybe older than they). */
  private attach(i32: Int32Array): void {
    // Its rank's network postboxes only: the node's other postboxes are its shared-memory progress
    // thread's or another rank's network thread's (which may free theirs at any time).
    lookForPostboxes(
      this.i.memory,
      i32,
      this.i.rank + 1,
      (addr) => this.postboxes.has(addr),
      (_, addr) => this.postboxes.set(addr, this.hosted(addr)),
    );
  }

  private hosted(addr: number): Hosted {
    const c = readNetPostboxConfig(this.i.memory, addr);
    const transport = this.i.spaces.open(c.space, c.members, c.rank);
    const counters = { ops: 0, bytes: 0, failed: 0, busyMs: 0, waitMs: 0, moveMs: 0 };
    const world = {
      rank: c.rank,
      size: c.members.length,
      transport,
      nodeOf: c.nodeOf,
      oneHost: this.i.oneHost,
      ...(c.space === 0 && { store: this.i.store }),
    };
    const local = c.node && this.nodeCommunicator(c.node, c.timeoutMs);
    const engine = new NetEngine({ ctx: this.ctx, world, local, counters, algo: c.commAlgo, timeoutMs: c.timeoutMs });
    // What the rank's flight record shows of a running op: that it started, and whom it awaits.
    engine.onProgress = (seq, awaited) => {
      const i32 = this.i32();
      const ranks = awaited();
      for (let k = 0; k < Math.min(ranks.length, AWAITED_SHOWN); k++)
        i32[(addr + L.AWAITED_LIST + 4 * k) >> 2] = ranks[k];
      Atomics.store(i32, (addr + L.AWAITED) >> 2, ranks.length);
      Atomics.store(i32, (addr + L.STARTED) >> 2, seq + 1);
    };
    return {
      addr,
      space: c.space,
      rank: c.rank,
      size: c.members.length,
      engine,
      local,
      works: [],
      taken: 0,
      ended: 0,
      aborted: false,
    };
  }

  /**
   * The communicator over `node.block` in which this node's network threads meet for the node
   * phase of a hierarchical op, run here. Its waits never block this thread: a rank posts its
   * ops one by one, so the thread cannot know that an op of another communicator, not yet
   * posted, is what a node mate's thread waits for (blocking deadlocked node mates that issue
   * two communicators' ops in opposite orders, test/groups/launch.test.ts).
   */
  private nodeCommunicator(node: NonNullable<NetPostboxConfig['node']>, timeoutMs: number): Communicator {
    const ctx = groupContext(
      { ...this.ctx, slotBytes: this.i32()[(node.block + C.SLOT_BYTES) >> 2], worldRank: this.i.rank },
      node.block,
      node.rank,
      node.localOf,
    );
    const placement = {
      worldRanks: node.localOf,
      nodeOf: node.localOf.map(() => 0),
      localOf: node.localOf,
      space: 0,
      group: true,
      id: 'network threads',
      release: () => releaseCommBlock(ctx, node.block, node.localOf.length),
    };
    return new Communicator(
      ctx,
      { timeoutMs },
      {
        rank: node.rank,
        size: node.localOf.length,
        placement,
        track: this.track,
        engine: (counters, algo, t) => new ShmEngine(ctx, counters, algo, t, false),
      },
    );
  }

  /** Takes the postbox's new ops (and an abort its rank asked for); lets go of a closed postbox. */
  private serve(h: Hosted): void {
    const i32 = this.i32();
    if (Atomics.load(i32, (h.addr + L.STATE) >> 2) === POSTBOX_CLOSING) {
      this.detach(h);
      return;
    }
    const reason = h.aborted ? undefined : abortAsked(this.i.memory, h.addr);
    if (reason !== undefined) {
      h.aborted = true;
      h.engine.abort(reason);
      // Told: the ABORT frames are in the sockets (the rank may end its process as soon as it hears).
      Atomics.store(i32, (h.addr + L.ABORT_SENT) >> 2, 1);
      Atomics.notify(i32, (h.addr + L.ABORT_SENT) >> 2);
    }
    const posted = Atomics.load(i32, (h.addr + L.POSTED) >> 2);
    for (; h.taken < posted; h.taken++) {
      const w = this.take(h, slotAt(h.addr, h.taken));
      h.works.push(w);
      if (w.settled) this.endSettled(h);
      else void h.engine.progressAsync(w).then(() => this.endSettled(h));
    }
  }

  private detach(h: Hosted): void {
    h.engine.close();
    if (h.local && h.local.stats().pending === 0) h.local.destroy(); // (else left: a node mate may still read it)
    this.postboxes.delete(h.addr);
    const i32 = this.i32();
    Atomics.store(i32, (h.addr + L.STATE) >> 2, POSTBOX_DETACHED);
    Atomics.notify(i32, (h.addr + L.STATE) >> 2);
  }

  /** The op in `slot`, submitted to the postbox's engine (or failed at once, as the engine refuses it). */
  private take(h: Hosted, slot: number): Work {
    const posted = readPosted(this.i.memory, this.views(h), slot);
    const p = posted.value;
    claimSlot(this.i.memory, slot, SLOT_TAKEN);
    const trace = TRACING
      ? new OpTrace(this.track, {
          collective: p.name,
          bytes: p.count * DTYPE_SIZE[p.dtype],
          dtype: p.dtype,
          rank: h.rank,
          communicator: `space ${h.space}`,
          ranks: h.size,
        })
      : undefined;
    try {
      return h.engine.submit(hostedSpec(this.i.memory, posted, trace));
    } catch (e) {
      return refusedWork(p.name, p.seq, e);
    }
  }

  /** Hands back, in order, the postbox's ops that have ended. */
  private endSettled(h: Hosted): void {
    if (!this.postboxes.has(h.addr)) return; // let go of (its rank closed the communicator)
    const i32 = this.i32();
    while (h.works.length && h.works[0].settled) {
      const w = h.works.shift()!;
      if (w.failure) log('INFO', `network progress thread: ${w.name} #${w.seq} failed: ${w.failure.message}`);
      writeOutcome(this.i.memory, this.views(h), slotAt(h.addr, h.ended), outcomeOf(w));
      h.ended++;
      Atomics.store(i32, (h.addr + L.DONE) >> 2, h.ended);
      Atomics.notify(i32, (h.addr + L.DONE) >> 2);
    }
  }
}
