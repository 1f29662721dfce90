// Shrinking a communicator after a death (--fault-tolerant): on one node (in-process ranks), the
// survivors of a dead rank get a working communicator without it, ops still pending end first,
// and a rank taken for dead that is alive is told so. Under every launch form, with the built
// CLI (4 worker threads, 4 processes, 2 nodes × 2 threads; the rank script
// test/fixtures/shrink-check.mjs): after a killed rank the survivors go on, also in a group of
// them; a death no op met is agreed on from what the connections saw; a recv pending on every
// survivor ends ABORTED and the shrink goes on.
import { describe, expect, it } from 'vitest';
import { Communicator } from '../../src/api/communicator.js';
import { leaveNode } from '../../src/core/node.js';
import { N, NODE_BASE } from '../../src/core/shm-map.js';
import { joinNode } from '../../src/engine/context.js';
import { createNode } from '../../src/progress/create-node.js';
import { settleAll } from '../helpers/inproc.js';
import type { Env } from '../helpers/jobs.js';
import { launchFixture } from '../helpers/launch-fixture.js';
import { expectExit, type Form, launchForm, stdoutOf } from '../helpers/launch-forms.js';
import { shrunkIn } from '../helpers/shrink-check.js';

/** Every rank forms its group at once (they share this thread). */
const formAll = (comms: Communicator[], f: (c: Communicator, r: number) => Promise<Communicator | null>) =>
  Promise.all(comms.map(f));

describe('shrink on one node', () => {
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

const f = launchFixture('shrink-check.mjs', 'shrink');

/** The shrink script with `args` on 4 ranks in `form` under --fault-tolerant; every launcher's
 *  run and their output, joined. */
async function launch(form: Form, args: string[], o: { env?: Env; limitMs?: number } = {}) {
  const runs = await launchForm(f, form, 4, args, o.env, {
    flags: ['--fault-tolerant'],
    guardMs: o.limitMs ?? 150_000,
  });
  return { runs, out: stdoutOf(runs) };
}

describe.each(['threads', 'procs', 'nnodes'] as Form[])('shrink with webccl run (%s)', (form) => {
  // Rank 3 dying leaves the survivors numbered as before; rank 1 dying renumbers them (world
  // ranks 0, 2, 3 become 0, 1, 2), which groups of the shrunk communicator must follow.
  const deaths =
    form === 'threads'
      ? [{ dies: 3 }, { dies: 3, env: { WEBCCL_PROGRESS: 'thread' } }, { dies: 1 }]
      : [{ dies: 3 }, { dies: 1 }];
  it.each(deaths)(
    'shrink after a killed rank (--fault-tolerant): the survivors go on with a correct allReduce, and a group of them with an allToAll (%o)',
    async ({ dies, env: extra }: { dies: number; env?: Env }) => {
      const { runs, out } = await launch(form, [String(dies)], { env: extra });
      const survivors = [0, 1, 2, 3].filter((r) => r !== dies);
      expect(shrunkIn(out), runs.map((r) => r.stderr).join('\n')).toEqual(
        survivors.map((r, i) => [r, 3, i, expect.stringMatching(/^(CONNECTION_CLOSED|ABORTED)$/)]),
      );
      // The launcher reports the death it tolerated and exits 0 (the survivors all ended well).
      const all = runs.map((r) => r.stderr).join('');
      expect(all).toMatch(new RegExp(`rank ${dies} failed: .*tolerated: --fault-tolerant`));
      expectExit(runs);
    },
  );

  // Rank 2 dies right after joining and the survivors shrink at once: no op of theirs met the
  // death, so only their connections (across nodes) or the node memory (one node) say it. Their
  // deadline is 120 s; the run is stopped at 60 s. (Across nodes the agreement waited for the
  // dead rank until the deadline, as for a survivor not heard from yet.)
  it('shrink after a rank died before any op (--fault-tolerant): agreed from what the connections saw, long before the 120 s deadline', async () => {
    const { runs, out } = await launch(form, ['2', 'unseen'], { limitMs: 60_000 });
    expectExit(runs);
    const oks = shrunkIn(out);
    expect(oks).toEqual([
      [0, 3, 0, 'none'],
      [1, 3, 1, 'none'],
      [3, 3, 2, 'none'],
    ]);
  }, 90_000);

  // The same, with a recv from another survivor pending on each when it shrinks (the shape a
  // Promise.all that rejected at the first failure leaves behind): shrink() used to refuse
  // (INVALID_ARGUMENT, "op(s) still pending"); it revokes the communicator, the recv ends
  // ABORTED, and the shrink goes on.
  it('shrink with a recv still pending on every survivor: the recv ends ABORTED, the survivors shrink and run', async () => {
    const { runs, out } = await launch(form, ['2', 'unseen-pending'], { limitMs: 60_000 });
    expectExit(runs);
    const oks = shrunkIn(out);
    expect(oks, out).toEqual([
      [0, 3, 0, 'ABORTED'],
      [1, 3, 1, 'ABORTED'],
      [3, 3, 2, 'ABORTED'],
    ]);
  }, 90_000);
});
