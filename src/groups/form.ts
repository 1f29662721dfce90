// Forming groups from a communicator (createGroup, split). Every rank of the parent takes part,
// in two allGathers over the parent:
//   1. what each rank asked for (the member list's hash, or its color and key): ranks that
//      disagree are named, with what each passed, before anything is allocated;
//   2. where each group lives: on each node a group has ranks on, its first rank there
//      allocates the group's communicator block in the node memory; a group on several nodes
//      gets a tag space on the job's connections, chosen by its first rank.
// A missing call fails the parent's allGather with TIMEOUT naming the ranks that did not come.
import { fail, WebcclError, within } from '../core/errors.js';
import { showValue } from '../core/options.js';
import type { RankContext } from '../engine/context.js';
import type { CommParts } from '../engine/engine.js';
import type { NodeMates } from '../engine/node-mates.js';
import type { Placement } from '../engine/placement.js';
import { settledWithoutBlocking, type Work } from '../engine/work.js';
import { netEngineFor } from '../progress/net-engine-for.js';
import { nodeEngine } from '../progress/node-engine.js';
import { allocCommBlock, groupContext, releaseCommBlock } from '../shm/block.js';

/** What forming a group reads of the options of the communicator it makes. */
export interface GroupOptions {
  timeoutMs?: number;
  progress?: unknown;
}

/**
 * What forming a group needs of a communicator: the parent's, and the groups it makes (a node's
 * members among them serve a group across nodes as its node mates).
 */
export interface GroupMember extends NodeMates {
  readonly acrossNodes: boolean;
  readonly placement: Placement;
  destroy(): void;
}

/** What forming a group needs of its parent (the Communicator class is C, its options O). */
export interface Former<C extends GroupMember = GroupMember, O extends GroupOptions = GroupOptions> {
  comm: C;
  ctx: RankContext;
  make(ctx: RankContext, opts: O, parts: CommParts): C;
  /** The communicator's ops issued and not ended yet (shrink() ends them first). */
  unsettled(): Work[];
}

export async function createGroup<C extends GroupMember, O extends GroupOptions>(
  f: Former<C, O>,
  ranks: unknown,
  opts: O,
): Promise<C | null> {
  const parent = f.comm;
  const list = memberList(ranks, parent.size);
  const asked = await exchange(parent, [...listHash(list), list.length, list[0] ?? -1], 'createGroup');
  const differs = asked.findIndex((a) => a.some((v, i) => v !== asked[0][i]));
  if (differs >= 0) {
    const said = (r: number) => `rank ${r} passed ${asked[r][2]} rank(s) starting with ${asked[r][3]}`;
    const same =
      asked[differs][2] === asked[0][2] && asked[differs][3] === asked[0][3]
        ? ' (same length and first rank, other members)'
        : '';
    fail(
      'MISMATCH',
      `createGroup: ranks disagree on the member list: ${said(0)}, ${said(differs)}${same}; every rank must pass the same list`,
      {
        field: 'ranks',
        ranks: [0, differs],
        worldRanks: [parent.placement.worldRanks[0], parent.placement.worldRanks[differs]],
      },
    );
  }
  return form(f, [list], opts);
}

export async function splitGroups<C extends GroupMember, O extends GroupOptions>(
  f: Former<C, O>,
  color: unknown,
  key: unknown,
  opts: O,
): Promise<C | null> {
  const parent = f.comm;
  if (color !== null && !Number.isSafeInteger(color))
    fail('INVALID_ARGUMENT', `split: color must be an integer (null or negative: no group), got ${showValue(color)}`, {
      option: 'color',
      value: color,
    });
  if (!Number.isSafeInteger(key))
    fail('INVALID_ARGUMENT', `split: key must be an integer, got ${showValue(key)}`, { option: 'key', value: key });
  const c = color === null || (color as number) < 0 ? -1 : (color as number);
  const asked = await exchange(parent, [c, key as number], 'split');
  const byColor = new Map<number, number[]>();
  asked.forEach(([col], r) => {
    if (col >= 0) (byColor.get(col) ?? byColor.set(col, []).get(col)!).push(r);
  });
  // Ordered by key, ties by rank in the parent (MPI_Comm_split's rule).
  const groups = [...byColor.values()].map((g) => g.sort((a, b) => asked[a][1] - asked[b][1] || a - b));
  return form(f, groups, opts);
}

/** `ranks` as parent ranks: numbers or 'rankN' strings, in range, without repeats. */
function memberList(ranks: unknown, size: number): number[] {
  if (!Array.isArray(ranks) || ranks.length === 0)
    fail(
      'INVALID_ARGUMENT',
      `createGroup: ranks must be a non-empty array of ranks (numbers, or 'rank0' style strings), got ${showValue(ranks)}`,
      { value: ranks },
    );
  const seen = new Set<number>();
  return ranks.map((v: unknown) => {
    const r = typeof v === 'string' && /^rank\d+$/.test(v) ? Number(v.slice(4)) : v;
    if (!Number.isInteger(r) || (r as number) < 0 || (r as number) >= size) {
      fail(
        'INVALID_ARGUMENT',
        `createGroup: ${showValue(v)} is not a rank of this communicator (0..${size - 1}, or 'rank0'..'rank${size - 1}')`,
        { value: v },
      );
    }
    if (seen.has(r as number))
      fail('INVALID_ARGUMENT', `createGroup: rank ${r as number} is listed twice`, { value: v });
    seen.add(r as number);
    return r as number;
  });
}

/** Two 32-bit hashes of a rank list (FNV-1a and a multiplicative one): equal lists, equal hashes. */
function listHash(list: number[]): [number, number] {
  let a = 0x811c9dc5,
    b = 0x9e3779b9;
  for (const r of list) {
    a = Math.imul(a ^ r, 0x01000193) >>> 0;
    b = (Math.imul(b, 31) + r + 1) >>> 0;
  }
  return [a, b];
}

let spacesMade = 0;
let formedHere = 0;
/** A tag space no other group of the job has: (world rank of the group's first rank, its count). */
function newSpace(worldRank: number): number {
  spacesMade = (spacesMade + 1) % (1 << 20);
  return ((worldRank + 1) * (1 << 20) + spacesMade) % 0x7fffffff || 1;
}

/** Makes this rank's group of `groups` (parent ranks, in group order): null when it is in none. */
async function form<C extends GroupMember, O extends GroupOptions>(
  f: Former<C, O>,
  groups: number[][],
  opts: O,
): Promise<C | null> {
  const parent = f.comm;
  const p = parent.placement;
  const me = parent.rank;
  const mine = groups.find((g) => g.includes(me));
  let addr = 0;
  let space = 0;
  // With network progress threads, the node's members' threads meet in a block of their own.
  let threadAddr = 0;
  if (mine) {
    const here = mine.filter((r) => p.nodeOf[r] === p.nodeOf[me]);
    const oneNode = here.length === mine.length;
    if (here[0] === me && (oneNode || here.length > 1)) addr = allocCommBlock(f.ctx, here.length);
    if (here[0] === me && !oneNode && here.length > 1 && p.net?.viaThread)
      threadAddr = allocCommBlock(f.ctx, here.length);
    if (mine[0] === me && !oneNode) space = newSpace(p.worldRanks[me]);
  }
  // The group's first rank numbers it: with its world rank, a name no other communicator of the job has.
  const serial = mine?.[0] === me ? ++formedHere : 0;
  let where: number[][];
  try {
    where = await exchange(parent, [addr, space, serial, threadAddr], 'forming the group');
  } catch (e) {
    for (const a of [addr, threadAddr]) if (a) f.ctx.heap.free(a);
    throw e;
  }
  if (!mine) return null;
  const placement: Placement = {
    worldRanks: mine.map((r) => p.worldRanks[r]),
    nodeOf: mine.map((r) => p.nodeOf[r]),
    localOf: mine.map((r) => p.localOf[r]),
    space: where[mine[0]][1],
    group: true,
    net: p.net,
    id: '',
    ...(p.netRanks && { netRanks: mine.map((r) => p.netRanks![r]) }),
  };
  placement.id = `${p.id}.${placement.worldRanks[0]}:${where[mine[0]][2]}`;
  const rank = mine.indexOf(me);
  const here = mine.flatMap((r, i) => (p.nodeOf[r] === p.nodeOf[me] ? [i] : []));
  const block = where[mine[here[0]]][0];
  if (here.length === mine.length) return oneNodeGroup(f, block, rank, placement, opts);
  const net = p.net ?? fail('INTERNAL', 'a group across nodes in a communicator without connections');
  // This node's members meet over shared memory in the hierarchical schedules.
  const local = here.length > 1 ? nodeMatesGroup(f, block, here, rank, placement, opts.timeoutMs) : undefined;
  // The members as the connections number them (world ranks, unless the parent was shrunk).
  const transport = net.spaces.open(
    placement.space,
    placement.netRanks ?? fail('INTERNAL', 'a group across nodes without its ranks on the connections'),
    rank,
  );
  placement.release = () => local?.destroy();
  const threadBlock = where[mine[here[0]]][3];
  const threadNode = threadBlock
    ? { block: threadBlock, rank: here.indexOf(rank), localOf: here.map((i) => placement.localOf[i]) }
    : undefined;
  return f.make(f.ctx, opts, {
    rank,
    size: mine.length,
    placement,
    engine: (counters, algo, timeoutMs) =>
      netEngineFor({
        ctx: f.ctx,
        net,
        world: { rank, size: mine.length, transport, nodeOf: [...placement.nodeOf], oneHost: net.oneHost },
        space: placement.space,
        members: placement.netRanks!,
        local,
        counters,
        algo,
        timeoutMs,
        threadNode,
      }),
  });
}

/**
 * The members of a group across nodes that share this rank's node (`here`: their group ranks,
 * `rank` this rank's), as a group of their own over `block`: the hierarchical schedules'
 * node phase runs on it.
 */
export function nodeMatesGroup<C extends GroupMember, O extends GroupOptions>(
  f: Former<C, O>,
  block: number,
  here: readonly number[],
  rank: number,
  placement: Placement,
  timeoutMs: number | undefined,
): C {
  const local: Placement = {
    ...placement,
    worldRanks: here.map((i) => placement.worldRanks[i]),
    nodeOf: here.map(() => 0),
    localOf: here.map((i) => placement.localOf[i]),
  };
  return oneNodeGroup(f, block, here.indexOf(rank), local, { timeoutMs } as O);
}

/** A group whose ranks share this node: a communicator over its block at `block`. */
export function oneNodeGroup<C extends GroupMember, O extends GroupOptions>(
  f: Former<C, O>,
  block: number,
  rank: number,
  placement: Placement,
  opts: O,
): C {
  const ctx = groupContext(f.ctx, block, rank, [...placement.localOf]);
  placement.release = () => releaseCommBlock(f.ctx, block, ctx.size);
  return f.make(ctx, opts, {
    rank,
    size: ctx.size,
    placement,
    engine: (counters, algo, timeoutMs) => nodeEngine(ctx, counters, { algo, timeoutMs, progress: opts.progress }),
  });
}

/** Every rank's `values` (numbers below 2^53), by rank: an allGather over the parent. */
async function exchange(parent: GroupMember, values: number[], what: string): Promise<number[][]> {
  const n = values.length;
  const out = new Float64Array(n * parent.size);
  await settled(parent.allGather(out, Float64Array.from(values))).catch((e: WebcclError) => {
    throw within(e, `${what} (its allGather over the parent communicator)`);
  });
  return Array.from({ length: parent.size }, (_, r) => Array.from(out.subarray(r * n, (r + 1) * n)));
}

/**
 * Completes `w` without blocking the thread: several ranks may share it (a page, a test), and
 * the one that blocks would wait for a peer that cannot run. Polls, yielding to the event loop
 * with growing pauses (group formation is rare; its ops are small).
 */
async function settled(w: Work): Promise<void> {
  return settledWithoutBlocking(w, 8).catch((e: unknown) => {
    throw WebcclError.is(e) ? e : new WebcclError('INTERNAL', String(e));
  });
}
