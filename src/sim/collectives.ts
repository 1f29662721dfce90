// One collective call on every virtual rank: what src/net/engine.ts execute() does around
// each schedule (working memory, which blocks go where), with the simulator's groups and memory.
// The schedules are the engine's own, unchanged.

import { chainBroadcast, chainReduce } from '../algorithms/chain.js';
import { directGather, directScatter } from '../algorithms/direct.js';
import { disseminationBarrier } from '../algorithms/dissemination.js';
import { doublingAllReduce } from '../algorithms/doubling.js';
import { type Group, type Mem, PIECE_BYTES, type Span } from '../algorithms/group.js';
import { hierarchicalAllReduce, type NodeLocal } from '../algorithms/hierarchical.js';
import { p2pRecv, p2pSend } from '../algorithms/p2p.js';
import { pairwiseAllToAll } from '../algorithms/pairwise.js';
import { ringAllGather, ringAllReduce, ringReduceScatter } from '../algorithms/ring.js';
import { treeAllReduce } from '../algorithms/tree.js';
import { fail } from '../core/errors.js';
import { chooseNetAllReduce, flatAlgo } from '../tuner/net-tuner.js';
import { DataMem, SIM_DTYPE_SIZE, SIM_DTYPES, SIM_OPS, type SimDtype, type SimOp, SizeMem } from './memory.js';
import { checkTopology } from './network.js';
import type { RankPart, RankScope, SimOptions, SimResult } from './types.js';
import { simulate } from './world.js';

export const SIM_COLLECTIVES = [
  'allreduce',
  'allgather',
  'reducescatter',
  'broadcast',
  'reduce',
  'alltoall',
  'gather',
  'scatter',
  'sendrecv',
  'barrier',
] as const;
export type SimCollective = (typeof SIM_COLLECTIVES)[number];

/** The schedules each collective can run, the engine's default first where it has no tuner. */
export const SIM_ALGORITHMS: Record<SimCollective, readonly string[]> = {
  allreduce: ['ring', 'doubling', 'tree', 'hierarchical'],
  allgather: ['ring'],
  reducescatter: ['ring'],
  broadcast: ['chain'],
  reduce: ['chain'],
  alltoall: ['pairwise'],
  gather: ['direct'],
  scatter: ['direct'],
  // nccl-tests' sendrecv: each rank sends to rank + 1 and receives from rank - 1, with the
  // engine's send/recv protocol (src/algorithms/p2p.ts: the data, then the receiver's answer).
  sendrecv: ['p2p'],
  barrier: ['dissemination'],
};

export interface SimCall {
  collective: SimCollective;
  /** Default: what the engine picks (the tuner for allreduce). */
  algo?: string;
  /**
   * Elements per rank, as the API counts them: allgather each rank's block, reducescatter each
   * rank's output, alltoall each block a rank sends to one peer, gather and scatter each rank's
   * block, sendrecv what each rank sends to the next.
   */
  count: number;
  dtype?: SimDtype;
  op?: SimOp;
  root?: number;
  /** The ring allreduce's piece size (default PIECE_BYTES: the simulator weighs no machine model). */
  pieceBytes?: number;
}

type Elements = Float64Array | Float32Array | Int32Array;

/** In data mode: each rank's input is written by `input`, and its result handed to `output`. */
export interface DataHooks {
  input(rank: number, into: Elements): void;
  output(rank: number, result: Elements): void;
}

/** Groups of the hierarchical schedule: node ring phases, and the ranks at one place of every node. */
const WORLD = 0;
const NODE_RS = 1;
const NODE_AG = 2;
const ACROSS = 3;

/** The schedule the call runs, checked: the engine's choice when none is named. */
export function resolveSimAlgo(o: SimOptions, call: SimCall): string {
  const algos = SIM_ALGORITHMS[call.collective];
  if (!algos)
    fail(
      'INVALID_ARGUMENT',
      `simulate: unknown collective ${JSON.stringify(call.collective)} (expected ${SIM_COLLECTIVES.join(', ')})`,
    );
  if (call.algo === undefined) {
    if (call.collective !== 'allreduce') return algos[0];
    // A simulated cluster: each node is a machine of its own.
    return chooseNetAllReduce(
      call.count * SIM_DTYPE_SIZE[call.dtype ?? 'f32'],
      o.ranks,
      { nodes: o.nodes, perNode: o.ranks / o.nodes, sharing: o.ranks / o.nodes },
      undefined,
    );
  }
  if (!algos.includes(call.algo))
    fail(
      'INVALID_ARGUMENT',
      `simulate: ${call.collective} has no algorithm ${JSON.stringify(call.algo)} (expected ${algos.join(', ')})`,
    );
  return call.algo;
}

export async function simulateCollective(o: SimOptions, call: SimCall, hooks?: DataHooks): Promise<SimResult> {
  return simulate(o, collectivePart(o, call, hooks));
}

/** What each rank runs for `call`, the call checked first. */
export function collectivePart(o: SimOptions, call: SimCall, hooks?: DataHooks): RankPart {
  checkTopology(o);
  const algo = resolveSimAlgo(o, call);
  const dtype = call.dtype ?? 'f32';
  const op = call.op ?? 'sum';
  const root = call.root ?? 0;
  if (!SIM_DTYPES.includes(dtype))
    fail('INVALID_ARGUMENT', `simulate: dtype ${JSON.stringify(dtype)} (expected ${SIM_DTYPES.join(', ')})`);
  if (!SIM_OPS.includes(op))
    fail('INVALID_ARGUMENT', `simulate: op ${JSON.stringify(op)} (expected ${SIM_OPS.join(', ')})`);
  if (!Number.isSafeInteger(call.count) || call.count < 0)
    fail('INVALID_ARGUMENT', `simulate: count must be an integer ≥ 0, got ${call.count}`);
  if (!Number.isInteger(root) || root < 0 || root >= o.ranks)
    fail('INVALID_ARGUMENT', `simulate: root ${root} is not a rank of ${o.ranks}`);
  if (call.collective === 'sendrecv' && o.ranks < 2)
    fail(
      'INVALID_ARGUMENT',
      'simulate: sendrecv needs at least 2 ranks (each sends to rank + 1, which must be another rank)',
    );
  if (o.mode === 'data' && !hooks) fail('INVALID_ARGUMENT', 'simulate: data mode needs input and output hooks');
  const data = o.mode === 'data' ? hooks : undefined;
  const pieceBytes = call.pieceBytes ?? PIECE_BYTES;
  if (!Number.isSafeInteger(pieceBytes) || pieceBytes < 1)
    fail('INVALID_ARGUMENT', `simulate: pieceBytes must be an integer ≥ 1, got ${call.pieceBytes}`);
  return (s) => rankPart(s, { ...call, algo, dtype, op, root, pieceBytes }, data);
}

async function rankPart(s: RankScope, c: Required<SimCall>, hooks: DataHooks | undefined): Promise<void> {
  const m: Mem = hooks ? new DataMem(c.dtype, c.op) : new SizeMem(SIM_DTYPE_SIZE[c.dtype]);
  const elems = (x: Span) => (m as DataMem).elements(x.addr, x.count);
  const input = (x: Span) => hooks?.input(s.rank, elems(x));
  const output = (x: Span) => hooks?.output(s.rank, elems(x));
  const world = s.group(WORLD);
  const n = c.count;
  const region = (count: number): Span => ({ addr: m.scratch(count), count });
  const blocks = (w: Span) =>
    Array.from({ length: s.size }, (_, i) => ({ addr: w.addr + i * n * m.elemBytes, count: n }));
  switch (c.collective) {
    case 'allreduce': {
      const w = region(n);
      input(w);
      await allReduce(s, c.algo, m, world, w, c.pieceBytes);
      return output(w);
    }
    case 'broadcast': {
      const w = region(n);
      if (s.rank === c.root) input(w);
      await chainBroadcast(world, m, w, c.root);
      return output(w);
    }
    case 'reduce': {
      const w = region(n);
      input(w);
      await chainReduce(world, m, w, c.root);
      if (s.rank === c.root) output(w);
      return;
    }
    case 'allgather': {
      const w = region(n * s.size);
      input(blocks(w)[s.rank]);
      await ringAllGather(world, m, blocks(w));
      return output(w);
    }
    case 'reducescatter': {
      const w = region(n * s.size);
      input(w);
      await ringReduceScatter(world, m, blocks(w));
      return output(blocks(w)[s.rank]);
    }
    case 'alltoall': {
      const src = region(n * s.size);
      input(src);
      const dst = region(n * s.size);
      await pairwiseAllToAll(world, m, blocks(src), blocks(dst));
      return output(dst);
    }
    case 'gather': {
      const mine = region(n);
      input(mine);
      if (s.rank !== c.root) return directGather(world, m, mine, null, c.root);
      const w = region(n * s.size);
      await directGather(world, m, mine, blocks(w), c.root);
      return output(w);
    }
    case 'scatter': {
      const mine = region(n);
      const w = s.rank === c.root ? region(n * s.size) : undefined;
      if (w) input(w);
      await directScatter(world, m, w ? blocks(w) : null, mine, c.root);
      return output(mine);
    }
    case 'sendrecv': {
      const out = region(n);
      input(out);
      const into = region(n);
      const answer = await Promise.all([
        p2pSend(world, (s.rank + 1) % s.size, 0, m.view(out.addr, n)),
        // The simulator refuses a payload of another length itself (MISMATCH), never as a throw.
        p2pRecv(
          world,
          (s.rank + s.size - 1) % s.size,
          0,
          m.view(into.addr, n),
          (sent) => void sent.catch(() => undefined),
          () => false,
        ),
      ]);
      if (!answer[0].taken)
        fail(
          'INTERNAL',
          `simulate: rank ${(s.rank + 1) % s.size} holds ${answer[0].bytes} bytes for rank ${s.rank}'s ${n * m.elemBytes}`,
        );
      return output(into);
    }
    case 'barrier':
      return disseminationBarrier(world);
  }
}

function allReduce(s: RankScope, algo: string, m: Mem, world: Group, w: Span, pieceBytes?: number): Promise<void> {
  switch (algo) {
    case 'ring':
      return ringAllReduce(world, m, w, undefined, pieceBytes);
    case 'doubling':
      return doublingAllReduce(world, m, w);
    case 'tree':
      return treeAllReduce(world, m, w);
  }
  // hierarchical: as the engine runs it, with the node's phases as rings over the node's links.
  const L = s.perNode;
  const node = Math.floor(s.rank / L);
  const mates = Array.from({ length: L }, (_, i) => node * L + i);
  const across = Array.from({ length: s.size / L }, (_, k) => k * L + (s.rank % L));
  const rs = s.group(NODE_RS, mates);
  const ag = s.group(NODE_AG, mates);
  const shards = (x: Span, c: number) =>
    Array.from({ length: L }, (_, i) => ({ addr: x.addr + i * c * m.elemBytes, count: c }));
  const local: NodeLocal = {
    rank: rs.rank,
    size: L,
    async reduceScatter(out, input) {
      const b = shards(input, out.count);
      await ringReduceScatter(rs, m, b);
      m.copy(out.addr, b[rs.rank].addr, out.count);
    },
    async allGather(out, input) {
      const b = shards(out, input.count);
      m.copy(b[ag.rank].addr, input.addr, input.count);
      await ringAllGather(ag, m, b);
    },
  };
  return hierarchicalAllReduce(local, s.group(ACROSS, across), m, w, (g, mm, x) =>
    flatAlgo(x.count * mm.elemBytes, g.size, s.perNode) === 'ring'
      ? ringAllReduce(g, mm, x)
      : doublingAllReduce(g, mm, x),
  );
}
