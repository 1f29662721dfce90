// shrink(): after ranks died (or ended), the survivors of a communicator get a new one without
// them (NCCL's ncclCommShrink, ULFM's MPI_Comm_shrink). The survivors must agree on who is
// left, so one of them decides and the others adopt its decision:
//   - on one node, through the communicator's block: the first survivor to claim it reads the
//     node header's LEFT words (a rank whose thread ended, or died under --fault-tolerant),
//     allocates the new block and publishes the member mask with it;
//   - across nodes, through the job's rendezvous store: each survivor says it is alive and
//     whom it saw die (its failure names them, or their connections closed without an ABORT);
//     once every rank is heard from or suspected (or the deadline passes), the first to
//     compare-and-set the member list decides it, and the members connect anew (the failure
//     closed the old connections).

import { fail, WebcclError } from '../core/errors.js';
import { freshI32 } from '../core/fresh-buffer.js';
import { C, N, NODE_BASE } from '../core/shm-map.js';
import type { JobStore } from '../engine/job.js';
import type { NetPlacement, Placement } from '../engine/placement.js';
import { NetEngine } from '../net/engine.js';
import { allocCommBlock } from '../shm/block.js';
import { TransportSpaces } from '../transport/spaces.js';
import { type Former, type GroupMember, type GroupOptions, nodeMatesGroup, oneNodeGroup } from './form.js';

const text = (b: Uint8Array) => new TextDecoder().decode(b);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function shrinkComm<C extends GroupMember, O extends GroupOptions>(
  f: Former<C, O>,
  failure: WebcclError | undefined,
  opts: O,
  timeoutMs: number,
): Promise<C> {
  // Shrinking revokes the communicator (ULFM's revoke, NCCL's shrink with abort): a survivor
  // still in an op of it, waiting on a live rank that has moved on to shrink, fails at once and
  // comes to the agreement, rather than at its deadline, after the others have decided without
  // it. What this rank saw fail first (`failure`) still names the suspects. This rank's own ops
  // still pending (what a Promise.all that rejected at its first failure leaves in flight) end
  // with the revoke too — with the failure met, else ABORTED — and are waited for first.
  const pending = f.unsettled();
  if (!failure || pending.length) f.comm.abort(`rank ${f.comm.rank} shrinks the communicator`);
  await Promise.allSettled(pending.map((w) => w.wait()));
  // The store's and the new mesh's sockets do not keep a process alive (an idle job must not):
  // this timer does, until the survivors have agreed and connected.
  const keepAlive = setInterval(() => undefined, 1000);
  try {
    return await (f.comm.acrossNodes ? acrossNodes(f, failure, opts, timeoutMs) : oneNode(f, opts, timeoutMs));
  } finally {
    clearInterval(keepAlive);
  }
}

/** The survivors' communicator, built from the old one's placement restricted to `members` (old ranks). */
function survivors(p: Placement, members: number[]): Placement {
  return {
    worldRanks: members.map((r) => p.worldRanks[r]),
    nodeOf: members.map((r) => p.nodeOf[r]),
    localOf: members.map((r) => p.localOf[r]),
    space: 0,
    group: true,
    id: `${p.id}.shrunk`,
  };
}

function excluded(rank: number, members: number[]): never {
  return fail(
    'ABORTED',
    `shrink: rank ${rank} is not among the survivors the others agreed on (${members.join(', ')}): it was taken for dead`,
    { members },
  );
}

// ---------------------------------------------------------------- one node

async function oneNode<C extends GroupMember, O extends GroupOptions>(
  f: Former<C, O>,
  opts: O,
  timeoutMs: number,
): Promise<C> {
  const { comm, ctx } = f;
  const p = comm.placement;
  const view = () => freshI32(ctx.core.memory);
  const at = (field: number) => (ctx.comm + field) >> 2;
  if (Atomics.compareExchange(view(), at(C.SHRINK_CLAIM), 0, 1) === 0) {
    const alive = p.localOf.flatMap((l, r) =>
      Atomics.load(view(), (NODE_BASE + N.LEFT + 4 * l) >> 2) === 0 ? [r] : [],
    );
    const block = allocCommBlock(ctx, alive.length);
    const i32 = view();
    for (const r of alive) i32[at(C.SHRINK_MASK) + (r >> 5)] |= 1 << (r & 31);
    // The dead never destroy their communicator: count them as released, so the survivors free it.
    if (p.group) Atomics.add(i32, at(C.RELEASED), p.localOf.length - alive.length);
    Atomics.store(i32, at(C.SHRINK_BLOCK), block);
  }
  const deadline = performance.now() + timeoutMs;
  let block = 0;
  for (let pause = 0.125; (block = Atomics.load(view(), at(C.SHRINK_BLOCK))) === 0; pause = Math.min(8, pause * 2)) {
    if (performance.now() > deadline)
      fail('TIMEOUT', `shrink: the survivor that claimed the shrink did not publish it within ${timeoutMs} ms`);
    await sleep(pause);
  }
  const i32 = view();
  const members = p.localOf.flatMap((_, r) => ((i32[at(C.SHRINK_MASK) + (r >> 5)] >>> (r & 31)) & 1 ? [r] : []));
  const rank = members.indexOf(comm.rank);
  if (rank < 0) excluded(comm.rank, members);
  return oneNodeGroup(f, block, rank, survivors(p, members), opts);
}

// ---------------------------------------------------------------- across nodes

async function acrossNodes<C extends GroupMember, O extends GroupOptions>(
  f: Former<C, O>,
  failure: WebcclError | undefined,
  opts: O,
  timeoutMs: number,
): Promise<C> {
  const { comm, ctx } = f;
  const p = comm.placement;
  const net = p.net;
  const store = net?.store;
  if (!net || !store || !net.remesh)
    return fail('UNSUPPORTED', 'shrink: this communicator has no rendezvous store to agree on the survivors through');
  const prefix = `webccl/shrink/${p.id}`;
  // Suspects: whom this rank's failure names, and whom its connections see end without an ABORT
  // (a death no op of this rank met: without them the agreement would wait for its deadline).
  const netOf = p.netRanks ?? p.worldRanks;
  const departed = () => {
    const gone = new Set(net.spaces.base.departed?.() ?? []);
    return netOf.flatMap((n, r) => (gone.has(n) && r !== comm.rank ? [r] : []));
  };
  const members = await agree({
    store,
    prefix,
    rank: comm.rank,
    size: comm.size,
    suspects: [...suspectsIn(failure, comm.rank), ...departed()],
    departed,
    timeoutMs,
  }).catch((e: unknown) => {
    throw WebcclError.is(e) && e.code === 'CONNECTION_CLOSED'
      ? new WebcclError(
          'CONNECTION_CLOSED',
          `shrink: the job's rendezvous store is gone (world rank 0 serves it; it must survive for the others to shrink): ${e.reason}`,
          e.details,
        )
      : e;
  });
  const rank = members.indexOf(comm.rank);
  if (rank < 0) excluded(comm.rank, members);
  const placement = survivors(p, members);
  // This node's survivors meet over shared memory, in a block the first of them allocates.
  const here = members.flatMap((r, i) => (p.nodeOf[r] === p.nodeOf[comm.rank] ? [i] : []));
  let block = 0;
  if (here.length > 1 || here.length === members.length) {
    const key = `${prefix}/block/${p.nodeOf[comm.rank]}`;
    if (here[0] === rank) await store.set(key, String(allocCommBlock(ctx, here.length)));
    block = Number(text(await store.get(key, { timeoutMs })));
  }
  if (here.length === members.length) return oneNodeGroup(f, block, rank, placement, opts);
  const local = here.length > 1 ? nodeMatesGroup(f, block, here, rank, placement, opts.timeoutMs) : undefined;
  const transport = await net.remesh(`${prefix}/mesh`, rank, members.length);
  const spaces = new TransportSpaces(transport);
  const netPlace: NetPlacement = { spaces, store, remesh: net.remesh, oneHost: net.oneHost };
  placement.net = netPlace;
  // The new connections number the survivors 0..m−1 (their groups open tag spaces on them so).
  placement.netRanks = members.map((_, i) => i);
  placement.release = () => local?.destroy();
  const view = spaces.open(0, placement.netRanks, rank);
  return f.make(ctx, opts, {
    rank,
    size: members.length,
    placement,
    engine: (counters, algo, ms) =>
      new NetEngine({
        ctx,
        world: {
          rank,
          size: members.length,
          transport: view,
          nodeOf: [...placement.nodeOf],
          store,
          oneHost: net.oneHost,
        },
        local,
        counters,
        algo,
        timeoutMs: ms,
      }),
  });
}

/**
 * Ranks a failure names as gone: the peer whose connections closed (or a peer's ABORT names), or the ranks missing at a
 * deadline.
 */
function suspectsIn(e: WebcclError | undefined, self: number): number[] {
  if (!e) return [];
  const d = e.details;
  const list = (v: unknown) => (Array.isArray(v) ? (v as number[]) : []);
  const named = [
    ...(e.code === 'CONNECTION_CLOSED' && Number.isInteger(d.peer) ? [d.peer as number] : []),
    ...list(d.missing),
    ...list(d.gone),
  ];
  return [...new Set(named)].filter((r) => Number.isInteger(r) && r !== self);
}

/**
 * The survivors, as every survivor will see them: each says it is alive (with whom it saw
 * die); once every rank is heard from or suspected by someone heard from or by this rank's
 * connections (`departed`, asked again each turn), or the deadline has passed, the first
 * compare-and-set of the member list decides.
 */
async function agree(a: {
  store: JobStore;
  /** The store keys' prefix, the communicator's own. */
  prefix: string;
  rank: number;
  size: number;
  /** The ranks this rank saw die. */
  suspects: number[];
  /** The ranks whose connections ended without an ABORT (asked again each turn). */
  departed: () => number[];
  timeoutMs: number;
}): Promise<number[]> {
  const { store, prefix, rank, size, suspects, departed, timeoutMs } = a;
  const alive = (r: number) => `${prefix}/alive/${r}`;
  await store.set(alive(rank), JSON.stringify(suspects));
  const heard = new Map<number, number[]>();
  const suspected = new Set(suspects);
  const deadline = performance.now() + timeoutMs;
  for (let pause = 2; ; pause = Math.min(100, pause * 2)) {
    for (let r = 0; r < size; r++) {
      if (heard.has(r)) continue;
      const there = await store.wait([alive(r)], 0).then(
        () => true,
        (e: unknown) => {
          if (WebcclError.is(e) && e.code === 'STORE_TIMEOUT') return false;
          throw e;
        },
      );
      if (!there) continue;
      const said = JSON.parse(text(await store.get(alive(r), { timeoutMs }))) as number[];
      heard.set(r, said);
      for (const s of said) suspected.add(s);
    }
    for (const s of departed()) suspected.add(s);
    const waiting = Array.from({ length: size }, (_, r) => r).filter((r) => !heard.has(r) && !suspected.has(r));
    if (!waiting.length || performance.now() > deadline) break;
    await sleep(pause);
  }
  const proposal = [...heard.keys()].sort((a, b) => a - b);
  const decided = await store.compareSet(`${prefix}/members`, null, JSON.stringify(proposal));
  return JSON.parse(text(decided ?? new TextEncoder().encode(JSON.stringify(proposal)))) as number[];
}
