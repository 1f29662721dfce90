// The entry JS calls: advances the op described at `desc` as far as it can.
// Returns ST_DONE, ST_BLOCKED (JS blocks on the flag named in the descriptor), ST_NEED_IN /
// ST_NEED_OUT (JS copies between its buffer and shared memory), or ST_ERROR.
import {
  A_TWOSHOT, D_ALGO, D_KIND, K_ALLGATHER, K_ALLREDUCE, K_BARRIER, K_BROADCAST, K_REDUCE,
  K_REDUCESCATTER, ST_ERROR, field,
} from './layout';
import { directAllReduce } from './direct-allreduce';
import { twoshotAllReduce } from './twoshot-allreduce';
import { directAllGather } from './allgather';
import { directReduceScatter } from './reduce-scatter';
import { barrier, directBroadcast, directReduce } from './rooted';

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
  }
  return ST_ERROR;
}
