// Groups: createGroup and split on one node (in-process ranks) and across nodes (TCP over
// loopback): membership, rank mapping, independence of groups, mismatches, memory.
import { describe, expect, it } from 'vitest';
import { Communicator } from '../../src/api/communicator.js';
import { leaveNode } from '../../src/core/node.js';
import { commBlockBytes, N, NODE_BASE } from '../../src/core/shm-map.js';
import { joinNode } from '../../src/engine/context.js';
import { createNode } from '../../src/progress/create-node.js';
import { inprocRanks, settleAll } from '../helpers/inproc.js';
import { destroyAll, netRanks } from '../helpers/net-world.js';

/** Every rank forms its group at once (they share this thread). */
const formAll = (comms: Communicator[], f: (c: Communicator, r: number) => Promise<Communicator | null>) =>
  Promise.all(comms.map(f));

/** Runs allReduce(sum) of [world rank + 1, ...] on every member; checks the sum of its members. */
async function checkSum(groups: (Communicator | null)[], worldOf: (g: Communicator) => number[], n = 5): Promise<void> {
  const live = groups.filter((g): g is Communicator => g !== null);
  const xs = live.map((g) => Float32Array.from({ length: n }, (_, i) => g.worldRank(g.rank) + 1 + i));
  const errs = await settleAll(live.map((g, i) => g.allReduce(xs[i])));
  expect(errs.filter(Boolean)).toEqual([]);
  live.forEach((g, i) => {
    const ws = worldOf(g);
    expect(Array.from(xs[i])).toEqual(Array.from({ length: n }, (_, j) => ws.reduce((a, w) => a + w + 1 + j, 0)));
  });
}

const membersOf = (g: Communicator) => Array.from({ length: g.size }, (_, r) => g.worldRank(r));

describe('groups on one node', () => {
  it("a group's block freed by the member that did not allocate it: an op on a view into the memory it left runs (no stale entry taken for a corrupt heap)", async () => {
    const [a, b] = inprocRanks(2);
    const before = a.alloc('u8', 64);
    const [ga, gb] = await formAll([a, b], (c) => c.createGroup([0, 1]));
    ga!.destroy(); // rank 0 allocated the group's block (right after `before`) ...
    gb!.destroy(); // ... rank 1 lets go of it last and frees it
    a.free(before);
    // From where `before` was, over the block's old header, and inside the hole the two left.
    const big = a.alloc('f32', commBlockBytes(2, 4096) / 4) as Float32Array;
    const view = big.subarray(64); // starts inside the old block
    view.fill(1);
    const errs = await settleAll([a.allReduce(view), b.allReduce(new Float32Array(view.length).fill(2))]);
    expect(errs).toEqual([undefined, undefined]);
    expect([view[0], view[view.length - 1]]).toEqual([3, 3]);
  });

  it('abort() of a destroyed group does nothing: the group formed next in its freed block runs (the abort used to be written there)', async () => {
    const [a, b] = inprocRanks(2);
    const [ga, gb] = await formAll([a, b], (c) => c.createGroup([0, 1]));
    ga!.destroy();
    gb!.destroy();
    const [ha, hb] = await formAll([a, b], (c) => c.createGroup([0, 1]));
    const blockOf = (g: Communicator) => (g as unknown as { ctx: { comm: number } }).ctx.comm;
    expect(blockOf(ha!)).toBe(blockOf(ga!)); // the same memory, now the new group's
    ga!.abort('too late');
    gb!.abort('too late');
    const x = [new Float32Array(3).fill(1), new Float32Array(3).fill(2)];
    expect(await settleAll([ha!.allReduce(x[0]), hb!.allReduce(x[1])])).toEqual([undefined, undefined]);
    expect(Array.from(x[0])).toEqual([3, 3, 3]);
    ha!.destroy();
    hb!.destroy();
  });

  it('createGroup: members get a communicator with their own numbering, others null', async () => {
    const world = inprocRanks(4);
    const gs = await formAll(world, (c) => c.createGroup(['rank3', 1]));
    expect(gs.map((g) => (g ? [g.rank, g.size] : null))).toEqual([null, [1, 2], null, [0, 2]]);
    expect(gs[3]!.worldRank(1)).toBe(1);
    expect(gs[1]!.groupRank(3)).toBe(0);
    expect(gs[1]!.groupRank(2)).toBe(-1);
    await checkSum(gs, membersOf);
    for (const g of gs) g?.destroy();
  });

  it('split: 2-D grid of row and column groups on 4 and 8 ranks, ops in opposite orders', async () => {
    for (const n of [4, 8]) {
      const world = inprocRanks(n);
      const cols = 2;
      const rows = await formAll(world, (c, r) => c.split(Math.floor(r / cols), r));
      const columns = await formAll(world, (c, r) => c.split(r % cols, -r)); // key reverses the order
      expect(columns[0]!.rank).toBe(columns[0]!.size - 1);
      // Even ranks issue row then column; odd ranks column then row: no deadlock.
      const xs = world.map((_, r) => [Float64Array.of(r + 1), Float64Array.of(r + 1)]);
      const works = world.flatMap((_, r) => {
        const a = rows[r]!.allReduce(xs[r][0]);
        const b = columns[r]!.allReduce(xs[r][1]);
        return r % 2 ? [b, a] : [a, b];
      });
      expect((await settleAll(works)).filter(Boolean)).toEqual([]);
      world.forEach((_, r) => {
        expect(xs[r][0][0]).toBe(membersOf(rows[r]!).reduce((a, w) => a + w + 1, 0));
        expect(xs[r][1][0]).toBe(membersOf(columns[r]!).reduce((a, w) => a + w + 1, 0));
      });
      for (const g of [...rows, ...columns]) g?.destroy();
    }
  });

  it('disagreeing member lists are a MISMATCH naming the ranks', async () => {
    const world = inprocRanks(3);
    const errs = await Promise.all(
      world.map((c, r) =>
        c.createGroup(r === 2 ? [0, 2] : [0, 1]).then(
          () => undefined,
          (e) => e,
        ),
      ),
    );
    for (const e of errs) expect(e).toMatchObject({ code: 'MISMATCH', details: { field: 'ranks', ranks: [0, 2] } });
  });

  it('a rank that never calls createGroup: TIMEOUT naming it', async () => {
    const world = inprocRanks(3, { timeoutMs: 1500 });
    const errs = await Promise.all(
      world.slice(0, 2).map((c) =>
        c.createGroup([0, 1]).then(
          () => undefined,
          (e) => e,
        ),
      ),
    );
    // The first to time out says TIMEOUT; it aborts the communicator, so the other may hear that first.
    for (const e of errs) {
      if (e.code === 'TIMEOUT') expect(e.details.missing).toEqual([2]);
      else expect(e).toMatchObject({ code: 'ABORTED', details: { cause: 'timeout', detail: 2 } });
    }
    expect(errs.map((e) => e.code)).toContain('TIMEOUT');
    expect(errs[0].message).toMatch(/^createGroup \(its allGather over the parent communicator\)/);
  });

  it('split: null or negative colors get null; equal keys keep the parent order', async () => {
    const world = inprocRanks(5);
    const colors = [0, null, 1, -3, 0];
    const gs = await formAll(world, (c, r) => c.split(colors[r], 7)); // one key for all: parent order
    expect(gs.map((g) => (g ? membersOf(g) : null))).toEqual([[0, 4], null, [2], null, [0, 4]]);
    await checkSum(gs, membersOf);
    const errs = await Promise.all(
      world.map((c) =>
        c.split(1.5 as any).then(
          () => undefined,
          (e) => e.code,
        ),
      ),
    );
    expect(errs).toEqual(Array(5).fill('INVALID_ARGUMENT'));
  });

  it('creating and destroying 100 groups leaves the heap flat', async () => {
    const world = inprocRanks(2);
    const once = async () => {
      const gs = await formAll(world, (c) => c.createGroup([0, 1]));
      await checkSum(gs, membersOf, 3);
      for (const g of gs) g!.destroy();
    };
    const memory = (world[0] as unknown as { ctx: { core: { memory: WebAssembly.Memory } } }).ctx.core.memory;
    const top = () => [new Int32Array(memory.buffer)[(NODE_BASE + N.HEAP_TOP) >> 2], memory.buffer.byteLength];
    await once();
    const before = top();
    for (let i = 0; i < 100; i++) await once();
    expect(top()).toEqual(before);
  });
});

describe('groups across nodes', () => {
  it('2 nodes x 2 ranks: a group within a node, one across nodes, and a grid', async () => {
    const world = await netRanks(2, 2, { timeoutMs: 30_000 });
    try {
      const inNode = await Promise.all(world.map((c) => c.createGroup([2, 3])));
      expect(inNode.map((g) => g?.acrossNodes ?? null)).toEqual([null, null, false, false]);
      const across = await Promise.all(world.map((c) => c.createGroup([1, 2])));
      expect(across.map((g) => g?.acrossNodes ?? null)).toEqual([null, true, true, null]);
      const all = await Promise.all(world.map((c) => c.createGroup([3, 2, 1, 0])));
      for (const gs of [inNode, across, all]) {
        const live = gs.filter((g): g is Communicator => g !== null);
        const xs = live.map((g) => Float32Array.of(g.worldRank(g.rank) + 1, 7));
        await Promise.all(live.map((g, i) => g.allReduce(xs[i])));
        live.forEach((g, i) =>
          expect(Array.from(xs[i])).toEqual([membersOf(g).reduce((a, w) => a + w + 1, 0), 7 * g.size]),
        );
      }
      for (const g of [...inNode, ...across, ...all]) g?.destroy();
    } finally {
      destroyAll(world);
    }
  });

  it("splitByNode: each rank gets its node's ranks, of the world and of a group across nodes; on one node, everyone", async () => {
    const world = await netRanks(2, 2, { timeoutMs: 30_000 });
    try {
      const nodes = await Promise.all(world.map((c) => c.splitByNode()));
      expect(nodes.map((g) => [membersOf(g), g.rank, g.acrossNodes])).toEqual([
        [[0, 1], 0, false],
        [[0, 1], 1, false],
        [[2, 3], 0, false],
        [[2, 3], 1, false],
      ]);
      await checkSum(nodes, membersOf);
      // A group in an order of its own: its members on each node, in the group's order.
      const group = await Promise.all(world.map((c) => c.createGroup([3, 1, 2])));
      const inGroup = await Promise.all(group.map((g) => g?.splitByNode() ?? null));
      expect(inGroup.map((g) => (g ? membersOf(g) : null))).toEqual([null, [1], [3, 2], [3, 2]]);
      await checkSum(inGroup, membersOf);
      const bad = await Promise.all(
        world.map((c) =>
          c.splitByNode({ timeout: 5 } as never).then(
            () => undefined,
            (e) => e.code,
          ),
        ),
      );
      expect(bad).toEqual(Array(4).fill('INVALID_ARGUMENT'));
      for (const g of [...nodes, ...group, ...inGroup]) g?.destroy();
    } finally {
      destroyAll(world);
    }
    const one = inprocRanks(3);
    const all = await formAll(one, (c) => c.splitByNode());
    expect(all.map((g) => g && [membersOf(g), g.rank])).toEqual([
      [[0, 1, 2], 0],
      [[0, 1, 2], 1],
      [[0, 1, 2], 2],
    ]);
    await checkSum(all, membersOf);
  });
});

describe('group formation across nodes', () => {
  it('2 nodes x 2 ranks: disagreeing member lists are a MISMATCH naming the ranks on every rank', async () => {
    const world = await netRanks(2, 2, { timeoutMs: 30_000 });
    try {
      const errs = await Promise.all(
        world.map((c, r) =>
          c.createGroup(r === 3 ? [0, 3] : [0, 1]).then(
            () => undefined,
            (e) => e,
          ),
        ),
      );
      for (const e of errs)
        expect(e).toMatchObject({ code: 'MISMATCH', details: { field: 'ranks', ranks: [0, 3], worldRanks: [0, 3] } });
    } finally {
      destroyAll(world);
    }
  });
});

describe('shrink', () => {
  it('on one node: the survivors of a dead rank get a working communicator without it', async () => {
    const node = createNode({ nranks: 4, slotBytes: 4096 });
    const world = [0, 1, 2, 3].map((r) => new Communicator(joinNode(node, r, { spinUs: 0 }), { timeoutMs: 20_000 }));
    // A group of ranks 1..3; rank 2 dies while the others wait for it in an allReduce.
    const gs = await formAll(world, (c) => c.createGroup([3, 2, 1]));
    const live = [gs[1]!, gs[3]!];
    const works = live.map((g) => g.allReduce(new Float32Array(8).fill(1)));
    leaveNode(node, 2, 'died');
    const errs = await settleAll(works);
    for (const e of errs)
      expect(e).toMatchObject({ code: 'CONNECTION_CLOSED', details: { peer: 1, died: true, worldRanks: [3, 2, 1] } });
    const shrunk = await Promise.all(live.map((g) => g.shrink()));
    expect(shrunk.map((s) => [s.rank, s.size, s.worldRank(0), s.worldRank(1)])).toEqual([
      [1, 2, 3, 1],
      [0, 2, 3, 1],
    ]);
    const xs = shrunk.map((s) => Float64Array.of(s.worldRank(s.rank), 1));
    expect((await settleAll(shrunk.map((s, i) => s.allReduce(xs[i])))).filter(Boolean)).toEqual([]);
    for (const x of xs) expect(Array.from(x)).toEqual([4, 2]);
    expect(await live[0].shrink().catch((e) => e.code)).toBe('INVALID_ARGUMENT'); // once per communicator
    // The world shrinks too, and every block is freed once the survivors destroy what they hold.
    const ws = await Promise.all([0, 1, 3].map((r) => world[r].shrink()));
    expect(ws.map((w) => w.size)).toEqual([3, 3, 3]);
    expect((await settleAll(ws.map((w) => w.barrier()))).filter(Boolean)).toEqual([]);
    const top = () => new Int32Array(node.memory.buffer)[(NODE_BASE + N.HEAP_TOP) >> 2];
    for (const c of [...shrunk, ...live, ...ws]) c.destroy();
    expect(top()).toBe(new Int32Array(node.memory.buffer)[(NODE_BASE + N.HEAP_START) >> 2]);
  });

  it('shrink() with ops still pending (a Promise.all that rejected at the first failure leaves the rest in flight): they end first, ABORTED, then the shrink goes on', async () => {
    for (const progress of ['auto', 'caller'] as const) {
      const node = createNode({ nranks: 2, slotBytes: 4096 });
      const world = [0, 1].map(
        (r) => new Communicator(joinNode(node, r, { spinUs: 0 }), { timeoutMs: 20_000, progress }),
      );
      // Rank 0's allReduce waits for rank 1, which never joins it; rank 1's recv for a send rank 0 never makes.
      const pending = [world[0].allReduce(new Float32Array(4).fill(1)), world[1].recv(new Float32Array(4), 0)];
      const shrunk = await Promise.all(world.map((c) => c.shrink()));
      const errs = await settleAll(pending);
      for (const e of errs) expect(e, progress).toMatchObject({ code: 'ABORTED' });
      expect(shrunk.map((c) => [c.rank, c.size])).toEqual([
        [0, 2],
        [1, 2],
      ]);
      const xs = shrunk.map((c) => Float32Array.of(c.rank + 1));
      expect((await settleAll(shrunk.map((c, i) => c.allReduce(xs[i])))).filter(Boolean)).toEqual([]);
      expect(xs.map((x) => x[0])).toEqual([3, 3]);
      for (const c of [...shrunk, ...world]) c.destroy();
    }
  });

  it('a rank taken for dead that is alive after all is told so', async () => {
    const node = createNode({ nranks: 2, slotBytes: 4096 });
    const world = [0, 1].map((r) => new Communicator(joinNode(node, r, { spinUs: 0 }), { timeoutMs: 20_000 }));
    leaveNode(node, 1, 'died'); // still running here
    const outcome = await Promise.all(
      world.map((c) =>
        c.shrink().then(
          (s) => s.size,
          (e) => [e.code, e.details.members],
        ),
      ),
    );
    expect(outcome).toEqual([1, ['ABORTED', [0]]]);
  });
});
