// Rendezvous of a job across nodes (Node only): world rank 0 serves the store at
// MASTER_ADDR:MASTER_PORT; every rank checks that all agree on the world size, publishes where
// its transport listens and which node memory it shares, waits for everyone (naming the ranks
// that have not come when the connect deadline passes), then builds the mesh over TCP or
// WebSocket (WEBCCL_TRANSPORT, on which every rank must agree).
// Knows nothing of collectives: it returns a connected transport and the node of every rank.
import { networkInterfaces } from 'node:os';
import { WebcclError, within } from '../../core/errors.js';
import { RateLimitedLog } from '../../core/rate-log.js';
import type { Mesh } from '../../transport/mesh/mesh.js';
import { AUTH_FAIL_REASONS } from '../../wire/auth.js';
import type { WireTls } from '../../wire/nodejs/secure-socket.js';
import { hostPort } from '../../wire/secrets.js';
import { agreeOnCarrier, agreeOnSize, connectAt, meetAndConnect, tellAbort } from '../meet.js';
import type { WorldInit } from '../world.js';
import { isLoopback } from './job-secrets.js';
import { type CarrierName, listenMesh } from './mesh-carrier.js';
import { askServedJob, ServedElsewhere, type ServedJobInfo } from './served-store.js';
import { StoreClient } from './store-client.js';
import { refusalLine, type StoreServer, startStoreServer } from './store-server.js';

export interface RendezvousOptions extends WorldInit {
  /** Equal for ranks that share memory (NodeHandle.key). */
  nodeKey: string;
  /** Connections per pair of ranks (WEBCCL_NCHANNELS). */
  nchannels: number;
  /** Interface whose address peers dial (WEBCCL_SOCKET_IFNAME). */
  ifname?: string;
  /** Deadline for every rank to arrive and the mesh to form (WEBCCL_CONNECT_TIMEOUT_MS). */
  connectTimeoutMs: number;
  /** Run the store and the mesh over TLS (WEBCCL_TLS); plain when absent. */
  tls?: WireTls;
  /** What carries the mesh (WEBCCL_TRANSPORT; default tcp). */
  carrier?: CarrierName;
  /** This rank offers to run its ops on a network progress thread, in its mode (see meet.ts). */
  progress?: 'auto' | 'thread';
  /** The job id was given (WEBCCL_JOB_ID): kept even where MASTER_PORT turns out to be webccl serve's. */
  keepJobId?: boolean;
}

export interface Rendezvous {
  transport: Mesh;
  /** Node index of every world rank (ranks with the same index share memory). */
  nodeOf: number[];
  /** Every rank offered a network progress thread, and in which mode the job runs it (see meet.ts). */
  progress: false | 'auto' | 'thread';
  store: StoreClient;
  server?: StoreServer;
  /** What carries the mesh: the given carrier, else ws for a job webccl serve hosts, else tcp. */
  carrier: CarrierName;
  /** The job's id: the given one, or the one webccl serve hosts. */
  jobId: string;
  /** MASTER_PORT was webccl serve's HTTP port: the job it hosts (its store was joined). */
  served?: ServedJobInfo;
}

/** How long rank 0 keeps the store up after failing, so the others can read why. */
const ABORT_GRACE_MS = 1000;

/** Where this rank's transport listens: loopback for a job on one machine, else a reachable address. */
export function listenHost(masterAddr: string, ifname: string | undefined, towardMaster: string): string {
  const v6 = masterAddr.includes(':');
  if (ifname) {
    const addrs = networkInterfaces()[ifname];
    if (!addrs?.length)
      throw new WebcclError(
        'INVALID_ARGUMENT',
        `WEBCCL_SOCKET_IFNAME=${ifname}: no such interface (have ${Object.keys(networkInterfaces()).join(', ')})`,
      );
    const pick = addrs.find((a) => (a.family === 'IPv6') === v6) ?? addrs[0];
    return pick.address;
  }
  if (isLoopback(masterAddr)) return v6 ? '::1' : '127.0.0.1';
  return towardMaster.replace(/^::ffff:/, '');
}

export async function rendezvous(o: RendezvousOptions): Promise<Rendezvous> {
  const deadline = Date.now() + o.connectTimeoutMs;
  const where = hostPort(o.masterAddr, o.masterPort);
  // A connection that claims this job but fails the token proof is most likely one of its ranks
  // with the wrong WEBCCL_TOKEN: rank 0 fails at once naming the ranks that have not joined,
  // rather than at the connect deadline. (Whom it claims to be is not trusted for anything else.)
  const refusals = new RateLimitedLog(`store ${where}: refused connections`);
  let wrongToken: string | undefined;
  const onReject = (r: { remote: string; kind: 'auth' | 'protocol'; reason: string }) => {
    if (r.kind === 'auth' && r.reason === AUTH_FAIL_REASONS[2]) wrongToken ??= r.remote;
    refusals.warn(refusalLine(where, r));
  };
  // MASTER_PORT may be `webccl serve`'s own HTTP port (a job with browser ranks): rank 0 finds it
  // taken and asks it, the others' store connections meet its silence and ask it; either way the
  // rank then joins the store serve hosts, as its job (served-store.ts).
  let served: ServedJobInfo | undefined;
  const server =
    o.rank === 0 && !o.storeServed
      ? await startStoreServer({
          host: o.masterAddr,
          port: o.masterPort,
          fd: o.storeFd,
          token: o.token,
          jobId: o.jobId,
          tls: o.tls,
          onReject,
        }).catch(async (e: WebcclError) => {
          if (
            e.code === 'ADDRESS_IN_USE' &&
            !o.tls &&
            o.storeFd === undefined &&
            (served = await askServedJob(o.masterAddr, o.masterPort))
          )
            return undefined;
          throw within(
            e,
            e.code === 'ADDRESS_IN_USE'
              ? `rank 0 cannot serve the rendezvous store: another program holds MASTER_PORT=${o.masterPort} (give a free MASTER_PORT, or the port of a \`webccl serve --token\` to join the job it hosts)`
              : 'rank 0 cannot serve the rendezvous store',
          );
        })
      : undefined;
  const jobOf = (s: ServedJobInfo | undefined) => (s && !o.keepJobId ? s.jobId : o.jobId);
  const connect = (s: ServedJobInfo | undefined) =>
    StoreClient.connect({
      host: o.masterAddr,
      port: s?.storePort ?? o.masterPort,
      token: o.token,
      jobId: jobOf(s),
      timeoutMs: o.connectTimeoutMs,
      tls: o.tls,
    });
  const store = await connect(served)
    .catch((e: unknown) => {
      if (!(e instanceof ServedElsewhere)) throw e;
      served = e.info;
      return connect(served);
    })
    .catch((e: WebcclError) => {
      throw within(
        e,
        `rank ${o.rank} cannot reach the rendezvous store at ${served ? hostPort(o.masterAddr, served.storePort) : where}`,
      );
    });
  const jobId = jobOf(served);
  // Pages reach a job's other ranks over WebSocket only: a job webccl serve hosts runs on ws.
  const carrier = o.carrier ?? (served ? 'ws' : 'tcp');
  let transport: Mesh | undefined;
  try {
    const steps = { ...o, jobId, carrier };
    await agreeOnSize(store, steps);
    await agreeOnCarrier(store, steps);
    transport = await listenMesh(carrier, {
      rank: o.rank,
      size: o.size,
      jobId,
      token: o.token,
      nchannels: o.nchannels,
      timeoutMs: o.connectTimeoutMs,
      tls: o.tls,
      host: listenHost(o.masterAddr, o.ifname, store.localAddress),
    });
    const tlsNote = o.tls ? `, TLS keyed by the ${o.tls.keyedBy === 'token' ? 'job token' : 'certificates'}` : '';
    const { nodeOf, progress } = await meetAndConnect(
      store,
      transport,
      steps,
      deadline,
      where,
      () => wrongToken,
      tlsNote,
    );
    // From here the job's ops keep the process alive (their deadline timers); an idle mesh or
    // store must not keep a rank whose script has ended.
    for (const h of [transport, store, server]) h?.unref();
    return { transport, nodeOf, progress, store, server, carrier, jobId, ...(served && { served }) };
  } catch (e) {
    transport?.close();
    await tellAbort(store, o.rank, e);
    // Rank 0 serves the store: keep it up while the others poll for the cause (every 250 ms).
    if (server) await new Promise((r) => setTimeout(r, ABORT_GRACE_MS));
    void store.close();
    void server?.close();
    throw e;
  }
}

export interface MeshOptions {
  rank: number;
  size: number;
  jobId: string;
  token: string;
  nchannels: number;
  masterAddr: string;
  ifname?: string;
  tls?: WireTls;
  /** What carries the mesh (WEBCCL_TRANSPORT; default tcp). */
  carrier?: CarrierName;
  timeoutMs: number;
}

/**
 * A new mesh among `size` ranks of a job whose store is up (a communicator shrunk after a
 * failure): each listens, publishes its address under `prefix`, waits for the others' (naming
 * the ranks that do not come within the deadline) and connects.
 */
export async function meshAt(store: StoreClient, o: MeshOptions, prefix: string): Promise<Mesh> {
  const transport = await listenMesh(o.carrier ?? 'tcp', {
    rank: o.rank,
    size: o.size,
    jobId: o.jobId,
    token: o.token,
    nchannels: o.nchannels,
    timeoutMs: o.timeoutMs,
    tls: o.tls,
    host: listenHost(o.masterAddr, o.ifname, store.localAddress),
  });
  return connectAt(store, transport, o, prefix);
}
