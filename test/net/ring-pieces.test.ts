// The ring allReduce's piece size. In this process over TCP loopback: with
// WEBCCL_PIECE_BYTES=4096 a block of a few thousand floats is many pieces in four lanes, with
// counts that divide by neither the ranks nor the piece, flat (3 nodes) and as the network phase
// of hierarchical (2 nodes × 2), in place and out of place; a bad value fails the communicator.
// Across processes (webccl run --procs -n 2, and --nnodes with 2 nodes of one rank), with the
// rank script test/net/fixtures/ring-pieces.mjs checking every element: the model's choice is
// logged at INFO and the data arrives whole in it; WEBCCL_PIECE_BYTES forces a size; ranks that
// disagree on it fail with MISMATCH naming the piece size, never exchange pieces that do not line
// up; ranks with different model files tune with the one the job agreed on; the model's choice of
// how many connections the ring uses, logged at INFO.
import { writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/api/communicator.js';
import { activeModel } from '../../src/tuner/model-source.js';
import { ringPieceBytes } from '../../src/tuner/ring-pieces.js';
import type { Env } from '../helpers/jobs.js';
import { launchFixture } from '../helpers/launch-fixture.js';
import { joined, launchForm } from '../helpers/launch-forms.js';
import { all, destroyAll, netRanks } from '../helpers/net-world.js';

const saved = process.env.WEBCCL_PIECE_BYTES;
const restore = () => {
  if (saved === undefined) delete process.env.WEBCCL_PIECE_BYTES;
  else process.env.WEBCCL_PIECE_BYTES = saved;
};

describe.each([
  [3, 1, 'ring'],
  [2, 2, 'hierarchical'],
] as const)('WEBCCL_PIECE_BYTES=4096, %i node(s) × %i rank(s), %s', (nodes, perNode, algo) => {
  let cs: Communicator[] = [];
  afterAll(() => destroyAll(cs));

  it('allReduce sum (f32) and max (i32), in place and out of place: every element right', async () => {
    process.env.WEBCCL_PIECE_BYTES = '4096';
    try {
      cs = await netRanks(nodes, perNode);
    } finally {
      restore(); // read when the communicator is made
    }
    const n = nodes * perNode;
    for (const count of [0, 1, 1001, 30_011, 300_007]) {
      for (const outOfPlace of [false, true]) {
        const xs = cs.map((_, r) => Float32Array.from({ length: count }, (_, i) => (i % 11) + r));
        const outs = cs.map(() => new Float32Array(count));
        await all(cs, (c, r) => c.allReduce(xs[r], { algo, ...(outOfPlace ? { out: outs[r] } : {}) }));
        for (let r = 0; r < n; r++) {
          const got = outOfPlace ? outs[r] : xs[r];
          const bad = got.findIndex((v, i) => v !== n * (i % 11) + (n * (n - 1)) / 2);
          expect(bad, `${count} floats, rank ${r}, ${outOfPlace ? 'out of place' : 'in place'}: element ${bad}`).toBe(
            -1,
          );
        }
        const ys = cs.map((_, r) => Int32Array.from({ length: count }, (_, i) => ((i * 7 + r * 13) % 101) - 50));
        await all(cs, (c, r) => c.allReduce(ys[r], { op: 'max', algo }));
        for (let r = 0; r < n; r++) {
          const bad = ys[r].findIndex((v, i) => v !== Math.max(...cs.map((_, q) => ((i * 7 + q * 13) % 101) - 50)));
          expect(bad, `${count} ints max, rank ${r}: element ${bad}`).toBe(-1);
        }
      }
    }
  });
});

describe('a bad WEBCCL_PIECE_BYTES', () => {
  afterEach(restore);
  it('fails every rank at communicator creation with INVALID_ARGUMENT naming it', async () => {
    process.env.WEBCCL_PIECE_BYTES = '1000';
    const err = await netRanks(2, 1, { timeoutMs: 10_000 }).then(destroyAll, (e) => e);
    expect(err?.code).toBe('INVALID_ARGUMENT');
    expect(err?.message).toContain('WEBCCL_PIECE_BYTES=1000');
  });
});

const f = launchFixture(new URL('fixtures/ring-pieces.mjs', import.meta.url), 'pieces');
const { tmp } = f;

/** Two ranks across nodes: one launcher with --procs, or two --nnodes launchers of one rank each. */
const launch = async (form: 'procs' | 'nnodes', mode: string, extra?: Env, args: string[] = []) =>
  joined(await launchForm(f, form, 2, [mode, ...args], extra, { guardMs: 120_000 }));
const oks = (out: string) => (out.match(/^ok rank \d of 2$/gm) ?? []).sort();
const show = (b: number) => (b >= 1 << 20 ? `${b / (1 << 20)} MiB` : `${b / 1024} KiB`);

describe.each(['procs', 'nnodes'] as const)(
  'webccl run --%s, 2 ranks across nodes: the ring allReduce in pieces',
  (form) => {
    it("the model's piece size, logged at INFO with the cost of each size weighed; every element right", async () => {
      const r = await launch(form, 'tuned', { WEBCCL_DEBUG: 'INFO' });
      expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
      expect(oks(r.stdout)).toEqual(['ok rank 0 of 2', 'ok rank 1 of 2']);
      const piece = ringPieceBytes(activeModel().model, 2, (4 << 20) + 12, 2, availableParallelism());
      const line = r.stderr
        .split('\n')
        .find((l) => l.includes('tuner: ring allReduce pieces of 4 MiB class on 2 ranks'));
      expect(line, r.stderr).toBeDefined();
      expect(line).toContain(`: ${show(piece)}; piece-dependent time `);
      expect(line).toContain('64 KiB ');
    });

    it("3 connections per pair and a model where a connection carries 1 GB/s at most and costs 500 us a step: the ring's messages go on 2 of them, said at INFO; every element right", async () => {
      // 4 MiB + 12 B in 512 KiB pieces: 5 a block, 4 lanes, 4 steps; (S / w)·φ + 4·(w − 1)·ω is
      // 4.19, 4.10 and 5.40 ms for w = 1, 2, 3
      const flows = join(tmp, 'flows-model.json');
      const tcp = {
        alphaUs: 0,
        wakeUs: 0,
        betaBytesPerUs: 5000,
        gammaBytesPerUs: 5000,
        messageUs: 10,
        flowUsPerByte: 0.001,
        channelStepUs: 500,
      };
      writeFileSync(
        flows,
        JSON.stringify({
          version: 1,
          cores: 2,
          shm: { alphaUs: 1, wakeUs: 0, betaBytesPerUs: null, gammaBytesPerUs: null },
          tcp,
        }),
      );
      const r = await launch(form, 'tuned', {
        WEBCCL_DEBUG: 'INFO',
        WEBCCL_MODEL: flows,
        WEBCCL_NCHANNELS: '3',
        WEBCCL_PIECE_BYTES: '524288',
      });
      expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
      expect(oks(r.stdout)).toEqual(['ok rank 0 of 2', 'ok rank 1 of 2']);
      const line = r.stderr
        .split('\n')
        .find((l) => l.includes('tuner: ring allReduce channels of 4 MiB class on 2 ranks'));
      expect(line, r.stderr).toMatch(
        /\(tcp, 2 per machine, 3 connections per pair, 512 KiB pieces\): 2; predicted 2 [\d.]+ ms, 1 [\d.]+ ms, 3 [\d.]+ ms$/,
      );
    });

    it('WEBCCL_PIECE_BYTES=65536 on every rank: every element right', async () => {
      const r = await launch(form, 'forced');
      expect({ code: r.code, hung: r.hung }, r.stderr).toEqual({ code: 0, hung: false });
      expect(oks(r.stdout)).toEqual(['ok rank 0 of 2', 'ok rank 1 of 2']);
    });

    it("ranks with different model files tune with the job's one model: the same algorithm and pieces, every element right", async () => {
      // Everything free: this model ties every schedule (doubling, listed first, wins) and keeps
      // 512 KiB pieces; the built-in one runs 4 MiB as the ring, in 2 MiB pieces.
      const free = join(tmp, 'free-model.json');
      const costs = { alphaUs: 0, wakeUs: 0, betaBytesPerUs: null, gammaBytesPerUs: null, messageUs: 0 };
      writeFileSync(free, JSON.stringify({ version: 1, cores: 2, shm: costs, tcp: costs }));
      const r = await launch(form, 'models', { WEBCCL_DEBUG: 'INFO' }, [free]);
      expect({ code: r.code, hung: r.hung }, r.stdout + r.stderr).toEqual({ code: 0, hung: false });
      expect(oks(r.stdout), r.stdout).toEqual(['ok rank 0 of 2', 'ok rank 1 of 2']);
      // the rank whose own model lost says whose it tunes with (the first rank at the store)
      expect(r.stderr).toMatch(
        /tuner: tunes with the job's cost model \(rank \d's (built-in model|\S+free-model\.json), \d+ cores\), not this rank's own/,
      );
    });

    it("a rank whose own model file is missing still fails INVALID_ARGUMENT naming it (the job's model does not hide it)", async () => {
      const missing = join(tmp, 'no-such-model.json');
      // (it fails before it joins: across nodes its peers wait for it until the connect deadline)
      const r = await launch(form, 'models', { WEBCCL_CONNECT_TIMEOUT_MS: '5000' }, [missing]);
      expect(r.hung, r.stderr).toBe(false);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/INVALID_ARGUMENT/);
      expect(r.stderr).toContain(`WEBCCL_MODEL: cannot read ${missing}`);
    });

    it('ranks that disagree on WEBCCL_PIECE_BYTES: MISMATCH on both, naming the field (piece) and both sizes', async () => {
      const r = await launch(form, 'disagree');
      expect(r.hung, r.stderr).toBe(false);
      const failed = (r.stdout.match(/^failed rank \d code \S+ field \S+: .*$/gm) ?? []).sort();
      expect(failed.length, r.stdout + r.stderr).toBe(2);
      for (const f of failed) {
        expect(f).toMatch(/code MISMATCH field piece/);
        expect(f).toContain('65536 bytes');
        expect(f).toContain('131072 bytes');
      }
    });
  },
);
