// WEBCCL_ALGO: either one allReduce algorithm (`twoshot`, `ring`), or a per-collective list
// (`allreduce:ring,allgather:ring`). Names of the shared-memory algorithms are for one node's
// engine and names of the network ones for communicators across nodes; each engine takes the
// names it has. An unknown collective or algorithm is refused, naming it.
import { envString } from '../core/config.js';
import { fail } from '../core/errors.js';
import { ALGO } from '../core/shm-map.js';
import { NET_ALGORITHMS } from './names.js';

/** Every collective's algorithms: one node's (shared memory) and the network's. */
export const COLLECTIVE_ALGORITHMS: Record<string, readonly string[]> = {
  allreduce: [...Object.keys(ALGO), ...NET_ALGORITHMS],
  allgather: ['direct', 'ring'],
  reducescatter: ['direct', 'ring'],
  broadcast: ['direct', 'chain'],
  reduce: ['direct', 'chain'],
  alltoall: ['direct', 'pairwise'],
  gather: ['direct'],
  scatter: ['direct'],
  barrier: ['direct', 'dissemination'],
};

/** The algorithm WEBCCL_ALGO forces per collective (lower-case names, as the CLI spells them). */
export type AlgoChoices = Partial<Record<string, string>>;

export function parseAlgoSetting(value: string, from = 'WEBCCL_ALGO'): AlgoChoices {
  if (!value.includes(':')) {
    if (!COLLECTIVE_ALGORITHMS.allreduce.includes(value)) {
      fail(
        'INVALID_ARGUMENT',
        `${from}: unknown algorithm ${JSON.stringify(value)} (expected ${COLLECTIVE_ALGORITHMS.allreduce.join(' or ')}, or collective:algorithm,...)`,
        { algorithm: value },
      );
    }
    return { allreduce: value };
  }
  const out: AlgoChoices = {};
  for (const item of value.split(',')) {
    const at = item.indexOf(':');
    const collective = (at < 0 ? item : item.slice(0, at)).trim().toLowerCase();
    const algorithm = at < 0 ? '' : item.slice(at + 1).trim();
    const known = COLLECTIVE_ALGORITHMS[collective];
    if (!known) {
      fail(
        'INVALID_ARGUMENT',
        `${from}: unknown collective ${JSON.stringify(collective)} in ${JSON.stringify(value)} (expected ${Object.keys(COLLECTIVE_ALGORITHMS).join(', ')})`,
        { collective },
      );
    }
    if (!known.includes(algorithm)) {
      fail(
        'INVALID_ARGUMENT',
        `${from}: ${collective} has no algorithm ${JSON.stringify(algorithm)} (expected ${known.join(', ')})`,
        { collective, algorithm },
      );
    }
    if (out[collective] !== undefined)
      fail('INVALID_ARGUMENT', `${from}: ${collective} is named twice in ${JSON.stringify(value)}`, { collective });
    out[collective] = algorithm;
  }
  return out;
}

/** WEBCCL_ALGO's allReduce algorithm, if it names one (checked whole: a bad entry anywhere is refused). */
export function envAllReduceAlgo(): string | undefined {
  const v = envString('WEBCCL_ALGO');
  return v === undefined ? undefined : parseAlgoSetting(v).allreduce;
}
