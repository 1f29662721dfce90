// Every allReduce algorithm name × sizes on both sides of every routing threshold × every path
// an op takes (the rank itself, the node's progress thread, the network progress thread), on
// thread ranks, processes and two nodes of two threads, in every progress mode: each name is
// either exact at every size or refused at issue alike at every size, and the names each launch
// form accepts are the ones docs promise (one node: direct, twoshot; across nodes: ring,
// doubling, tree, and hierarchical where every node holds as many of the communicator's ranks).
import { describe, expect, it } from 'vitest';
import { DEFAULT_SLOT_BYTES } from '../../src/core/node.js';
import { RANK_RUNS_MAX_BYTES } from '../../src/progress/net-route.js';
import { doublingMaxBytes, NET_ALGORITHMS } from '../../src/tuner/net-tuner.js';
import { ALGORITHMS, directMaxBytes } from '../../src/tuner/tuner.js';
import { launchFixture } from '../helpers/launch-fixture.js';
import { type Form, launchForm, stdoutOf } from '../helpers/launch-forms.js';

const f = launchFixture(new URL('fixtures/algo-grid.mjs', import.meta.url), 'algo-grid');
const NAMES = [...ALGORITHMS, ...NET_ALGORITHMS, 'nope'];
const SHM = new Set<string>(ALGORITHMS);
const NET = new Set<string>(NET_ALGORITHMS);

/** f32 sizes (bytes) around `thresholds`, with the edges: none, one element, three. */
function sizesAround(thresholds: number[]): number[] {
  const near = thresholds.flatMap((t) => [t - 4, t + 4].map((b) => Math.max(4, b - (b % 4))));
  return [...new Set([0, 4, 12, ...near, (1 << 20) + 12])].sort((a, b) => a - b);
}

interface Case {
  name: string;
  form: Form;
  n: number;
  progress: 'auto' | 'thread' | 'caller';
  bytes: number[];
  groups?: number[][];
  /** The names each communicator accepts (the others are refused at issue). */
  accepts: Record<string, Set<string>>;
}

const oneNode = sizesAround([directMaxBytes(4), DEFAULT_SLOT_BYTES]);
// The network's thresholds: the rank's own path below RANK_RUNS_MAX_BYTES ('auto'), recursive
// doubling below the model's crossover (3 ranks on one machine; 4; the 2 nodes of a hierarchical op).
const net = sizesAround([RANK_RUNS_MAX_BYTES, doublingMaxBytes(3, 3), doublingMaxBytes(4, 4), doublingMaxBytes(2, 4)]);
const cases: Case[] = [
  ...(['auto', 'thread', 'caller'] as const).map((progress) => ({
    name: `4 thread ranks, ${progress} progress`,
    form: 'threads' as Form,
    n: 4,
    progress,
    bytes: oneNode,
    accepts: { world: SHM },
  })),
  ...(['auto', 'thread', 'caller'] as const).map((progress) => ({
    name: `3 processes (one rank a node), ${progress} progress`,
    form: 'procs' as Form,
    n: 3,
    progress,
    bytes: net,
    accepts: { world: NET },
  })),
  ...(['auto', 'caller'] as const).map((progress) => ({
    name: `2 nodes x 2 threads, ${progress} progress, with a group of one rank a node and an uneven one`,
    form: 'nnodes' as Form,
    n: 4,
    progress,
    bytes: net,
    groups: [
      [0, 2],
      [0, 1, 2],
    ],
    accepts: { world: NET, 'group 0,2': NET, 'group 0,1,2': new Set([...NET].filter((a) => a !== 'hierarchical')) },
  })),
];

describe('every allReduce algorithm at every size on every path', () => {
  for (const c of cases) {
    it(`${c.name}: each name exact at every size, or refused at issue at every size`, async () => {
      const runs = await launchForm(
        f,
        c.form,
        c.n,
        [JSON.stringify({ algos: NAMES, bytes: c.bytes, groups: c.groups })],
        { WEBCCL_PROGRESS: c.progress },
      );
      const out = stdoutOf(runs);
      for (const r of runs) expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
      const grids = [...out.matchAll(/^grid (\d+) (.*)$/gm)].map(
        (m) => [Number(m[1]), JSON.parse(m[2]) as Record<string, string>] as const,
      );
      expect(grids.map(([r]) => r).sort(), out).toEqual([...Array(c.n).keys()]);
      for (const [rank, grid] of grids) {
        const want: Record<string, string> = {};
        for (const key of Object.keys(grid)) {
          const comm = key.split('/')[0];
          const algo = key.split('/')[1];
          want[key] = c.accepts[comm].has(algo) ? 'ok' : 'INVALID_ARGUMENT';
        }
        expect(grid, `rank ${rank}`).toEqual(want);
        // Every communicator the rank is in, every name, every size and both paths were run.
        const comms = Object.keys(c.accepts).filter(
          (comm) => comm === 'world' || comm.slice(6).split(',').map(Number).includes(rank),
        );
        expect(Object.keys(grid).length).toBe(comms.length * NAMES.length * c.bytes.length * 2);
      }
    }, 300_000);
  }
});
