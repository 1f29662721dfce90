// Direct reduceScatter over shared memory.
//
// The input holds n blocks of `count` elements; rank i's output is the reduction of block i
// over all ranks. Per chunk (C elements of every block): every rank copies its n pieces into
// its slot and posts; once all have posted, rank i reduces piece i of every slot into its
// output. Per rank and chunk: n·C copied in, n·C read, C written; one synchronisation.
import { D_COMM, D_COUNT, D_NRANKS, D_RANK, ST_DONE, field, slotAddr } from './shm-map';
import { chunkLoop, claim } from './chunk-loop';
import { chunkLen, chunkOff } from './step';
import { elemSize, outputResult, reduceSlots, resultAddr, stageIn } from './stage';

function stagePieces(desc: usize, s: u32, t: u32): i32 {
  const slot = slotAddr(<usize>field(desc, D_COMM), field(desc, D_RANK), t);
  const count = field(desc, D_COUNT);
  const off = chunkOff(desc, s);
  const len = chunkLen(desc, s);
  const n = field(desc, D_NRANKS);
  for (let j: u32 = 0; j < n; j++) {
    if (!claim(desc, j)) continue;
    const r = stageIn(desc, j * count + off, len, slot + <usize>(j * len) * elemSize(desc));
    if (r != ST_DONE) return r;
  }
  return ST_DONE;
}

function reduceOwnPiece(desc: usize, s: u32, t: u32): i32 {
  const len = chunkLen(desc, s);
  reduceSlots(desc, t, <usize>(field(desc, D_RANK) * len) * elemSize(desc), resultAddr(desc, s), len);
  return ST_DONE;
}

export function directReduceScatter(desc: usize): i32 {
  return chunkLoop(desc, stagePieces, reduceOwnPiece, outputResult);
}
