// The tuners choose from a given cost model (deterministically), explain each choice once at
// INFO with the predicted times of the alternatives, and WEBCCL_ALGO's per-collective form.
import { afterEach, describe, expect, it, vi } from 'vitest';
import { parseAlgoSetting } from '../../src/tuner/algo-env.js';
import { ringChannelCosts, ringChannels } from '../../src/tuner/channels.js';
import type { CostModel } from '../../src/tuner/cost-model.js';
import {
  adoptJobModel,
  chooseNetAllReduce,
  doublingMaxBytes,
  flatAlgo,
  netTuningBasis,
  resolveNetAlgo,
  ringWays,
  useNetModel,
} from '../../src/tuner/net-tuner.js';
import { crossoverBytes, flatPredictions, shmPredictions } from '../../src/tuner/predict.js';
import { chooseAllReduceAlgo, resolveTuning } from '../../src/tuner/tuner.js';
import { caught } from '../helpers/caught.js';

// Read once, at the first log line: every line this file prints is at INFO.
process.env.WEBCCL_DEBUG = 'INFO';

afterEach(() => {
  delete process.env.WEBCCL_ALGO;
  useNetModel(undefined);
  vi.restoreAllMocks();
});

/** Synchronisation cheap, bytes dear: direct (one sync per chunk, n·S read) wins small sizes only. */
const MODEL: CostModel = {
  version: 1,
  cores: 64,
  shm: { alphaUs: 2, wakeUs: 0, betaBytesPerUs: 10000, gammaBytesPerUs: 10000 },
  tcp: { alphaUs: 50, wakeUs: 0, betaBytesPerUs: 1000, gammaBytesPerUs: 10000 },
};

describe('choices from a model', () => {
  it('one node: direct up to the predicted crossover, twoshot beyond, the same on every call', () => {
    // direct: 2 + (S + 4S)/1e4 (one chunk); twoshot: 6 + (0.75S + S)/1e4 → equal at S = 4e4/3.25
    const t = resolveTuning(4, undefined, MODEL, 64);
    expect(t.directMaxBytes).toBe(Math.floor(4e4 / 3.25));
    expect(chooseAllReduceAlgo(t.directMaxBytes, t)).toBe('direct');
    expect(chooseAllReduceAlgo(t.directMaxBytes + 1, t)).toBe('twoshot');
    expect(resolveTuning(4, undefined, MODEL, 64).directMaxBytes).toBe(t.directMaxBytes);
    // more ranks: direct reads more, so its range shrinks
    expect(resolveTuning(8, undefined, MODEL, 64).directMaxBytes).toBeLessThan(t.directMaxBytes);
  });

  it('across nodes: doubling up to the crossover, then the ring; hierarchical on a grid when predicted faster', () => {
    useNetModel(MODEL, 64);
    const x = doublingMaxBytes(8);
    expect(x).toBe(crossoverBytes((b) => flatPredictions(MODEL, 8, b, 64), 'doubling'));
    expect(flatAlgo(x, 8)).toBe('doubling');
    expect(flatAlgo(x + 1, 8)).toBe('ring');
    // with 2 ranks the ring and doubling send the same bytes; doubling waits through one step,
    // the ring through two (up to 4 pieces a block, in lanes) but reduces half as much:
    // 50 + S/1000 + S/10000 = 100 + S/1000 + S/20000 at S = 1e6
    expect(Math.abs(doublingMaxBytes(2) - 1e6)).toBeLessThanOrEqual(1);
    expect(chooseNetAllReduce(x + 1, 8, { nodes: 8, perNode: 1 }, undefined)).toBe('ring');
    expect(chooseNetAllReduce(1 << 20, 8, { nodes: 2, perNode: 4 }, undefined)).toBe('hierarchical');
    expect(chooseNetAllReduce(1024, 8, { nodes: 2, perNode: 0 }, undefined)).toBe('doubling');
  });

  it('ranks beyond the cores cost only where they share a machine: loopback, not a cluster of one rank per machine', () => {
    const crowded: CostModel = { ...MODEL, cores: 2, tcp: { ...MODEL.tcp, wakeUs: 100 } };
    useNetModel(crowded, 2);
    // 8 ranks on one machine of 2 cores: each of the ring's 14 steps wakes 6 sleepers; doubling takes 3
    expect(doublingMaxBytes(8, 8)).toBeGreaterThan(doublingMaxBytes(8, 1));
    expect(chooseNetAllReduce(doublingMaxBytes(8, 1) + 1, 8, { nodes: 8, perNode: 1, sharing: 1 }, undefined)).toBe(
      'ring',
    );
    expect(chooseNetAllReduce(doublingMaxBytes(8, 1) + 1, 8, { nodes: 8, perNode: 1, sharing: 8 }, undefined)).toBe(
      'doubling',
    );
    expect(flatAlgo(doublingMaxBytes(8, 1) + 1, 8)).toBe('doubling'); // default: every rank on this machine
  });

  it("a job's agreed model and cores replace this rank's own for the network tuner, said once at INFO", () => {
    const lines: string[] = [];
    vi.spyOn(console, 'error').mockImplementation((s: string) => void lines.push(s));
    useNetModel(MODEL, 64);
    const own = doublingMaxBytes(8, 8);
    const crowded: CostModel = { ...MODEL, cores: 2, tcp: { ...MODEL.tcp, wakeUs: 100 } };
    // the same costs: nothing changes
    adoptJobModel({ model: { ...MODEL, source: { rows: [] } }, cores: 64, from: "rank 0's x.json" }, 1);
    expect(lines.filter((l) => l.includes("job's cost model"))).toEqual([]);
    adoptJobModel({ model: crowded, cores: 2, from: "rank 0's crowded.json" }, 1);
    expect(doublingMaxBytes(8, 8)).toBe(crossoverBytes((b) => flatPredictions(crowded, 8, b, 2, 8), 'doubling'));
    expect(doublingMaxBytes(8, 8)).not.toBe(own);
    expect(netTuningBasis()).toMatchObject({ cores: 2, from: "rank 0's crowded.json" });
    expect(lines.filter((l) => l.includes("job's cost model"))).toEqual([
      expect.stringContaining(
        "rank 1: tuner: tunes with the job's cost model (rank 0's crowded.json, 2 cores), not this rank's own (useNetModel, 64 cores)",
      ),
    ]);
  });

  it('a model where ranks beyond the cores are dear favours the schedule with fewer steps', () => {
    const crowded: CostModel = { ...MODEL, cores: 2, tcp: { ...MODEL.tcp, wakeUs: 100 } };
    expect(crossoverBytes((b) => flatPredictions(crowded, 8, b, 2), 'doubling')).toBeGreaterThan(
      crossoverBytes((b) => flatPredictions(MODEL, 8, b, 2), 'doubling'),
    );
    const preds = shmPredictions(MODEL, 2, 1 << 20, 64);
    expect(preds.map((p) => p.algo)).toEqual(['direct', 'twoshot']);
  });
});

describe('INFO explains each choice once per collective, size class and topology', () => {
  it('names the choice and the predicted time of every alternative', () => {
    const lines: string[] = [];
    vi.spyOn(console, 'error').mockImplementation((s: string) => void lines.push(s));
    const t = resolveTuning(3, undefined, MODEL, 64);
    for (let i = 0; i < 5; i++) chooseAllReduceAlgo(1000, t);
    chooseAllReduceAlgo(1023, t); // same class (512 B..1 KiB)
    chooseAllReduceAlgo(1 << 24, t);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatch(
      /^webccl INFO tuner: allReduce of 512 B class on 3 ranks \(1 node, shm\): direct; predicted direct [\d.]+ us, twoshot [\d.]+ us$/,
    );
    expect(lines[1]).toMatch(
      /allReduce of 16 MiB class on 3 ranks .*: twoshot; predicted twoshot [\d.]+ ms, direct [\d.]+ ms/,
    );
    useNetModel(MODEL, 64);
    // (2 MiB: a class no other test of this file chose in)
    chooseNetAllReduce(2 << 20, 8, { nodes: 2, perNode: 4 }, undefined);
    chooseNetAllReduce(2 << 20, 8, { nodes: 2, perNode: 4 }, undefined);
    chooseNetAllReduce(2 << 20, 8, { nodes: 2, perNode: 4 }, undefined, 'ring');
    expect(lines, lines.join('\n')).toHaveLength(4);
    expect(lines[2]).toMatch(
      /2 MiB class on 8 ranks \(2 nodes x 4, tcp, 8 per machine\): hierarchical; predicted .*hierarchical.*/,
    );
    for (const a of ['ring', 'doubling', 'hierarchical']) expect(lines[2]).toContain(`${a} `);
    expect(lines[3]).toMatch(/: ring \(algo option\); predicted /);
  });
});

describe('channels per op: how many connections per pair a ring allReduce spreads over', () => {
  // A connection carries 0.5 GB/s at most (φ 2 ns per byte) and each one beyond the first costs
  // 400 us per step: more connections pay off only when the bytes per step are many.
  const FLOW: CostModel = {
    ...MODEL,
    tcp: { ...MODEL.tcp, alphaUs: 0, messageUs: 20, flowUsPerByte: 0.002, channelStepUs: 400 },
  };
  const P = 512 * 1024;

  it('weighs the flows against the cost per connection: the fewest that reach the least time, the most on a tie', () => {
    // 64 MiB on 2 ranks: 64 pieces a block in 4 lanes, 32 steps; (64 MiB / w)·φ + 32·(w − 1)·ω
    // is 134 ms, 79.9, 70.3 and 72.0 ms for w = 1..4
    const costs = ringChannelCosts(FLOW, 2, 64 << 20, P, 2, 64, 4);
    expect(costs.map((c) => c.channels)).toEqual([1, 2, 3, 4]);
    expect(costs[0].us - costs[2].us).toBeCloseTo(((64 << 20) * 0.002 * 2) / 3 - 2 * 32 * 400, 3);
    expect(ringChannels(FLOW, 2, 64 << 20, P, 2, 64, 4)).toBe(3);
    // a block in one piece is one message per step: every count ties, so all connections (as
    // without a choice); two pieces keep two lanes: 2 and more tie, the most is taken
    expect(ringChannels(FLOW, 2, 1 << 20, P, 2, 64, 4)).toBe(4);
    expect(ringChannels(FLOW, 2, 2 << 20, P, 2, 64, 4)).toBe(4);
    expect(ringChannels({ ...FLOW, tcp: { ...FLOW.tcp, channelStepUs: 1e6 } }, 2, 2 << 20, P, 2, 64, 4)).toBe(1);
    // no connection costs (the built-in model, models written before them): every connection
    expect(ringChannels(MODEL, 2, 64 << 20, P, 2, 64, 4)).toBe(4);
    expect(ringChannels(FLOW, 2, 64 << 20, P, 2, 64, 1)).toBe(1);
  });

  it('the ring is predicted over its best number of connections when the schedules are weighed', () => {
    const ring = (channels: number) =>
      flatPredictions(FLOW, 2, 64 << 20, 64, 2, channels).find((p) => p.algo === 'ring')!.us;
    expect(ring(4)).toBeLessThan(ring(2));
    expect(ring(2)).toBeLessThan(ring(1));
    expect(flatPredictions(FLOW, 2, 64 << 20, 64, 2, 4).find((p) => p.algo === 'doubling')!.us).toBe(
      flatPredictions(FLOW, 2, 64 << 20, 64, 2, 1).find((p) => p.algo === 'doubling')!.us,
    );
  });

  it("explains the choice once per size class at INFO, with each count's predicted time; says nothing with one connection", () => {
    const lines: string[] = [];
    vi.spyOn(console, 'error').mockImplementation((s: string) => void lines.push(s));
    useNetModel(FLOW, 64);
    expect(ringWays(64 << 20, 2, 2, P, 4)).toBe(3);
    expect(ringWays(100 << 20, 2, 2, P, 4)).toBe(3); // the same class
    expect(ringWays(64 << 20, 2, 2, P, 1)).toBe(1);
    expect(lines, lines.join('\n')).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^webccl INFO tuner: ring allReduce channels of 64 MiB class on 2 ranks \(tcp, 2 per machine, 4 connections per pair, 512 KiB pieces\): 3; predicted 3 [\d.]+ ms, 4 [\d.]+ ms, 2 [\d.]+ ms, 1 [\d.]+ ms$/,
    );
  });
});

describe('WEBCCL_ALGO', () => {
  it('plain form: one allReduce algorithm, for the engine that has it', () => {
    expect(parseAlgoSetting('twoshot')).toEqual({ allreduce: 'twoshot' });
    process.env.WEBCCL_ALGO = 'ring';
    expect(resolveTuning(2, undefined, MODEL).algo).toBeUndefined();
    expect(resolveNetAlgo(undefined, { nodes: 2, perNode: 1 })).toBe('ring');
  });

  it('per-collective form: allreduce:ring,allgather:ring', () => {
    expect(parseAlgoSetting('allreduce:ring,allgather:ring')).toEqual({ allreduce: 'ring', allgather: 'ring' });
    expect(parseAlgoSetting('AllReduce:twoshot, barrier:dissemination')).toEqual({
      allreduce: 'twoshot',
      barrier: 'dissemination',
    });
    expect(parseAlgoSetting('allgather:ring')).toEqual({ allgather: 'ring' });
    process.env.WEBCCL_ALGO = 'allreduce:twoshot,allgather:ring';
    expect(resolveTuning(2, undefined, MODEL).algo).toBe('twoshot');
    expect(resolveNetAlgo(undefined, { nodes: 2, perNode: 1 })).toBeUndefined();
    process.env.WEBCCL_ALGO = 'allgather:ring,allreduce:doubling';
    expect(resolveTuning(2, undefined, MODEL).algo).toBeUndefined();
    expect(resolveNetAlgo(undefined, { nodes: 2, perNode: 1 })).toBe('doubling');
    process.env.WEBCCL_ALGO = 'allgather:ring';
    expect(resolveTuning(2, undefined, MODEL).algo).toBeUndefined();
    expect(resolveNetAlgo(undefined, { nodes: 2, perNode: 1 })).toBeUndefined();
  });

  it('refuses an unknown collective or algorithm, naming it, on both engines', () => {
    const cases: [string, Record<string, string>][] = [
      ['allreduce:ring,allgathr:ring', { collective: 'allgathr' }],
      ['allreduce:rnig', { collective: 'allreduce', algorithm: 'rnig' }],
      ['allgather:doubling', { collective: 'allgather', algorithm: 'doubling' }],
      ['allreduce', { algorithm: 'allreduce' }],
      ['allreduce:', { collective: 'allreduce', algorithm: '' }],
      ['allreduce:ring,allreduce:twoshot', { collective: 'allreduce' }],
    ];
    for (const [value, details] of cases) {
      process.env.WEBCCL_ALGO = value;
      const e = caught(() => resolveTuning(2, undefined, MODEL));
      expect(e.code).toBe('INVALID_ARGUMENT');
      expect(e.details).toEqual(details);
      expect(e.message).toContain('WEBCCL_ALGO');
      for (const name of Object.values(details)) if (name) expect(e.message).toContain(name);
      expect(caught(() => resolveNetAlgo(undefined, { nodes: 2, perNode: 1 })).details).toEqual(details);
    }
  });
});
