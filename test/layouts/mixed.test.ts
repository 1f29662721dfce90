// Ranks holding tensors in different layouts, with no wireLayout. One node: the signature check
// finds the layouts differ (no extra message), every rank converts to row-major and the op runs
// again; across nodes (TCP on loopback, in this process) a rank whose tensors are not row-major
// always converts. Every collective, NC1HWC0 with C0 16 and 8 beside NHWC and NCHW, every
// width, N·C·H·W 0 / 1 / odd / crossing chunk boundaries, garbage padding, checked element by
// element against a plain computation (test/helpers/mixed-layouts.mjs). Also: what still fails
// with MISMATCH, the conversions stats() counts and WEBCCL_DEBUG=INFO logs, and ops queued
// behind a run again. Under the launchers (the built bundle): worker threads of one node, with
// ops on the rank or on the progress thread, and one process per rank (across nodes: ranks not
// row-major always convert); each rank checks every collective element by element itself
// (test/layouts/fixtures/layouts-mixed.mjs), and WEBCCL_DEBUG=INFO logs every conversion with
// its cost.
import { afterAll, describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/api/communicator.js';
import type { Work } from '../../src/engine/work.js';
import { inprocRanks, settleAll, together } from '../helpers/inproc.js';
import { tensor, val, wrongIn } from '../helpers/layout-ref.js';
import { COLLECTIVES, mixedCase, mixedGrid } from '../helpers/mixed-layouts.mjs';
import { all, destroyAll, netRanks } from '../helpers/net-world.js';
import { bin, cleanEnv, fixture, killAll, run } from '../helpers/procs.js';

type Case = ReturnType<typeof mixedCase>;
type Run = (cs: Communicator[], issue: (c: Communicator, r: number) => Work) => Promise<void>;

/** Runs every case on every rank; returns what is wrong (at most a few). */
async function runGrid(cs: Communicator[], cases: Case[], run: Run): Promise<string[]> {
  const wrong: string[] = [];
  for (const k of cases) {
    try {
      await run(cs, (c, r) => k.issue(c, r));
    } catch (e) {
      wrong.push(`${k.label}: ${(e as Error).message}`);
    }
    for (let r = 0; r < cs.length; r++) {
      const w = k.check(r);
      if (w) wrong.push(w);
    }
    if (wrong.length > 4) break;
  }
  return wrong;
}

const conversions = (cs: Communicator[]) => cs.map((c) => c.stats().conversions);

describe('one node, mixed layouts without wireLayout', () => {
  for (const build of ['simd', 'scalar'] as const) {
    for (const n of [2, 3, 4]) {
      it(`${build} build, ${n} ranks: every collective, dtype and shape, element by element`, async () => {
        const cs = inprocRanks(n, { slotBytes: 4096, simd: build === 'simd' });
        const grid = mixedGrid(n, {
          mixes: n === 4 ? [0] : [0, 1],
          dtypes: build === 'simd' || n === 3 ? undefined : ['f32', 'f16', 'i8'],
        });
        expect(await runGrid(cs, grid, together)).toEqual([]);
      });
    }
  }

  it('equal layouts on every rank, gather and scatter included: nothing is converted', async () => {
    const cs = inprocRanks(3, { slotBytes: 4096 });
    const grid = mixedGrid(3, { mixes: ['same:0', 'same:1', 'same:2'] as any, dtypes: ['f32', 'f16', 'i8'] });
    expect(await runGrid(cs, grid, together)).toEqual([]);
    expect(conversions(cs)).toEqual([0, 0, 0]);
  });

  it('converts only when layouts differ: each rank not row-major converts its input and its output; stats count it', async () => {
    const cs = inprocRanks(3, { slotBytes: 4096 });
    const shape = [2, 5, 3, 2];
    // Equal layouts: nothing converted.
    const same = cs.map((_, r) => tensor('f32', 'NC1HWC0', shape, 8, (...i) => val(r, ...i), { garbage: true }));
    await together(cs, (c, r) => c.allReduce(same[r] as any));
    expect(conversions(cs)).toEqual([0, 0, 0]);
    // NC1HWC0, NHWC, NCHW: the first two convert in and out, the row-major rank nothing.
    const k = mixedCase('allGather', 'f16', shape, 3, 0);
    await together(cs, (c, r) => k.issue(c, r));
    for (let r = 0; r < 3; r++) expect(k.check(r)).toBeUndefined();
    // layoutOf: rank 0 NC1HWC0 (c0 16), rank 1 NHWC, rank 2 NC1HWC0 (c0 8).
    expect(conversions(cs)).toEqual([2, 2, 2]);
    const st = cs[1].stats();
    // reads: the f16 input [2, 5, 3, 2], the row-major result [6, 5, 3, 2]
    expect(st.conversionBytes).toBe(60 * 2 + 180 * 2);
    expect(st.conversionMs).toBeGreaterThan(0);
    const mixed = [
      tensor('i32', 'NCHW', shape, 16, (...i) => val(0, ...i)),
      tensor('i32', 'NHWC', shape, 16, (...i) => val(1, ...i)),
      tensor('i32', 'NCHW', shape, 16, (...i) => val(2, ...i)),
    ];
    await together(cs, (c, r) => c.allReduce(mixed[r] as any, { op: 'max' }));
    mixed.forEach((x) =>
      expect(wrongIn(x, (...i) => Math.max(val(0, ...i), val(1, ...i), val(2, ...i)))).toBeUndefined(),
    );
    expect(conversions(cs)).toEqual([2, 4, 2]); // only the NHWC rank converted this time
    expect(cs.map((c) => c.stats().failed)).toEqual([0, 0, 0]); // a run again is no failure
  });

  it('what still fails: other shapes, dtypes, counts or ops, and a plain buffer beside a tensor, with MISMATCH on every rank; the communicator stays usable', async () => {
    const cs = inprocRanks(2, { slotBytes: 4096 });
    const x = (r: number, dt: 'f32' | 'i32', layout: 'NCHW' | 'NHWC' | 'NC1HWC0', shape: number[]) =>
      tensor(dt, layout, shape, 16, (...i) => val(r, ...i));
    const cases: [string, () => [any, any], Record<string, unknown>][] = [
      ['shape', () => [x(0, 'f32', 'NHWC', [1, 4, 3, 2]), x(1, 'f32', 'NHWC', [1, 4, 2, 3])], {}],
      ['shape', () => [x(0, 'f32', 'NC1HWC0', [1, 4, 3, 2]), x(1, 'f32', 'NHWC', [1, 4, 2, 3])], {}],
      ['shape', () => [x(0, 'f32', 'NCHW', [1, 4, 3, 2]), new Float32Array(24)], {}],
      ['dtype', () => [x(0, 'f32', 'NHWC', [1, 4, 3, 2]), x(1, 'i32', 'NCHW', [1, 4, 3, 2])], {}],
      ['count', () => [x(0, 'f32', 'NHWC', [1, 4, 3, 2]), x(1, 'f32', 'NCHW', [1, 4, 3, 3])], {}],
    ];
    for (const [field, make] of cases) {
      const xs = make();
      const errs = await settleAll(cs.map((c, r) => c.allReduce(xs[r])));
      // (two shapes of two counts: the shape is named, it says more)
      for (const e of errs)
        expect([(e as any)?.code, (e as any)?.details.field], field).toEqual([
          'MISMATCH',
          field === 'count' ? 'shape' : field,
        ]);
    }
    const ops = [x(0, 'f32', 'NHWC', [1, 4, 3, 2]), x(1, 'f32', 'NCHW', [1, 4, 3, 2])];
    const errs = await settleAll(cs.map((c, r) => c.allReduce(ops[r], { op: r ? 'max' : 'sum' })));
    for (const e of errs) expect([(e as any)?.code, (e as any)?.details.field]).toEqual(['MISMATCH', 'op']);
    const later = [new Float32Array(4).fill(1), new Float32Array(4).fill(2)];
    await together(cs, (c, r) => c.allReduce(later[r]));
    expect(Array.from(later[0])).toEqual([3, 3, 3, 3]);
  });

  it('ops queued behind a run again keep their order and data (the run again signs in the other record)', async () => {
    const cs = inprocRanks(3, { slotBytes: 4096 });
    for (let round = 0; round < 3; round++) {
      const ks = COLLECTIVES.map((name, j) => mixedCase(name, j % 2 ? 'f16' : 'f32', [2, 19, 3, 3], 3, round + j));
      const plain = cs.map((_, r) => ks.map((_k, j) => new Float32Array(100).fill(r + 1 + j)));
      // Every op issued before any completes: mixed, plain, mixed, ...
      const works = cs.map((c, r) => ks.flatMap((k, j) => [k.issue(c, r), c.allReduce(plain[r][j])]));
      const errs = await settleAll(works.flat());
      expect(errs.filter(Boolean)).toEqual([]);
      for (const k of ks) for (let r = 0; r < 3; r++) expect(k.check(r)).toBeUndefined();
      for (const p of plain) p.forEach((a, j) => expect([a[0], a[99]]).toEqual([6 + 3 * j, 6 + 3 * j]));
    }
  });

  it('allToAll, send and recv still take row-major tensors only', () => {
    const [c] = inprocRanks(1);
    const t = tensor('f32', 'NHWC', [1, 3, 2, 2], 16, () => 1);
    let e: any;
    try {
      c.allToAll(new Float32Array(12), t as any);
    } catch (x) {
      e = x;
    }
    expect([e?.code, e?.details.layout]).toEqual(['INVALID_ARGUMENT', 'NHWC']);
  });
});

for (const [nodes, perNode] of [
  [2, 1],
  [2, 2],
] as const) {
  describe(`across nodes over TCP, ${nodes} nodes × ${perNode} rank(s), mixed layouts without wireLayout`, () => {
    let cs: Communicator[] = [];
    const comms = async () => (cs.length ? cs : (cs = await netRanks(nodes, perNode, { simd: true })));
    afterAll(() => destroyAll(cs));
    const n = nodes * perNode;

    it('every collective, dtype and shape, element by element', async () => {
      const c = await comms();
      const grid = mixedGrid(n, {
        mixes: [perNode === 1 ? 1 : 0],
        dtypes: perNode === 1 ? undefined : ['f32', 'f16', 'bf16', 'i8', 'f64'],
      });
      expect(await runGrid(c, grid, all)).toEqual([]);
    }, 240_000);

    it('a rank whose tensors are not row-major converts in and out; other shapes still fail with MISMATCH', async () => {
      const c = await comms();
      const before = conversions(c);
      const k = mixedCase('allReduce', 'bf16', [1, 5, 3, 3], n, 3); // NCHW, NC1HWC0 (16), NHWC, NC1HWC0 (8)
      await all(c, (cm, r) => k.issue(cm, r));
      for (let r = 0; r < n; r++) expect(k.check(r)).toBeUndefined();
      expect(conversions(c).map((v, r) => v - before[r])).toEqual([0, 2, 2, 2].slice(0, n));
      const xs = c.map((_, r) => tensor('f32', 'NHWC', r === n - 1 ? [1, 4, 2, 3] : [1, 4, 3, 2], 16, () => 1));
      const errs = await Promise.all(
        c.map((cm, r) =>
          cm
            .allReduce(xs[r] as any)
            .wait()
            .then(
              () => undefined,
              (e) => e,
            ),
        ),
      );
      for (const e of errs) expect([e?.code, e?.details.field]).toEqual(['MISMATCH', 'shape']);
      cs = []; // a MISMATCH across nodes aborts the communicator
      destroyAll(c);
    }, 120_000);
  });
}

describe.each([
  ['threads', [], {}],
  ['threads, ops on the progress thread', [], { WEBCCL_PROGRESS: 'thread' }],
  ['processes', ['--procs'], {}],
] as const)('mixed layouts without wireLayout under webccl run, %s', (_, flags, env) => {
  afterAll(killAll);
  const CASES = 2 * 6 * 5 * 7; // mixes × dtypes × shapes × collectives

  it('3 ranks, every collective checked on every rank; INFO logs each conversion with its cost', async () => {
    const r = await run(
      process.execPath,
      [bin, 'run', ...flags, '-n', '3', fixture('layouts-mixed.mjs', 'layouts')],
      cleanEnv({ WEBCCL_DEBUG: 'INFO', ...env }),
      { guardMs: 240_000 },
    );
    expect(r.hung).toBe(false);
    const oks = r.stdout.split('\n').filter((l) => l.startsWith('ok rank ') || l.startsWith('wrong rank '));
    expect(
      oks.filter((l) => l.startsWith('wrong')),
      r.stderr.slice(-2000),
    ).toEqual([]);
    expect(oks.map((l) => l.split(' ').slice(0, 3).join(' ')).sort()).toEqual(['ok rank 0', 'ok rank 1', 'ok rank 2']);
    expect(oks.every((l) => l.includes(`cases ${CASES} `))).toBe(true);
    expect(r.code).toBe(0);
    // Every rank holds a layout other than NCHW in one of the two mixes, so each converted.
    const counts = oks.map((l) => Number(l.split(' conversions ')[1]));
    for (const c of counts) expect(c).toBeGreaterThan(0);
    const logged = r.stderr
      .split('\n')
      .filter((l) => / INFO rank \d+: \w+ converted its (input|output) .* B in [\d.]+ us \([\d.]+ GB\/s/.test(l));
    expect(logged.length).toBe(counts.reduce((a, b) => a + b, 0));
  }, 300_000);
});
