// The postboxes the node's progress thread serves: it finds those ranks opened since its last
// look, and keeps for each (one communicator rank) the same ShmEngine the rank keeps for itself,
// on the same descriptor and over the same wasm module, so an op runs the same steps either way.

import { freshBuffer, freshI32 } from '../core/fresh-buffer.js';
import type { NodeHeap } from '../core/heap.js';
import { C, N, NODE_BASE } from '../core/shm-map.js';
import { loadWasm, type WasmCore } from '../core/wasm.js';
import { defaultSpinUs, pollsPerMicrosecond, type RankContext, setSpin } from '../engine/context.js';
import type { Work } from '../engine/work.js';
import { L, lookForPostboxes } from '../progress/postboxes.js';
import { ShmEngine } from '../shm/engine.js';

export interface Hosted {
  addr: number;
  rank: number;
  comm: number;
  size: number;
  engine: ShmEngine;
  /** Ops taken from the postbox and not yet ended, in order. */
  works: Work[];
  taken: number;
  ended: number;
  /** The node rank of this postbox's rank (its LEFT word). */
  local: number;
  /** Its L.HOLDS at the last look. */
  holds: number;
  /** The hold it saw last (its L.HOLD tag), and when it first saw it (this thread's ms). */
  holdTag: number;
  holdSeenAt: number;
}

/** What the progress thread hosts postboxes with: the node's memory and heap, and how many cores it has. */
export class PostboxHosting {
  private readonly cores = new Map<boolean, { core: WasmCore; pollsPerUs: number }>();
  private readonly nranks: number;

  constructor(
    private readonly memory: WebAssembly.Memory,
    private readonly heap: NodeHeap,
    private readonly nCores: number,
  ) {
    this.nranks = freshI32(memory)[(NODE_BASE + N.NRANKS) >> 2];
  }

  /** Takes on the postboxes ranks have opened since the last look into `postboxes`. */
  attach(loopView: Int32Array, postboxes: Map<number, Hosted>): void {
    // Another owner: a rank's network progress thread's postbox (net-postbox.ts), not ours.
    lookForPostboxes(
      this.memory,
      loopView,
      0,
      (addr) => postboxes.has(addr),
      (i32, addr) => postboxes.set(addr, this.hosted(i32, addr)),
    );
  }

  private hosted(i32: Int32Array, addr: number): Hosted {
    const at = (f: number) => i32[(addr + f) >> 2];
    const comm = at(L.COMM);
    const size = at(L.SIZE);
    const rank = at(L.RANK);
    const localOf = Array.from(new Uint8Array(freshBuffer(this.memory), addr + L.LOCAL_OF, size));
    const { core, pollsPerUs } = this.core(at(L.SIMD) === 1);
    const ctx: RankContext = {
      core,
      heap: this.heap,
      comm,
      rank,
      size,
      localOf,
      slotBytes: i32[(comm + C.SLOT_BYTES) >> 2],
      spinPolls: 0,
      tryPolls: 0,
      spinUs: 0,
      pollsPerUs,
      spinGiven: false,
      canBlock: true,
      cores: this.nCores,
      sharedBuffers: new Set([freshBuffer(this.memory)]),
    };
    // It never blocks inside one postbox: each wait spins only its short try before the next postbox.
    setSpin(ctx, defaultSpinUs(size, this.nCores));
    const counters = { ops: 0, bytes: 0, failed: 0, busyMs: 0, waitMs: 0, moveMs: 0 };
    return {
      addr,
      rank,
      comm,
      size,
      engine: new ShmEngine(ctx, counters, undefined, 0, false),
      works: [],
      taken: 0,
      ended: 0,
      local: localOf[rank],
      holds: 0,
      holdTag: 0,
      holdSeenAt: 0,
    };
  }

  private core(simd: boolean): { core: WasmCore; pollsPerUs: number } {
    let c = this.cores.get(simd);
    if (!c) {
      const core = loadWasm(this.memory, simd);
      c = {
        core,
        pollsPerUs: pollsPerMicrosecond(core, freshI32(this.memory)[(NODE_BASE + N.WORLD) >> 2], this.nranks, 0),
      };
      this.cores.set(simd, c);
    }
    return c;
  }
}
