// Who this rank is: rank, world size and local (same-machine) rank, taken from explicit options or
// from the variables a launcher left in the environment (torchrun, Open MPI's mpirun, MPICH's
// Hydra, Slurm's srun), in that order. Pure and browser-safe: the caller passes the environment.
// A missing, malformed or contradictory setting is an INVALID_ARGUMENT error naming the variable,
// because a rank that guesses its identity wrong hangs the whole job at rendezvous.
import { WebcclError } from '../core/errors.js';

export type IdentitySource = 'options' | 'torchrun' | 'openmpi' | 'mpich' | 'slurm' | 'default';

export interface Identity {
  rank: number;
  worldSize: number;
  /** Rank among the ranks on this machine; 0 of 1 when the launcher does not say. */
  localRank: number;
  localWorldSize: number;
  masterAddr?: string;
  masterPort?: number;
  source: IdentitySource;
}

export type Env = Record<string, string | undefined>;

type Numbers = Pick<Identity, 'rank' | 'worldSize' | 'localRank' | 'localWorldSize'>;
/** The name to blame for each field in an error message. */
type Names = Record<keyof Numbers, string>;

interface Convention {
  source: IdentitySource;
  names: Names;
  /** Variables whose presence means this launcher started us. */
  markers: string[];
}

const CONVENTIONS: Convention[] = [
  conv('torchrun', ['RANK', 'WORLD_SIZE', 'LOCAL_RANK', 'LOCAL_WORLD_SIZE']),
  conv('openmpi', [
    'OMPI_COMM_WORLD_RANK',
    'OMPI_COMM_WORLD_SIZE',
    'OMPI_COMM_WORLD_LOCAL_RANK',
    'OMPI_COMM_WORLD_LOCAL_SIZE',
  ]),
  conv('mpich', ['PMI_RANK', 'PMI_SIZE', 'MPI_LOCALRANKID', 'MPI_LOCALNRANKS']),
  // Slurm exports SLURM_NTASKS (and tasks-per-node) in allocation shells too, where no task
  // runs: only SLURM_PROCID, set per task by srun, says that Slurm started this process.
  {
    ...conv('slurm', ['SLURM_PROCID', 'SLURM_NTASKS', 'SLURM_LOCALID', 'SLURM_TASKS_PER_NODE']),
    markers: ['SLURM_PROCID'],
  },
];

function conv(source: IdentitySource, [rank, worldSize, localRank, localWorldSize]: string[]): Convention {
  return {
    source,
    names: { rank, worldSize, localRank, localWorldSize },
    markers: [rank, worldSize, localRank, localWorldSize],
  };
}

const OPTION_NAMES: Names = {
  rank: 'options.rank',
  worldSize: 'options.worldSize',
  localRank: 'options.localRank',
  localWorldSize: 'options.localWorldSize',
};

function bad(message: string, variables: string[]): never {
  throw new WebcclError('INVALID_ARGUMENT', message, { variables });
}

/** An environment value, with '' treated as unset (as shells leave `RANK=`). */
function get(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

function parseInt10(name: string, raw: string): number {
  if (!/^[0-9]{1,10}$/.test(raw) || Number(raw) > 0x7fffffff) {
    bad(`${name}=${JSON.stringify(raw)} is not a non-negative integer`, [name]);
  }
  return Number(raw);
}

function envInt(env: Env, name: string): number | undefined {
  const raw = get(env, name);
  return raw === undefined ? undefined : parseInt10(name, raw);
}

function optInt(name: string, v: number | undefined): number | undefined {
  if (v === undefined) return undefined;
  if (!Number.isInteger(v) || v < 0 || v > 0x7fffffff) bad(`${name}=${v} is not a non-negative integer`, [name]);
  return v;
}

/** Completes and checks one set of numbers; `undefined` fields are missing. */
function check(v: Partial<Numbers>, n: Names): Numbers {
  if (v.rank === undefined || v.worldSize === undefined) {
    const missing = v.rank === undefined ? n.rank : n.worldSize;
    const present = (['rank', 'worldSize', 'localRank', 'localWorldSize'] as const)
      .filter((k) => v[k] !== undefined)
      .map((k) => n[k]);
    bad(`${present.join(', ')} set without ${missing}`, [missing, ...present]);
  }
  const { rank, worldSize } = v;
  if (worldSize < 1) bad(`${n.worldSize}=${worldSize}: a world has at least one rank`, [n.worldSize]);
  if (rank >= worldSize) {
    bad(`${n.rank}=${rank} is out of range for ${n.worldSize}=${worldSize} (expected 0..${worldSize - 1})`, [
      n.rank,
      n.worldSize,
    ]);
  }
  if (v.localRank === undefined && v.localWorldSize === undefined)
    return { rank, worldSize, localRank: 0, localWorldSize: 1 };
  if (v.localRank === undefined || v.localWorldSize === undefined) {
    const [set, missing] =
      v.localRank === undefined ? [n.localWorldSize, n.localRank] : [n.localRank, n.localWorldSize];
    bad(`${set} set without ${missing}`, [missing, set]);
  }
  const { localRank, localWorldSize } = v;
  if (localWorldSize < 1 || localWorldSize > worldSize) {
    bad(
      `${n.localWorldSize}=${localWorldSize} is out of range for ${n.worldSize}=${worldSize} (expected 1..${worldSize})`,
      [n.localWorldSize, n.worldSize],
    );
  }
  if (localRank >= localWorldSize) {
    bad(
      `${n.localRank}=${localRank} is out of range for ${n.localWorldSize}=${localWorldSize} (expected 0..${localWorldSize - 1})`,
      [n.localRank, n.localWorldSize],
    );
  }
  return { rank, worldSize, localRank, localWorldSize };
}

/**
 * Tasks on this node from SLURM_NTASKS_PER_NODE, or from SLURM_TASKS_PER_NODE ("4", "2(x3)",
 * "2(x3),1"): the count itself when every node has the same, else the entry for SLURM_NODEID.
 */
function slurmLocalSize(env: Env): { value?: number; name: string } {
  const simple = envInt(env, 'SLURM_NTASKS_PER_NODE');
  if (simple !== undefined) return { value: simple, name: 'SLURM_NTASKS_PER_NODE' };
  const name = 'SLURM_TASKS_PER_NODE';
  const raw = get(env, name);
  if (raw === undefined) return { name };
  const groups: { count: number; repeat: number }[] = [];
  for (const item of raw.split(',', 4096)) {
    const m = /^([0-9]{1,10})(?:\(x([0-9]{1,10})\))?$/.exec(item);
    if (!m) bad(`${name}=${JSON.stringify(raw)} is not a list like "4" or "2(x3),1"`, [name]);
    groups.push({ count: Number(m[1]), repeat: m[2] === undefined ? 1 : Number(m[2]) });
  }
  if (groups.every((g) => g.count === groups[0].count)) return { value: groups[0].count, name };
  const node = envInt(env, 'SLURM_NODEID');
  if (node === undefined)
    bad(`${name}=${raw} differs between nodes and SLURM_NODEID is not set`, [name, 'SLURM_NODEID']);
  let first = 0;
  for (const g of groups) {
    if (node < first + g.repeat) return { value: g.count, name: `${name}[SLURM_NODEID=${node}]` };
    first += g.repeat;
  }
  return bad(`SLURM_NODEID=${node} is past the ${first} nodes of ${name}=${raw}`, ['SLURM_NODEID', name]);
}

function fromConvention(c: Convention, env: Env): Numbers {
  const n = { ...c.names };
  let localWorldSize: number | undefined;
  if (c.source !== 'slurm') localWorldSize = envInt(env, n.localWorldSize);
  else {
    const s = slurmLocalSize(env);
    n.localWorldSize = s.name;
    localWorldSize = s.value;
    if (s.value === undefined && get(env, n.localRank) !== undefined) {
      bad(`SLURM_LOCALID set without SLURM_NTASKS_PER_NODE or SLURM_TASKS_PER_NODE`, [
        'SLURM_NTASKS_PER_NODE',
        'SLURM_TASKS_PER_NODE',
        'SLURM_LOCALID',
      ]);
    }
  }
  return check(
    {
      rank: envInt(env, n.rank),
      worldSize: envInt(env, n.worldSize),
      localRank: envInt(env, n.localRank),
      localWorldSize,
    },
    n,
  );
}

function master(env: Env, explicit: Partial<Identity>): Pick<Identity, 'masterAddr' | 'masterPort'> {
  const addrName = explicit.masterAddr !== undefined ? 'options.masterAddr' : 'MASTER_ADDR';
  let addr = explicit.masterAddr ?? get(env, 'MASTER_ADDR');
  if (addr !== undefined) {
    addr = addr.trim().replace(/^\[(.*)\]$/, '$1'); // "[::1]" names the IPv6 address ::1
    if (addr === '' || /\s/.test(addr))
      bad(`${addrName}=${JSON.stringify(addr)} is not a host name or address`, [addrName]);
  }
  let port: number | undefined;
  let portName = 'options.masterPort';
  if (explicit.masterPort !== undefined) port = optInt(portName, explicit.masterPort);
  else port = envInt(env, (portName = 'MASTER_PORT'));
  if (port !== undefined && (port < 1 || port > 65535))
    bad(`${portName}=${port} is not a port (expected 1..65535)`, [portName]);
  return { ...(addr !== undefined && { masterAddr: addr }), ...(port !== undefined && { masterPort: port }) };
}

/**
 * This rank's identity: `explicit` options first (rank and worldSize together), then the first
 * launcher convention found in `env`, else a one-rank world. MASTER_ADDR / MASTER_PORT are read
 * whatever the source, unless given explicitly.
 */
export function resolveIdentity(env: Env, explicit: Partial<Identity> = {}): Identity {
  const where = master(env, explicit);
  const opts = {
    rank: optInt(OPTION_NAMES.rank, explicit.rank),
    worldSize: optInt(OPTION_NAMES.worldSize, explicit.worldSize),
    localRank: optInt(OPTION_NAMES.localRank, explicit.localRank),
    localWorldSize: optInt(OPTION_NAMES.localWorldSize, explicit.localWorldSize),
  };
  if (Object.values(opts).some((v) => v !== undefined))
    return { ...check(opts, OPTION_NAMES), ...where, source: 'options' };

  const present = CONVENTIONS.filter((c) => c.markers.some((m) => get(env, m) !== undefined));
  if (present.length === 0)
    return { rank: 0, worldSize: 1, localRank: 0, localWorldSize: 1, ...where, source: 'default' };
  const [chosen, ...others] = present;
  const ids = fromConvention(chosen, env);
  // A launcher may legitimately run inside a Slurm allocation (srun starting mpirun or
  // torchrun per node), so only torchrun and the MPI launchers are held to agree.
  for (const other of others.filter((c) => c.source !== 'slurm')) {
    const theirs = fromConvention(other, env);
    for (const k of ['rank', 'worldSize'] as const) {
      if (theirs[k] !== ids[k]) {
        const a = chosen.names[k];
        const b = other.names[k];
        bad(
          `${a}=${ids[k]} and ${b}=${theirs[k]} disagree (set by two launchers?); unset one or pass ${k} explicitly`,
          [a, b],
        );
      }
    }
  }
  return { ...ids, ...where, source: chosen.source };
}
