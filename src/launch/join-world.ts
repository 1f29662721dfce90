// Joining a job whose ranks span nodes (Node only): from a launcher's worker data or from the
// environment a launcher left (torchrun, Open MPI, MPICH, Slurm, webccl run --procs), meet
// every rank at the rendezvous store, connect the mesh (TCP or WebSocket), and return the world communicator.
// A job whose ranks all share one node never touches the network.
import { availableParallelism } from 'node:os';
import { Communicator } from '../api/communicator.js';
import type { CommunicatorOptions } from '../api/options.js';
import { resolveIdentity } from '../bootstrap/identity.js';
import { resolveJobId, resolveToken } from '../bootstrap/nodejs/job-secrets.js';
import { onLauncherLost } from '../bootstrap/nodejs/launcher-pipe.js';
import { carrierFromEnv } from '../bootstrap/nodejs/mesh-carrier.js';
import { meshAt, rendezvous } from '../bootstrap/nodejs/rendezvous.js';
import { storeServedFromEnv, takeStoreFd } from '../bootstrap/nodejs/store-handoff.js';
import { DEFAULT_MASTER_PORT, type WorldInit } from '../bootstrap/world.js';
import { envNumber, envString, type TlsFiles } from '../core/config.js';
import { fail } from '../core/errors.js';
import type { NodeHandle } from '../core/node.js';
import { type JoinOptions, joinNodeAs } from '../engine/context.js';
import {
  DEFAULT_CONNECT_TIMEOUT_MS,
  DEFAULT_NCHANNELS,
  netThreadOffer,
  netWorldCommunicator,
} from '../join/net-world.js';
import { createNode } from '../progress/create-node.js';
import { newHub } from '../progress/net-hub.js';
import { resolveWireTls } from '../wire/nodejs/secure-socket.js';
import { checkSecrets } from '../wire/secrets.js';
import { canStartNetProgress, startNetProgress as startNetProgressThread } from './net-progress-thread.js';

export interface JoinWorldInput {
  /** From a launcher's worker data: this thread's node and place; absent: read the environment. */
  node?: NodeHandle;
  localRank?: number;
  world?: WorldInit;
  opts: CommunicatorOptions & JoinOptions & { tls?: boolean | TlsFiles };
  /** false when several ranks of one node share a thread (tests): the node phase must not block it. */
  nodeMayBlock?: boolean;
}

/** The world this process's environment describes, or undefined for a single-rank world. */
export function worldFromEnv(env: Record<string, string | undefined>): WorldInit | undefined {
  const id = resolveIdentity(env);
  if (id.worldSize <= 1) return undefined;
  const oneMachine = id.localWorldSize === id.worldSize;
  const masterAddr =
    id.masterAddr ??
    (oneMachine
      ? '127.0.0.1'
      : fail(
          'INVALID_ARGUMENT',
          `MASTER_ADDR must be set: rank ${id.rank} of ${id.worldSize} (from ${id.source}) needs the address of rank 0's rendezvous store; it defaults to 127.0.0.1 only when the launcher says every rank is on this machine (local world size = world size)`,
        ));
  const masterPort = id.masterPort ?? DEFAULT_MASTER_PORT;
  const storeFd = id.rank === 0 ? takeStoreFd(env) : undefined;
  const served = storeServedFromEnv(env);
  return {
    rank: id.rank,
    size: id.worldSize,
    masterAddr,
    masterPort,
    token: resolveToken(env, masterAddr),
    jobId: resolveJobId(env, masterAddr, masterPort),
    ...(storeFd !== undefined && { storeFd }),
    ...(served && { storeServed: true }),
  };
}

export async function joinWorld(input: JoinWorldInput): Promise<Communicator | undefined> {
  let world = input.world ?? worldFromEnv(process.env);
  if (!world) return undefined;
  const node = input.node ?? createNode({ nranks: 1 });
  if (world.size === node.nranks) return undefined; // every rank on this node: shared memory only
  const localRank = input.localRank ?? 0;
  const { opts } = input;
  const ctx = joinNodeAs(
    node,
    localRank,
    { cores: opts.cores ?? availableParallelism(), simd: opts.simd, spinUs: opts.spinUs },
    world,
  );
  if (input.nodeMayBlock === false) ctx.canBlock = false;
  ctx.worldRank = world.rank;
  const local = new Communicator(ctx, { timeoutMs: opts.timeoutMs });
  const nchannels = envNumber('WEBCCL_NCHANNELS') ?? DEFAULT_NCHANNELS;
  if (!Number.isInteger(nchannels) || nchannels < 1 || nchannels > 64)
    fail('INVALID_ARGUMENT', `WEBCCL_NCHANNELS=${nchannels}: expected an integer in 1..64`);
  const tls = resolveWireTls(opts.tls, checkSecrets(world.token, world.jobId), world.jobId);
  // Unset, the carrier is the job's to choose: tcp, or ws when its store is webccl serve's.
  const givenCarrier = envString('WEBCCL_TRANSPORT') === undefined ? undefined : carrierFromEnv(tls);
  const connectTimeoutMs = envNumber('WEBCCL_CONNECT_TIMEOUT_MS') ?? DEFAULT_CONNECT_TIMEOUT_MS;
  const oneHost = isLoopback(world.masterAddr);
  // The rank offers a network progress thread (the job takes it if every rank offers).
  const progress = canStartNetProgress() ? netThreadOffer(opts.progress) : undefined;
  const rv = await rendezvous({
    ...world,
    tls,
    carrier: givenCarrier,
    nodeKey: node.key,
    nchannels,
    ifname: envString('WEBCCL_SOCKET_IFNAME'),
    connectTimeoutMs,
    progress,
    keepJobId: envString('WEBCCL_JOB_ID') !== undefined,
  });
  // MASTER_PORT was `webccl serve`'s own port: the job is the one serve hosts (served-store.ts).
  if (rv.served) world = { ...world, masterPort: rv.served.storePort, jobId: rv.jobId, storeServed: true };
  const carrier = rv.carrier;
  const { storeFd: _fd, storeServed: _served, ...jobWorld } = world;
  const startNetProgress = () =>
    startNetProgressThread({
      memory: node.memory,
      world: jobWorld,
      tls: opts.tls,
      carrier,
      nchannels,
      ifname: envString('WEBCCL_SOCKET_IFNAME'),
      connectTimeoutMs,
      oneHost,
      cores: opts.cores ?? availableParallelism(),
      simd: ctx.core.simd,
      hub: newHub(ctx),
      localRank,
    });
  const remesh = (prefix: string, rank: number, size: number) =>
    meshAt(
      rv.store,
      {
        rank,
        size,
        jobId: world.jobId,
        token: world.token,
        nchannels,
        masterAddr: world.masterAddr,
        ifname: envString('WEBCCL_SOCKET_IFNAME'),
        tls,
        carrier,
        timeoutMs: envNumber('WEBCCL_CONNECT_TIMEOUT_MS') ?? DEFAULT_CONNECT_TIMEOUT_MS,
      },
      prefix,
    );
  const comm = await netWorldCommunicator({
    ctx,
    local,
    node,
    localRank,
    world,
    met: rv,
    opts,
    remesh,
    // A loopback rendezvous means every rank runs on this machine, sharing its cores.
    oneHost,
    ...(progress && { startNetProgress }),
  });
  // A rank whose launcher ended tells its peers why before it ends (webccl run --procs).
  onLauncherLost((reason) => comm.abort(reason));
  return comm;
}

/** An address only this machine answers on: every rank that reached it runs here. */
function isLoopback(addr: string): boolean {
  return addr === 'localhost' || addr === '::1' || /^127\./.test(addr);
}
