// How many elements the two buffers of a collective that gathers or scatters blocks must hold:
// size × n against n for allGather and reduceScatter (every rank the same n, as in NCCL), and
// allToAll's equal blocks or its per-peer counts, packed in rank order.

import { fail } from '../core/errors.js';
import { type Buf, overlaps, sameView } from '../engine/buffers.js';
import { perRank } from './arguments.js';
import type { AllToAllOptions } from './options.js';

/** allGather: the output holds size × the input's count. */
export function checkAllGatherCounts(ob: Buf, ib: Buf, size: number): void {
  if (ob.count !== ib.count * size) {
    fail(
      'SIZE_MISMATCH',
      `allGather: output holds ${ob.count} elements; it must hold size × input count = ${size} × ${ib.count} = ${size * ib.count} (every rank contributes the same count, as in NCCL)`,
    );
  }
}

/** reduceScatter: the input holds size × the output's count. */
export function checkReduceScatterCounts(ob: Buf, ib: Buf, size: number): void {
  if (ib.count !== ob.count * size) {
    fail(
      'SIZE_MISMATCH',
      `reduceScatter: input holds ${ib.count} elements; it must hold size × output count = ${size} × ${ob.count} = ${size * ob.count} (equal per-rank counts, as in NCCL)`,
    );
  }
}

/**
 * allToAll's blocks, from buffers `ob` (output) and `ib` (input) apart and options `o`, on
 * rank `me.rank` of `me.size`: `count` elements per block, or (count 0) the per-peer `counts`.
 */
export function allToAllBlocks(
  ob: Buf,
  ib: Buf,
  o: AllToAllOptions,
  me: { readonly rank: number; readonly size: number },
): { count: number; counts?: { send: number[]; recv: number[] } } {
  const { rank, size } = me;
  if (overlaps(ib, ob))
    fail('INVALID_ARGUMENT', 'allToAll: output and input overlap; give it buffers apart (it does not run in place)', {
      overlap: sameView(ib, ob) ? 'same' : 'partial',
    });
  if ((o.sendCounts === undefined) !== (o.recvCounts === undefined)) {
    fail(
      'INVALID_ARGUMENT',
      'allToAll: give both sendCounts and recvCounts (per-peer counts), or neither (equal blocks)',
      { option: o.sendCounts === undefined ? 'sendCounts' : 'recvCounts' },
    );
  }
  if (o.sendCounts !== undefined) {
    const send = perRank(o.sendCounts, 'sendCounts', ib, 'input', size);
    const recv = perRank(o.recvCounts, 'recvCounts', ob, 'output', size);
    if (send[rank] !== recv[rank]) {
      fail(
        'SIZE_MISMATCH',
        `allToAll: sendCounts[${rank}] = ${send[rank]} but recvCounts[${rank}] = ${recv[rank]}; the block a rank sends itself is one count`,
        { sendCount: send[rank], recvCount: recv[rank] },
      );
    }
    return { count: 0, counts: { send, recv } };
  }
  if (ib.count % size !== 0 || ob.count !== ib.count) {
    fail(
      'SIZE_MISMATCH',
      `allToAll: input holds ${ib.count} and output ${ob.count} elements; both must hold size × block = ${size} × n (or pass sendCounts and recvCounts)`,
    );
  }
  return { count: ib.count / size };
}
