// Groups: createGroup and split on one node (in-process ranks) and across nodes (TCP over
// loopback): membership, rank mapping, independence of groups, mismatches, memory. Then under
// every launch form, with the built CLI: 4 worker threads (webccl run -n 4), 4 processes
// (--procs), and 2 nodes × 2 threads (--nnodes). The rank script
// (test/groups/fixtures/groups-check.mjs) forms groups of every shape, checks every result
// itself and prints "ok rank R of N"; its fault modes end with a disagreement, or a missing
// member, inside a group of world ranks 1 and 2. Shrinking after a death:
// test/groups/shrink.test.ts.
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/api/communicator.js';
import { commBlockBytes, N, NODE_BASE } from '../../src/core/shm-map.js';
import { inprocRanks, settleAll } from '../helpers/inproc.js';
import type { Env, Run } from '../helpers/jobs.js';
import { launchFixture } from '../helpers/launch-fixture.js';
import { expectExit, type Form, launchForm, stdoutOf } from '../helpers/launch-forms.js';
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

const f = launchFixture(new URL('fixtures/groups-check.mjs', import.meta.url), 'groups');
const fixture = (name: string) => fileURLToPath(new URL(`fixtures/${name}`, import.meta.url));

/** The rank script (or `o.script`) on `o.n` ranks, 4 unless said, in `form`; the output of every launcher, joined. */
async function launch(form: Form, args: string[] = [], o: { n?: number; script?: string; env?: Env } = {}) {
  const runs = await launchForm(f, form, o.n ?? 4, args, o.env, { guardMs: 150_000, script: o.script });
  return { runs, out: stdoutOf(runs) };
}

const okRanks = (out: string) =>
  [...out.matchAll(/^ok rank (\d+) of \d+ groups (\d+)$/gm)]
    .map((m) => [Number(m[1]), Number(m[2])])
    .sort((a, b) => a[0] - b[0]);

/** After a group's failure, every rank's world allReduce still succeeded (the failure was the group's own). */
function worldWentOn(runs: Run[], out: string): void {
  expectExit(runs);
  expect(okRanks(out).map(([r]) => r)).toEqual([0, 1, 2, 3]);
}

/** The "fault rank R code C {details, message}" lines of `out`. */
const faultsIn = (out: string) =>
  [...out.matchAll(/^fault rank (\d+) code (\w+) (.*)$/gm)].map((m) => ({
    rank: Number(m[1]),
    code: m[2],
    ...JSON.parse(m[3]),
  }));

describe.each(['threads', 'procs', 'nnodes'] as Form[])('groups with webccl run (%s)', (form) => {
  it('every group shape runs every collective correctly', async () => {
    const { runs, out } = await launch(form);
    expectExit(runs);
    // Ranks 0 and 2 are in 6 groups (pair, evens, single, reversed, row, column); 1 and 3 in 5.
    expect(okRanks(out)).toEqual([
      [0, 6],
      [1, 5],
      [2, 6],
      [3, 5],
    ]);
  });

  if (form === 'threads') {
    it('8 thread ranks on 2 cores: every group shape, a 4 x 2 grid', async () => {
      const { runs, out } = await launch(form, [], { n: 8 });
      expectExit(runs);
      expect(okRanks(out)).toEqual(Array.from({ length: 8 }, (_, r) => [r, r % 2 ? 5 : 6]));
    });

    it("8 thread ranks, every op run by the node's progress thread (WEBCCL_PROGRESS=thread)", async () => {
      const { runs, out } = await launch(form, [], { n: 8, env: { WEBCCL_PROGRESS: 'thread' } });
      expectExit(runs);
      expect(okRanks(out)).toEqual(Array.from({ length: 8 }, (_, r) => [r, r % 2 ? 5 : 6]));
    });
  }

  it('a disagreement inside a group is a MISMATCH on both members', async () => {
    const { runs, out } = await launch(form, ['mismatch']);
    worldWentOn(runs, out);
    const faults = faultsIn(out);
    expect(faults.map((x) => [x.rank, x.code]).sort()).toEqual([
      [1, 'MISMATCH'],
      [2, 'MISMATCH'],
    ]);
    for (const x of faults) {
      expect(x.details.worldRanks).toEqual([1, 2]);
      expect(x.message).toMatch(/group of world ranks 1, 2/);
    }
  });

  it('a member that never comes is named by group rank and world rank', async () => {
    const { runs, out } = await launch(form, ['missing']);
    worldWentOn(runs, out);
    const faults = faultsIn(out);
    expect(faults.map((x) => [x.rank, x.code])).toEqual([[1, 'TIMEOUT']]);
    const [fault] = faults;
    expect(fault.details).toMatchObject({ missing: [1], worldRanks: [1, 2], worldRank: 1 });
    expect(fault.message).toMatch(/rank 1\b/);
    expect(fault.message).toMatch(/rank 0 here is world rank 1/);
  });
});

// A group with 2 members on one node and 3 on the other: each member tunes its ops alone, so
// what it tunes from must not depend on its own node's count (it did: 2 members took 64 KiB
// ring pieces, 3 took 512 KiB, and every op of the group failed MISMATCH).
it('a group spread unevenly over 2 nodes (2 + 3 members) runs allReduce and allGather from 8 B to 16 MiB', async () => {
  const { runs, out } = await launch('nnodes', [], {
    n: 6,
    script: fixture('uneven-group.mjs'),
  });
  expectExit(runs);
  expect(out).not.toMatch(/^fault /m);
  expect(
    [...out.matchAll(/^ok rank (\d+) sizes (\d+)$/gm)]
      .map((m) => [Number(m[1]), Number(m[2])])
      .sort((a, b) => a[0] - b[0]),
  ).toEqual([0, 1, 3, 4, 5].map((r) => [r, 8]));
});

// Two communicators across nodes whose allReduces have node phases (hierarchical), issued in
// opposite orders by the two ranks of each node: a rank's node phase blocked its thread while
// its node mate, in the other communicator's node phase, waited for it (both until the deadline).
it('ops of two communicators across nodes, issued in opposite orders by node mates, with node phases: no deadlock', async () => {
  const { runs, out } = await launch('nnodes', [], {
    n: 4,
    script: fixture('cross-order.mjs'),
    env: { WEBCCL_TIMEOUT_MS: '20000' },
  });
  everyRoundOk(runs, out, 5);
});

/** Every launcher ended well, no rank printed a fault, and each of the 4 said "ok rank R rounds `rounds`". */
function everyRoundOk(runs: Run[], out: string, rounds: number): void {
  expectExit(runs);
  expect(out).not.toMatch(/^fault /m);
  expect(
    [...out.matchAll(/^ok rank (\d+) rounds (\d+)$/gm)]
      .map((m) => [Number(m[1]), Number(m[2])])
      .sort((a, b) => a[0] - b[0]),
  ).toEqual([0, 1, 2, 3].map((r) => [r, rounds]));
}

// A thread rank blocked in an await of its node's op stops its event loop, and with it the ops
// it runs across nodes on its own connections: rank 3, awaiting a send its node mate (the
// broadcast's root, awaiting the broadcast) had not yet received, held the root's data on its
// way down the chain until the deadline. With such ops in flight an await now goes through the
// event loop; in 'caller' progress and at the defaults (ops of at most 4 MiB run on the rank).
for (const progress of ['caller', 'auto']) {
  it(`an await of a node's op leaves the rank's ops across nodes moving (${progress} progress): no deadlock`, async () => {
    const { runs, out } = await launch('nnodes', [], {
      n: 4,
      script: fixture('await-order.mjs'),
      env: { WEBCCL_TIMEOUT_MS: '15000', WEBCCL_PROGRESS: progress },
    });
    everyRoundOk(runs, out, 4);
  });
}
