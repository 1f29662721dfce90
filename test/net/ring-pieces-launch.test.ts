// The ring allReduce's piece size across processes (webccl run --procs -n 2, and --nnodes with
// 2 nodes of one rank; TCP loopback): the
// model's choice is logged at INFO and the data arrives whole in it; WEBCCL_PIECE_BYTES forces a
// size; ranks that disagree on it fail with MISMATCH naming the piece size, never exchange pieces
// that do not line up; ranks with different model files tune with the one the job agreed on; the
// model's choice of how many connections the ring uses, logged at INFO.
// The rank script (test/net/fixtures/ring-pieces.mjs) checks every element.

import { writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { activeModel } from '../../src/tuner/model-source.js';
import { ringPieceBytes } from '../../src/tuner/ring-pieces.js';
import { cleanEnv, type Env, run } from '../helpers/jobs.js';
import { launchFixture } from '../helpers/launch-fixture.js';
import { freePort } from '../helpers/net.js';

const { root, bin, script, tmp } = launchFixture(new URL('fixtures/ring-pieces.mjs', import.meta.url), 'pieces');

const env = (extra: Env = {}): Env => cleanEnv({ HOME: join(tmp, 'home'), ...extra });
/** Two ranks across nodes: one launcher with --procs, or two --nnodes launchers of one rank each. */
async function launch(
  form: 'procs' | 'nnodes',
  mode: string,
  extra?: Env,
  args: string[] = [],
): Promise<{ code: number | null; hung: boolean; stdout: string; stderr: string }> {
  if (form === 'procs')
    return run(process.execPath, [bin, 'run', '--procs', '-n', '2', script, mode, ...args], env(extra), 120_000, root);
  const port = String(await freePort());
  const runs = await Promise.all(
    [0, 1].map((k) =>
      run(
        process.execPath,
        [
          bin,
          'run',
          '--nnodes',
          '2',
          '--node-rank',
          String(k),
          '--nproc-per-node',
          '1',
          '--master-addr',
          '127.0.0.1',
          '--master-port',
          port,
          script,
          mode,
          ...args,
        ],
        env({ WEBCCL_TOKEN: 'ring-pieces-test', ...extra }),
        120_000,
        root,
      ),
    ),
  );
  return {
    code: runs.some((r) => r.code !== 0) ? runs.find((r) => r.code !== 0)!.code : 0,
    hung: runs.some((r) => r.hung),
    stdout: runs.map((r) => r.stdout).join(''),
    stderr: runs.map((r) => r.stderr).join(''),
  };
}
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
