// The cost model: counts per schedule, fitting on synthetic perf rows (it recovers the α, wake,
// β and γ that made them), and which model the tuner reads (WEBCCL_MODEL, checked field by field).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { simulateCollective } from '../../src/sim/index.js';
import { type CostModel, checkModel, predictUs } from '../../src/tuner/cost-model.js';
import { DEFAULT_MODEL } from '../../src/tuner/default-model.js';
import { fitModel, fitRelative, type PerfRow, rowCounts } from '../../src/tuner/fit.js';
import { activeModel } from '../../src/tuner/model-source.js';
import { extraRounds, hierarchicalCounts, netCounts, onPath, shmCounts } from '../../src/tuner/schedules.js';
import { caught } from '../helpers/caught.js';

afterEach(() => {
  delete process.env.WEBCCL_MODEL;
});

const KNOWN: CostModel = {
  version: 1,
  cores: 2,
  shm: { alphaUs: 2, wakeUs: 15, betaBytesPerUs: 8000, gammaBytesPerUs: 16000 },
  tcp: { alphaUs: 100, wakeUs: 40, betaBytesPerUs: 2000, gammaBytesPerUs: 12000, messageUs: 20 },
};

const SIZES = [1024, 4096, 65536, 1 << 20, 16 << 20, 64 << 20];
const synthetic = (m: CostModel, noise = () => 1): PerfRow[] =>
  (
    [
      ['shm', ['direct', 'twoshot']],
      ['tcp', ['ring', 'doubling']],
    ] as const
  ).flatMap(([path, algos]) =>
    algos.flatMap((algo) =>
      [2, 3, 4, 8].flatMap((ranks) =>
        SIZES.map((bytes) => {
          const timeUs = predictUs(m, onPath(path, rowCounts({ path, algo, ranks, bytes })), ranks) * noise();
          return { path, algo, ranks, bytes, timeUs };
        }),
      ),
    ),
  );

describe('schedule counts', () => {
  it('ring, doubling and tree send what their schedules send', () => {
    // 4 ranks, 4 MiB: blocks of 1 MiB in two 512 KiB pieces, both lanes at once: 6 steps, 12 messages
    expect(netCounts('ring', 4, 4 << 20)).toEqual({
      steps: 2 * 3,
      messages: 2 * 3 * 2,
      bytes: 2 * 3 * (1 << 20),
      reduced: 3 * (1 << 20),
      ways: 1,
    });
    // the two lanes travel side by side on two of three connections
    expect(netCounts('ring', 4, 4 << 20, undefined, 3).ways).toBe(2);
    // 2 ranks, 64 MiB: blocks of 32 MiB in 64 pieces, four lanes of 16 in a row
    expect(netCounts('ring', 2, 64 << 20)).toMatchObject({ steps: 2 * 16, messages: 2 * 64 });
    expect(netCounts('doubling', 8, 1024)).toEqual({
      steps: 3,
      messages: 3,
      bytes: 3 * 1024,
      reduced: 3 * 1024,
      ways: 1,
    });
    expect(netCounts('doubling', 8, 1024, undefined, 4).ways).toBe(1); // one message per peer and step
    // 6 ranks: 4 double, 2 fold in first and get the result back: two steps more, one reduction
    // more; the 4 doubling leave 2 idle, and the folds keep 2 + 2 busy
    expect(netCounts('doubling', 6, 1024)).toEqual({
      steps: 4,
      messages: 4,
      bytes: 4 * 1024,
      reduced: 3 * 1024,
      ways: 1,
      partial: [
        { share: 4 / 6, steps: 2 },
        { share: 4 / 6, steps: 2 },
      ],
    });
    expect(netCounts('ring', 1, 1024)).toEqual({ steps: 0, messages: 0, bytes: 0, reduced: 0 });
    expect(shmCounts('direct', 4, 1 << 20)).toEqual({ steps: 4, messages: 0, bytes: 1 << 20, reduced: 4 << 20 });
    expect(shmCounts('twoshot', 4, 1 << 20)).toEqual({
      steps: 3,
      messages: 0,
      bytes: 0.75 * (1 << 20),
      reduced: 1 << 20,
    });
    expect(hierarchicalCounts(4, 2, 1 << 20, 'ring').tcp).toEqual(netCounts('ring', 4, 1 << 19));
  });

  it('a step whose busy ranks outnumber the cores takes more turns: the ring keeps every rank busy, doubling beyond a power of two fewer', () => {
    const ring3 = netCounts('ring', 3, 1 << 20);
    expect(extraRounds(ring3, 3, 2)).toBe(ring3.steps); // 3 busy on 2 cores: two turns a step
    expect(extraRounds(netCounts('doubling', 3, 1 << 20), 3, 2)).toBe(0); // 2 of 3 busy at every step
    expect(extraRounds(netCounts('doubling', 4, 1 << 20), 4, 2)).toBe(2); // 2 exchanges of all 4
    expect(extraRounds(netCounts('doubling', 5, 1 << 20), 5, 2)).toBe(2); // the exchanges of 4; the folds keep 2 busy
    expect(extraRounds(netCounts('ring', 8, 1 << 20), 8, 2)).toBe(3 * netCounts('ring', 8, 1 << 20).steps);
    expect(extraRounds(netCounts('ring', 8, 1 << 20), 1, 2)).toBe(0); // one rank per machine
    expect(extraRounds(shmCounts('twoshot', 4, 1 << 20), 4, 64)).toBe(0);
  });

  it('the ring and doubling send as many bytes per rank as the simulator moves running them', async () => {
    const net = {
      nodes: 6,
      inter: { latencyUs: 5, bytesPerUs: 3125 },
      intra: { latencyUs: 1, bytesPerUs: 50000 },
      mode: 'size' as const,
    };
    for (const algo of ['ring', 'doubling'] as const) {
      const r = await simulateCollective(
        { ...net, ranks: 8, nodes: 8 },
        { collective: 'allreduce', algo, count: 1 << 18 },
      );
      expect(r.bytes / 8).toBe(netCounts(algo, 8, 1 << 20).bytes);
    }
  });
});

describe('fitting', () => {
  it('recovers a known α, wake, o, β and γ on both paths from exact rows', () => {
    const m = fitModel(synthetic(KNOWN), 2);
    expect(m.tcp.messageUs).toBeCloseTo(20, 6);
    expect(m.shm.messageUs).toBe(0); // no messages in shared memory
    for (const p of ['shm', 'tcp'] as const) {
      expect(m[p].alphaUs).toBeCloseTo(KNOWN[p].alphaUs, 6);
      expect(m[p].wakeUs).toBeCloseTo(KNOWN[p].wakeUs, 6);
      expect(m[p].betaBytesPerUs! / KNOWN[p].betaBytesPerUs!).toBeCloseTo(1, 6);
      expect(m[p].gammaBytesPerUs! / KNOWN[p].gammaBytesPerUs!).toBeCloseTo(1, 6);
    }
  });

  it('recovers crowded costs apart from the base ones (ranks beyond the cores paying more per message and byte, and per turn)', () => {
    const crowded: CostModel = {
      ...KNOWN,
      tcp: { ...KNOWN.tcp, crowdMessageUs: 150, crowdUsPerByte: 0.002, crowdUsPerReducedByte: 0, roundUs: 70 },
    };
    const m = fitModel(synthetic(crowded), 2);
    expect(m.tcp.messageUs).toBeCloseTo(20, 6);
    expect(m.tcp.roundUs).toBeCloseTo(70, 6);
    expect(m.shm.roundUs).toBeCloseTo(0, 6);
    expect(m.tcp.crowdMessageUs).toBeCloseTo(150, 6);
    expect(m.tcp.crowdUsPerByte).toBeCloseTo(0.002, 9);
    expect(m.tcp.crowdUsPerReducedByte).toBeCloseTo(0, 9);
    expect(m.tcp.betaBytesPerUs! / 2000).toBeCloseTo(1, 6);
    // 2 ranks on 2 cores pay the base costs only; 8 pay three core's worth of crowded ones more
    const c = netCounts('ring', 8, 1 << 20);
    expect(
      predictUs(m, onPath('tcp', c), 8) -
        predictUs({ ...m, tcp: { ...m.tcp, crowdMessageUs: 0, crowdUsPerByte: 0, roundUs: 0 } }, onPath('tcp', c), 8),
    ).toBeCloseTo(3 * (150 * c.messages + 0.002 * c.bytes + 70 * c.steps), 3);
    expect(predictUs(m, onPath('tcp', netCounts('ring', 2, 1 << 20)), 2)).toBeCloseTo(
      predictUs(KNOWN, onPath('tcp', netCounts('ring', 2, 1 << 20)), 2),
      6,
    );
  });

  it('recovers what a connection costs (φ per byte it carries, ω per step for each beyond the first) from rows on 2 connections and a ring on 1, as webccl tune sweeps', () => {
    const flows: CostModel = { ...KNOWN, tcp: { ...KNOWN.tcp, flowUsPerByte: 0.0004, channelStepUs: 30 } };
    const onTwo = synthetic(flows).map((r) => (r.path === 'tcp' ? { ...r, channels: 2 } : r));
    const rowsOf = (rs: PerfRow[]) =>
      rs.map((r) => ({ ...r, timeUs: predictUs(flows, onPath(r.path, rowCounts(r)), r.ranks) }));
    const oneRing = rowsOf(
      SIZES.map((bytes) => ({ path: 'tcp' as const, algo: 'ring', ranks: 2, bytes, timeUs: 0, channels: 1 })),
    );
    const m = fitModel([...rowsOf(onTwo), ...oneRing], 2);
    expect(m.tcp.flowUsPerByte).toBeCloseTo(0.0004, 9);
    expect(m.tcp.channelStepUs).toBeCloseTo(30, 6);
    expect(m.tcp.messageUs).toBeCloseTo(20, 6);
    expect(m.tcp.betaBytesPerUs! / 2000).toBeCloseTo(1, 6);
    expect(m.shm.flowUsPerByte ?? 0).toBe(0); // no connections in shared memory
    // a 64 MiB ring on 2 connections: the flows halve, one connection more per step
    const c1 = netCounts('ring', 2, 64 << 20, undefined, 1);
    const c2 = netCounts('ring', 2, 64 << 20, undefined, 2);
    expect(predictUs(m, onPath('tcp', c1), 2) - predictUs(m, onPath('tcp', c2), 2)).toBeCloseTo(
      (0.0004 * c1.bytes) / 2 - 30 * c2.steps,
      3,
    );
    // rows recorded without their channels (before channels were weighed) carry no connection costs
    expect(fitModel(synthetic(KNOWN), 2).tcp).toMatchObject({ flowUsPerByte: 0, channelStepUs: 0 });
  });

  it('from rows with ±5% noise, predicts the noiseless times within a few percent', () => {
    // (eight coefficients share the noise between them: each alone may move by 10–20%, the
    // times they predict together stay close)
    let seed = 7;
    const noise = () => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return 0.95 + 0.1 * (seed / 2 ** 31);
    };
    const m = fitModel(synthetic(KNOWN, noise), 2);
    const errors = synthetic(KNOWN)
      .map((r) => Math.abs(predictUs(m, onPath(r.path, rowCounts(r)), r.ranks) / r.timeUs - 1))
      .sort((a, b) => a - b);
    expect(errors[errors.length >> 1]).toBeLessThan(0.03);
    expect(errors[errors.length - 1]).toBeLessThan(0.1);
  });

  it('never returns a negative coefficient: a cost the rows do not show is 0 (rate null)', () => {
    // time falls with steps: unconstrained least squares would give α < 0
    expect(
      fitRelative(
        [
          [1, 100],
          [10, 100],
          [1, 1000],
        ],
        [200, 150, 2000],
      ).every((x) => x >= 0),
    ).toBe(true);
    const free: CostModel = { ...KNOWN, shm: { alphaUs: 3, wakeUs: 0, betaBytesPerUs: null, gammaBytesPerUs: 10000 } };
    const m = fitModel(synthetic(free), 2);
    expect(m.shm.betaBytesPerUs).toBeNull();
    expect(m.shm.wakeUs).toBeCloseTo(0, 9);
    expect(m.shm.alphaUs).toBeCloseTo(3, 6);
  });

  it("a path without rows takes the fallback model's costs, or is refused", () => {
    const shmOnly = synthetic(KNOWN).filter((r) => r.path === 'shm');
    expect(fitModel(shmOnly, 2, undefined, DEFAULT_MODEL).tcp).toEqual(DEFAULT_MODEL.tcp);
    const e = caught(() => fitModel(shmOnly, 2));
    expect(e.code).toBe('INVALID_ARGUMENT');
    expect(e.details).toMatchObject({ path: 'tcp' });
    expect(caught(() => rowCounts({ path: 'shm', algo: 'ring', ranks: 2, bytes: 8 })).details).toMatchObject({
      algo: 'ring',
      path: 'shm',
    });
  });
});

describe('which model', () => {
  const dir = mkdtempSync(join(tmpdir(), 'webccl-model-'));

  it('WEBCCL_MODEL names a file the tuner reads', () => {
    const file = join(dir, 'm.json');
    writeFileSync(file, JSON.stringify(KNOWN));
    process.env.WEBCCL_MODEL = file;
    expect(activeModel()).toEqual({ model: KNOWN, from: file });
  });

  it('a missing, unparsable or malformed model is INVALID_ARGUMENT naming the file or field', () => {
    process.env.WEBCCL_MODEL = join(dir, 'none.json');
    expect(caught(() => activeModel())).toMatchObject({
      code: 'INVALID_ARGUMENT',
      details: { path: join(dir, 'none.json') },
    });
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, '{');
    process.env.WEBCCL_MODEL = bad;
    expect(caught(() => activeModel())).toMatchObject({ code: 'INVALID_ARGUMENT', details: { path: bad } });
    for (const [field, m] of [
      ['version', { ...KNOWN, version: 2 }],
      ['cores', { ...KNOWN, cores: 0 }],
      ['tcp', { ...KNOWN, tcp: undefined }],
      ['shm.alphaUs', { ...KNOWN, shm: { ...KNOWN.shm, alphaUs: -1 } }],
      ['tcp.betaBytesPerUs', { ...KNOWN, tcp: { ...KNOWN.tcp, betaBytesPerUs: 0 } }],
      ['tcp.messageUs', { ...KNOWN, tcp: { ...KNOWN.tcp, messageUs: -1 } }],
      ['tcp.crowdMessageUs', { ...KNOWN, tcp: { ...KNOWN.tcp, crowdMessageUs: -1 } }],
      ['shm.crowdUsPerByte', { ...KNOWN, shm: { ...KNOWN.shm, crowdUsPerByte: 'x' } }],
      ['shm.crowdUsPerReducedByte', { ...KNOWN, shm: { ...KNOWN.shm, crowdUsPerReducedByte: Infinity } }],
      ['tcp.roundUs', { ...KNOWN, tcp: { ...KNOWN.tcp, roundUs: -3 } }],
    ] as const) {
      expect(caught(() => checkModel(JSON.parse(JSON.stringify(m)), 'x')).details).toEqual({ field });
    }
  });

  it('a model without o (written before it) is valid and costs nothing per message', () => {
    const { messageUs: _, ...old } = KNOWN.tcp;
    const m = checkModel(JSON.parse(JSON.stringify({ ...KNOWN, tcp: old })), 'x');
    const c = netCounts('ring', 4, 1 << 20);
    expect(predictUs(m, onPath('tcp', c), 4)).toBeCloseTo(
      predictUs({ ...KNOWN, tcp: { ...old, messageUs: 0 } }, onPath('tcp', c), 4),
      9,
    );
  });

  it('a model without crowded costs (written before them) scales its costs with ranks / cores', () => {
    for (const [algo, n] of [
      ['ring', 3],
      ['doubling', 8],
      ['ring', 2],
    ] as const) {
      const c = netCounts(algo, n, 4 << 20);
      const t = KNOWN.tcp;
      const share = Math.max(1, n / 2);
      const old =
        c.steps * (t.alphaUs + t.wakeUs * Math.max(0, n - 2)) +
        share * (c.messages * t.messageUs! + c.bytes / t.betaBytesPerUs! + c.reduced / t.gammaBytesPerUs!);
      expect(predictUs(KNOWN, onPath('tcp', c), n) / old).toBeCloseTo(1, 9);
    }
  });

  it('the built-in model is a valid model', () => {
    expect(checkModel(DEFAULT_MODEL, 'built-in')).toBe(DEFAULT_MODEL);
  });
});
