// The entry JS calls: advances the op described at `desc` as far as it can.
// Returns ST_DONE, ST_BLOCKED (JS blocks on the flag named in the descriptor), ST_NEED_IN /
// ST_NEED_OUT (JS copies between its buffer and shared memory), or ST_ERROR.

import { directAllGather } from './allgather';
import { directAllToAll } from './alltoall';
import { directAllReduce } from './direct-allreduce';
import { directGather, directScatter } from './gather';
import { directReduceScatter } from './reduce-scatter';
import { barrier, directBroadcast, directReduce } from './rooted';
import {
  A_TWOSHOT,
  D_ALGO,
  D_KIND,
  field,
  K_ALLGATHER,
  K_ALLREDUCE,
  K_ALLTOALL,
  K_BARRIER,
  K_BROADCAST,
  K_GATHER,
  K_REDUCE,
  K_REDUCESCATTER,
  K_SCATTER,
  ST_ERROR,
} from './shm-map';
import { twoshotAllReduce } from './twoshot-allreduce';

export function advance(desc: usize): i32 {
  switch (field(desc, D_KIND)) {
    case K_ALLREDUCE:
      return field(desc, D_ALGO) == A_TWOSHOT ? twoshotAllReduce(desc) : directAllReduce(desc);
    case K_ALLGATHER:
      return directAllGather(desc);
    case K_REDUCESCATTER:
      return directReduceScatter(desc);
    case K_BROADCAST:
      return directBroadcast(desc);
    case K_REDUCE:
      return directReduce(desc);
    case K_BARRIER:
      return barrier(desc);
    case K_ALLTOALL:
      return directAllToAll(desc);
    case K_GATHER:
      return directGather(desc);
    case K_SCATTER:
      return directScatter(desc);
  }
  return ST_ERROR;
}
