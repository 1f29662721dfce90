// Direct reduceScatter over shared memory.
//
// The input holds n blocks of `count` elements; rank i's output is the reduction of block i
// over all ranks. Per chunk (C elements of every block): every rank copies its n pieces into
// its slot and posts; once all have posted, rank i reduces piece i of every slot into its
// output. Per rank and chunk: n·C copied in, n·C read, C written; one synchronisation.

import { chunkLoop } from './chunk-loop';
import { D_RANK, field, ST_DONE } from './shm-map';
import { elemSize, outputResult, reduceSlots, resultAddr, stagePieces } from './stage';
import { chunkLen } from './step';

function reduceOwnPiece(desc: usize, s: u32, t: u32): i32 {
  const len = chunkLen(desc, s);
  reduceSlots(desc, t, <usize>(field(desc, D_RANK) * len) * elemSize(desc), resultAddr(desc, s), len);
  return ST_DONE;
}

export function directReduceScatter(desc: usize): i32 {
  return chunkLoop(desc, stagePieces, reduceOwnPiece, outputResult);
}
