// The calls `webccl perf` times, one Case per (row, placement) on each rank: how the collective
// is called on this rank's buffers, how they are filled with closed-form data before the checked
// call, and how many elements of the result are wrong. Only the Communicator's methods are used,
// so a test can drive every case with a stand-in communicator and a deliberately wrong result.
import type { Communicator } from '../../api/communicator.js';
import type { Dtype } from '../../core/dtypes.js';
import type { BufferArg, TypedArray } from '../../engine/buffers.js';
import type { Work } from '../../engine/work.js';
import { countWrong, countWrongBlock, fill, fillBlock, reduced, value } from './data.js';
import type { Placement, PlannedRow, RankSpec } from './plan.js';

/** What a Case needs of a communicator. */
export type CaseComm = Pick<
  Communicator,
  | 'rank'
  | 'size'
  | 'allReduce'
  | 'allGather'
  | 'reduceScatter'
  | 'broadcast'
  | 'reduce'
  | 'allToAll'
  | 'gather'
  | 'scatter'
  | 'send'
  | 'recv'
>;

export interface Case {
  /**
   * One call of the collective, as phases run one after the other: the ops a phase issues are
   * all in flight together and all complete before the next phase (sendrecv: one phase of a
   * recv and a send; pingpong: a send, then a recv).
   */
  phases: (() => Work | Work[])[];
  /** Refills the buffers with closed-form data (and clears the output) before the checked call. */
  prepare: () => void;
  /** Wrong elements on this rank after the checked call. */
  wrong: () => number;
}

export function view(
  base: TypedArray,
  dtype: Dtype,
  start: number,
  count: number,
): { arr: TypedArray; arg: BufferArg } {
  const arr = base.subarray(start, start + count) as TypedArray;
  return { arr, arg: dtype === 'bf16' || dtype === 'f16' ? { data: arr as Uint16Array, dtype } : arr };
}

/** The out-of-place or in-place case of one row on this rank. */
export function makeCase(
  comm: CaseComm,
  spec: RankSpec,
  row: PlannedRow,
  place: Placement,
  sendBase: TypedArray,
  recvBase: TypedArray,
): Case {
  const { rank, size: n } = comm;
  const { dtype, op, root, shape } = row;
  const count = shape.count;
  // Each collective gets only the options it takes (it refuses the others); -a is allreduce's.
  const opts = { op, algo: spec.algo };
  const zero = (a: TypedArray) => (a instanceof BigInt64Array ? a.fill(0n) : (a as Float64Array).fill(0));
  const sum = (i: number) => reduced(op, n, i);
  const ip = place === 'ip';
  const send = view(sendBase, dtype, 0, shape.sendCount);
  const recv = view(recvBase, dtype, 0, shape.recvCount);

  switch (spec.collective) {
    case 'allreduce': {
      const o = ip ? opts : { ...opts, out: recv.arg };
      const x = ip ? recv : send;
      return {
        phases: [() => comm.allReduce(x.arg, o)],
        prepare: () => {
          fill(x.arr, dtype, op, rank, 0);
          if (!ip) zero(recv.arr);
        },
        wrong: () => countWrong(recv.arr, dtype, op, 0, sum),
      };
    }
    case 'allgather': {
      const mine = ip ? view(recvBase, dtype, rank * count, count) : send;
      return {
        phases: [() => comm.allGather(recv.arg, mine.arg)],
        prepare: () => {
          zero(recv.arr);
          fill(mine.arr, dtype, 'sum', rank, 0);
        },
        wrong: () => {
          let w = 0;
          for (let j = 0; j < n; j++)
            w += countWrong(recv.arr.subarray(j * count, (j + 1) * count) as TypedArray, dtype, 'sum', 0, (i) =>
              value('sum', j, i),
            );
          return w;
        },
      };
    }
    case 'reducescatter': {
      const out = ip ? view(sendBase, dtype, rank * count, count) : recv;
      return {
        phases: [() => comm.reduceScatter(out.arg, send.arg, { op })],
        prepare: () => {
          fill(send.arr, dtype, op, rank, 0);
          if (!ip) zero(recv.arr);
        },
        wrong: () => countWrong(out.arr, dtype, op, rank * count, sum),
      };
    }
    case 'broadcast': {
      const o = ip ? { root } : { root, out: recv.arg };
      const x = ip ? recv : send;
      return {
        phases: [() => comm.broadcast(x.arg, o)],
        prepare: () => {
          fill(x.arr, dtype, 'sum', rank, 0);
          if (!ip) zero(recv.arr);
        },
        wrong: () => countWrong(recv.arr, dtype, 'sum', 0, (i) => value('sum', root, i)),
      };
    }
    case 'reduce': {
      const o = ip ? { op, root } : { op, root, out: recv.arg };
      const x = ip ? recv : send;
      return {
        phases: [() => comm.reduce(x.arg, o)],
        prepare: () => {
          fill(x.arr, dtype, op, rank, 0);
          if (!ip) zero(recv.arr);
        },
        wrong: () => (rank === root ? countWrong(recv.arr, dtype, op, 0, sum) : 0),
      };
    }
    case 'alltoall': {
      // Block j of this rank's input goes to rank j; block j of its output comes from rank j.
      const block = (a: TypedArray, j: number) => a.subarray(j * count, (j + 1) * count) as TypedArray;
      return {
        phases: [() => comm.allToAll(recv.arg, send.arg)],
        prepare: () => {
          zero(recv.arr);
          for (let j = 0; j < n; j++) fillBlock(block(send.arr, j), dtype, rank, j);
        },
        wrong: () => {
          let w = 0;
          for (let j = 0; j < n; j++) w += countWrongBlock(block(recv.arr, j), dtype, j, rank);
          return w;
        },
      };
    }
    case 'gather': {
      // In place (nccl-tests): each rank's input is its block of the output buffer.
      const mine = ip ? view(recvBase, dtype, rank * count, count) : send;
      const out = rank === root ? recv.arg : null;
      return {
        phases: [() => comm.gather(out, mine.arg, { root })],
        prepare: () => {
          if (rank === root) zero(recv.arr);
          fillBlock(mine.arr, dtype, rank, root);
        },
        wrong: () => {
          if (rank !== root) return 0;
          let w = 0;
          for (let j = 0; j < n; j++)
            w += countWrongBlock(recv.arr.subarray(j * count, (j + 1) * count) as TypedArray, dtype, j, root);
          return w;
        },
      };
    }
    case 'scatter': {
      // In place (nccl-tests): each rank's output is its block of the input buffer.
      const out = ip ? view(sendBase, dtype, rank * count, count) : recv;
      const input = rank === root ? send.arg : null;
      return {
        phases: [() => comm.scatter(out.arg, input, { root })],
        prepare: () => {
          zero(out.arr);
          if (rank === root)
            for (let j = 0; j < n; j++)
              fillBlock(send.arr.subarray(j * count, (j + 1) * count) as TypedArray, dtype, root, j);
        },
        wrong: () => countWrongBlock(out.arr, dtype, root, rank),
      };
    }
    case 'sendrecv': {
      const next = (rank + 1) % n;
      const prev = (rank + n - 1) % n;
      return {
        phases: [() => [comm.recv(recv.arg, prev), comm.send(send.arg, next)]],
        prepare: () => {
          zero(recv.arr);
          fillBlock(send.arr, dtype, rank, next);
        },
        wrong: () => countWrongBlock(recv.arr, dtype, prev, rank),
      };
    }
    case 'pingpong': {
      // Rank 0 sends and waits for the answer; rank 1 waits for the message, then answers.
      const peer = 1 - rank;
      const there = () => comm.send(send.arg, peer);
      const back = () => comm.recv(recv.arg, peer);
      return {
        phases: rank === 0 ? [there, back] : [back, there],
        prepare: () => {
          zero(recv.arr);
          fillBlock(send.arr, dtype, rank, peer);
        },
        wrong: () => countWrongBlock(recv.arr, dtype, peer, rank),
      };
    }
  }
}
