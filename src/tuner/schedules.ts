// What each allReduce schedule costs one rank, counted from the schedule itself: sequential
// steps (each pays the path's latency α), messages it sends (each costs CPU: system calls, a
// header, promise turns; messages in flight at once overlap their latency, not that), bytes it
// moves (sent over TCP, or copied in shared memory: β) and bytes its reduction kernels read
// (γ). The cost model turns these counts into time, and `webccl tune` fits α, o, β and γ by
// least squares over them, so one fitted model predicts every schedule, including ones it was
// not measured on.
import { PIECE_BYTES } from '../algorithms/group.js';
import { LANES } from '../algorithms/ring.js';
import { DEFAULT_SLOT_BYTES } from '../core/node.js';

export type Path = 'shm' | 'tcp';

export interface StepCounts {
  /** Sequential steps (synchronisations, or rounds of messages a rank waits on one after another). */
  steps: number;
  /** Messages a rank sends over the network (0 in shared memory, where a step moves no message). */
  messages: number;
  /** Bytes one rank moves: copies through shared memory, or bytes it sends over TCP. */
  bytes: number;
  /** Bytes one rank's reduction kernels read. */
  reduced: number;
  /**
   * Steps in which only a share of the group's ranks work (recursive doubling's fold-in and
   * fold-out, and its exchanges when ranks sit out); the other steps keep every rank busy. On
   * a machine with fewer cores than busy ranks a step runs in turns (cost-model.ts, rounds).
   */
  partial?: { share: number; steps: number }[];
  /**
   * Network only: connections a rank's messages to one peer spread over at once — the fewer of
   * the connections the op may use and the messages it keeps in flight to a peer (the ring's
   * lanes; 1 for schedules that send one message per peer and step). Absent: no connection
   * costs (shared memory, and counts made before channels were weighed).
   */
  ways?: number;
}

const NONE: StepCounts = { steps: 0, messages: 0, bytes: 0, reduced: 0 };

/**
 * Scheduling rounds beyond the first, summed over the steps, for `ranks` ranks of the group on a
 * machine of `cores` cores: a step whose busy ranks (a share of them) outnumber the cores runs
 * in ⌈busy / cores⌉ turns. (3 ranks on 2 cores: every ring step takes two turns; recursive
 * doubling keeps two ranks busy at a time and takes one.)
 */
export function extraRounds(c: StepCounts, ranks: number, cores: number): number {
  const turns = (busy: number) => Math.max(0, Math.ceil(busy / cores - 1e-9) - 1);
  const partial = c.partial ?? [];
  const whole = c.steps - partial.reduce((t, p) => t + p.steps, 0);
  return whole * turns(ranks) + partial.reduce((t, p) => t + p.steps * turns(p.share * ranks), 0);
}

/**
 * Shared memory (assembly/engine/): direct takes one synchronisation per chunk of a slot,
 * copies its chunk in and reads all n slots in one reduceK pass; two-shot (zero-copy, on
 * comm.alloc() buffers) synchronises three times, reads its segment of every input and copies
 * the n−1 other segments of the result.
 */
export function shmCounts(
  algo: 'direct' | 'twoshot',
  n: number,
  bytes: number,
  slotBytes = DEFAULT_SLOT_BYTES,
): StepCounts {
  if (n <= 1) return NONE;
  if (algo === 'direct')
    return { steps: Math.max(1, Math.ceil(bytes / slotBytes)), messages: 0, bytes, reduced: n * bytes };
  return { steps: 3, messages: 0, bytes: ((n - 1) / n) * bytes, reduced: bytes };
}

/** Pieces of at most `pieceBytes` a block of `bytes` travels in (src/algorithms/group.ts piecesFor). */
export const pieceCount = (bytes: number, pieceBytes = PIECE_BYTES): number =>
  Math.max(1, Math.ceil(bytes / pieceBytes));

/**
 * Network schedules (src/algorithms/), per rank: the ring sends 2(n−1) blocks of S/n, each in
 * pieces that travel in LANES lanes at once (a lane's pieces follow one another, so the steps
 * a rank waits through are 2(n−1) per round of lanes, its messages 2(n−1) per piece);
 * recursive doubling log2(p) whole buffers (p the largest power of two ≤ n; ranks beyond p fold
 * in and get the result back: two steps more); the double binary tree sends about twice the
 * buffer, pipelined up and down a tree of depth ⌈log2(n+1)⌉. `pieceBytes`: the ring's piece
 * size (the tuner's choice, ring-pieces.ts; PIECE_BYTES when fitting and simulating).
 * `channels`: the connections per pair the op may use (the tuner's choice, channelsFor); only the
 * ring keeps several messages in flight to a peer, so only its `ways` can exceed 1.
 */
export function netCounts(
  algo: 'ring' | 'doubling' | 'tree',
  n: number,
  bytes: number,
  pieceBytes = PIECE_BYTES,
  channels = 1,
): StepCounts {
  if (n <= 1) return NONE;
  if (algo === 'ring') {
    const block = bytes / n;
    const p = pieceCount(block, pieceBytes);
    const lanes = Math.min(LANES, p);
    const rounds = Math.ceil(p / lanes);
    return {
      steps: 2 * (n - 1) * rounds,
      messages: 2 * (n - 1) * p,
      bytes: 2 * (n - 1) * block,
      reduced: (n - 1) * block,
      ways: Math.min(channels, lanes),
    };
  }
  if (algo === 'doubling') {
    const rounds = Math.floor(Math.log2(n));
    const q = 2 ** rounds;
    const extra = n > q ? 2 : 0;
    const counts = {
      steps: rounds + extra,
      messages: rounds + extra,
      bytes: (rounds + extra) * bytes,
      reduced: (rounds + (extra ? 1 : 0)) * bytes,
      ways: 1,
    };
    // Beyond a power of two, the q ranks that double leave n − q idle, and the fold-in and
    // fold-out steps keep only the 2(n − q) ranks that fold busy.
    return extra
      ? {
          ...counts,
          partial: [
            { share: q / n, steps: rounds },
            { share: (2 * (n - q)) / n, steps: 2 },
          ],
        }
      : counts;
  }
  const depth = Math.ceil(Math.log2(n + 1));
  const p = pieceCount(bytes / 2);
  const steps = 2 * (depth - 1) + 2 * p;
  return { steps, messages: steps, bytes: 2 * bytes, reduced: bytes, ways: 1 };
}

/** Counts on both paths: the hierarchical schedule runs a node phase over shared memory and a network phase. */
export interface PathCounts {
  shm: StepCounts;
  tcp: StepCounts;
}

/**
 * Hierarchical (src/algorithms/hierarchical.ts): reduce-scatter and allgather inside the node
 * (as two-shot's phases over L ranks), and between them a flat allReduce of S/L over the
 * `nodes` ranks at the same place of every node (`across`, itself the model's choice).
 */
export function hierarchicalCounts(
  nodes: number,
  perNode: number,
  bytes: number,
  across: 'ring' | 'doubling',
  pieceBytes = PIECE_BYTES,
  channels = 1,
): PathCounts {
  const local =
    perNode > 1 ? { steps: 2, messages: 0, bytes: 2 * ((perNode - 1) / perNode) * bytes, reduced: bytes } : NONE;
  return { shm: local, tcp: netCounts(across, nodes, bytes / perNode, pieceBytes, channels) };
}

export const onPath = (path: Path, c: StepCounts): PathCounts =>
  path === 'shm' ? { shm: c, tcp: NONE } : { shm: NONE, tcp: c };
