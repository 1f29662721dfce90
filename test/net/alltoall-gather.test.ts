// allToAll (equal blocks and per-peer counts), gather and scatter across nodes over real TCP on
// loopback, in this process: topologies (nodes × ranks per node) × dtypes × sizes (0, 1, fewer
// elements than ranks, not divisible, several 512 KiB pieces) × plain and zero-copy buffers ×
// every root, in place and not, on closed-form data, on the SIMD build (and one topology on the scalar build).
// Per-peer counts cover zeros and an uneven matrix with one block of several pieces.
// test/net/mismatch.test.ts has the ranks that disagree.
import { afterAll, describe, expect, it } from 'vitest';
import type { Communicator } from '../../src/api/communicator.js';
import { firstWrong, inputArray, SIZE } from '../helpers/closed-form.mjs';
import { all, destroyAll, netRanks } from '../helpers/net-world.js';

const PIECE = 512 * 1024;
const DTYPES = ['f32', 'f64', 'u8', 'bf16'];
const TOPOLOGIES: [number, number][] = [
  [2, 1],
  [3, 1],
  [4, 1],
  [2, 2],
];
/** Elements per block (allToAll) or per rank (gather, scatter). */
const sizesFor = (dtype: string, big: boolean) => [
  0,
  1,
  3,
  1001,
  ...(big ? [Math.ceil((2.5 * PIECE) / SIZE[dtype]) + 7] : []),
];
const BIG = new Set(['f32', 'u8']);
const ARRAY: Record<string, any> = { f32: Float32Array, f64: Float64Array, u8: Uint8Array, bf16: Uint16Array };

type Buf = { arg: any; data: any };
/** A buffer of `count` elements holding `init` (or zeros): a plain array, or comm.alloc()'s. */
function place(c: Communicator, dtype: string, count: number, zeroCopy: boolean, init?: ArrayLike<number>): Buf {
  let b: Buf;
  if (zeroCopy) {
    const a = c.alloc(dtype as any, count) as any;
    b = { arg: a, data: a.data ?? a };
  } else {
    const data = new ARRAY[dtype](count);
    b = { arg: dtype === 'bf16' ? { data, dtype } : data, data };
  }
  if (init) for (let i = 0; i < count; i++) b.data[i] = init[i];
  return b;
}
const release = (c: Communicator, b: Buf | null, zc: boolean) => zc && b && c.free(b.arg);

/** Rank r's data: distinct per rank and index (bf16 codes of small integers). */
const dataOf = (dtype: string, r: number, count: number): number[] =>
  inputArray('sum', dtype, r, count).slice(0, count);
const prefix = (counts: number[]) => {
  const out = [0];
  for (const c of counts) out.push(out[out.length - 1] + c);
  return out;
};

/**
 * Runs allToAll with the matrix `m` (m[i][j] = elements rank i sends rank j) and checks every
 * output element; `equal` runs the equal-blocks form (m must then be constant).
 */
async function exchange(
  cs: Communicator[],
  dtype: string,
  m: number[][],
  zc: boolean,
  equal: boolean,
  wrong: string[],
  tag: string,
) {
  const n = cs.length;
  const send = (i: number) => m[i];
  const recv = (j: number) => m.map((row) => row[j]);
  const sum = (a: number[]) => a.reduce((x, y) => x + y, 0);
  const ins = cs.map((c, r) => place(c, dtype, sum(send(r)), zc, dataOf(dtype, r, sum(send(r)))));
  const outs = cs.map((c, r) => place(c, dtype, sum(recv(r)), zc));
  await all(cs, (c, r) =>
    c.allToAll(outs[r].arg, ins[r].arg, equal ? undefined : { sendCounts: send(r), recvCounts: recv(r) }),
  );
  for (let r = 0; r < n; r++) {
    const at = prefix(recv(r));
    for (let j = 0; j < n; j++) {
      const from = dataOf(dtype, j, sum(send(j)));
      const off = prefix(send(j))[r];
      const got = outs[r].data.subarray(at[j], at[j] + m[j][r]);
      const i = firstWrong(got, (k: number) => from[off + k]);
      if (i >= 0) wrong.push(`${tag} rank ${r} block from ${j}: element ${i} is ${got[i]}, expected ${from[off + i]}`);
    }
    const own = dataOf(dtype, r, sum(send(r)));
    const i = firstWrong(ins[r].data, (k: number) => own[k]);
    if (i >= 0) wrong.push(`${tag} rank ${r}: input changed at ${i}`);
    release(cs[r], ins[r], zc);
    release(cs[r], outs[r], zc);
  }
}

/** The scalar build copies with its own kernel: one topology shows it. */
const RUNS = [...TOPOLOGIES.map(([a, b]) => [a, b, 'simd'] as const), [3, 1, 'scalar'] as const];

describe('allToAll, gather and scatter across nodes over TCP', () => {
  for (const [nodes, perNode, build] of RUNS) {
    const n = nodes * perNode;
    const topo = `${nodes} node(s) × ${perNode} rank(s), ${build} build`;
    let cs: Communicator[] = [];
    const comms = async () => (cs.length ? cs : (cs = await netRanks(nodes, perNode, { simd: build === 'simd' })));
    afterAll(() => destroyAll(cs));

    it(`allToAll with equal blocks over ${topo}`, async () => {
      const c = await comms();
      const wrong: string[] = [];
      for (const dtype of DTYPES)
        for (const count of sizesFor(dtype, BIG.has(dtype)))
          for (const zc of [false, true]) {
            const m = Array.from({ length: n }, () => Array<number>(n).fill(count));
            await exchange(c, dtype, m, zc, true, wrong, `${dtype} block ${count}${zc ? ' zero-copy' : ''}`);
          }
      expect(wrong.slice(0, 5)).toEqual([]);
    }, 120_000);

    it(`allToAll with per-peer counts (zeros, uneven, one block of several pieces) over ${topo}`, async () => {
      const c = await comms();
      const wrong: string[] = [];
      const big = Math.ceil((2.5 * PIECE) / 4) + 3;
      const matrices: [string, number[][]][] = [
        ['all zero', Array.from({ length: n }, () => Array<number>(n).fill(0))],
        [
          'zeros and ones',
          Array.from({ length: n }, (_, i) => Array.from({ length: n }, (_, j) => ((i + 2 * j) % 3 === 0 ? 0 : 1))),
        ],
        [
          'uneven',
          Array.from({ length: n }, (_, i) =>
            Array.from({ length: n }, (_, j) => ((i * 7 + j * 3) % 5) * 13 + (i === j ? 0 : i)),
          ),
        ],
        [
          'one big block',
          Array.from({ length: n }, (_, i) =>
            Array.from({ length: n }, (_, j) => (i === 0 && j === n - 1 ? big : (i + j) % 2 ? 0 : 5)),
          ),
        ],
      ];
      for (const dtype of DTYPES)
        for (const [what, m] of matrices)
          for (const zc of [false, true]) {
            if (what === 'one big block' && dtype !== 'f32') continue;
            await exchange(c, dtype, m, zc, false, wrong, `${dtype} ${what}${zc ? ' zero-copy' : ''}`);
          }
      // the flight record gives a per-peer allToAll the elements this rank sends
      const last = (m: number[][]) => m[n - 1].reduce((a, b) => a + b, 0);
      expect(c[n - 1].flightRecord().at(-1)).toMatchObject({
        collective: 'allToAll',
        count: last(matrices[2][1]),
        state: 'done',
      });
      // per-peer counts that equal the equal-blocks form interoperate with it
      const m = Array.from({ length: n }, () => Array<number>(n).fill(4));
      const ins = c.map((_, r) => Float32Array.from(dataOf('f32', r, 4 * n)));
      const outs = c.map(() => new Float32Array(4 * n));
      await all(c, (cm, r) =>
        cm.allToAll(outs[r], ins[r], r === 0 ? undefined : { sendCounts: m[r], recvCounts: m[r] }),
      );
      outs.forEach((o, r) =>
        c.forEach((_, j) => expect([...o.subarray(4 * j, 4 * j + 4)]).toEqual([...ins[j].subarray(4 * r, 4 * r + 4)])),
      );
      // the flight record names the schedule
      expect(c[n - 1].flightRecord().at(-1)).toMatchObject({
        collective: 'allToAll',
        algorithm: 'pairwise',
        state: 'done',
        error: null,
      });
      expect(wrong.slice(0, 5)).toEqual([]);
    }, 120_000);

    it(`gather and scatter from every root over ${topo}`, async () => {
      const c = await comms();
      const wrong: string[] = [];
      const check = (what: string, data: any, want: ArrayLike<unknown>, off = 0) => {
        const i = firstWrong(data, (k: number) => want[off + k]);
        if (i >= 0) wrong.push(`${what}: element ${i} is ${data[i]}, expected ${want[off + i]}`);
      };
      for (const dtype of DTYPES)
        for (const count of sizesFor(dtype, BIG.has(dtype)))
          for (const zc of [false, true])
            for (let root = 0; root < n; root++) {
              const tag = `${dtype} count ${count} root ${root}${zc ? ' zero-copy' : ''}`;
              // gather: the root's block r is rank r's input; non-roots pass null
              const ins = c.map((cm, r) => place(cm, dtype, count, zc, dataOf(dtype, r, count)));
              const out = place(c[root], dtype, n * count, zc);
              await all(c, (cm, r) => cm.gather(r === root ? out.arg : null, ins[r].arg, { root }));
              for (let r = 0; r < n; r++)
                check(
                  `gather ${tag}: block ${r}`,
                  out.data.subarray(r * count, (r + 1) * count),
                  dataOf(dtype, r, count),
                );
              ins.forEach((b, r) =>
                check(`gather ${tag}: input changed on rank ${r}`, b.data, dataOf(dtype, r, count)),
              );
              // scatter: rank r's output is block r of the root's input
              const src = place(c[root], dtype, n * count, zc, dataOf(dtype, root, n * count));
              const outs = c.map((cm) => place(cm, dtype, count, zc));
              await all(c, (cm, r) => cm.scatter(outs[r].arg, r === root ? src.arg : null, { root }));
              outs.forEach((o, r) =>
                check(`scatter ${tag}: rank ${r}`, o.data, dataOf(dtype, root, n * count), r * count),
              );
              check(`scatter ${tag}: root's input changed`, src.data, dataOf(dtype, root, n * count));
              c.forEach((cm, r) => [ins[r], outs[r]].forEach((b) => release(cm, b, zc)));
              release(c[root], out, zc);
              release(c[root], src, zc);
            }
      // in place: the root's input is its own block of the output (gather), its output its own
      // block of the input (scatter)
      for (const zc of [false, true])
        for (const root of [0, n - 1]) {
          const count = 1001,
            tag = `in place, root ${root}${zc ? ' zero-copy' : ''}`;
          const whole = place(c[root], 'f32', n * count, zc, dataOf('f32', root, n * count));
          const own = () => whole.data.subarray(root * count, (root + 1) * count);
          const ins = c.map((cm, r) => (r === root ? null : place(cm, 'f32', count, zc, dataOf('f32', r, count))));
          await all(c, (cm, r) =>
            r === root ? cm.gather(whole.arg, own(), { root }) : cm.gather(null, ins[r]!.arg, { root }),
          );
          for (let r = 0; r < n; r++)
            check(
              `gather ${tag}: block ${r}`,
              whole.data.subarray(r * count, (r + 1) * count),
              r === root ? dataOf('f32', root, n * count).slice(root * count) : dataOf('f32', r, count),
            );
          const outs = c.map((cm, r) => (r === root ? null : place(cm, 'f32', count, zc)));
          const sent = [...whole.data];
          await all(c, (cm, r) =>
            r === root ? cm.scatter(own(), whole.arg, { root }) : cm.scatter(outs[r]!.arg, null, { root }),
          );
          outs.forEach((o, r) => o && check(`scatter ${tag}: rank ${r}`, o.data, sent, r * count));
          check(`scatter ${tag}: root`, whole.data, sent);
          c.forEach((cm, r) => [ins[r], outs[r]].forEach((b) => release(cm, b, zc)));
          release(c[root], whole, zc);
        }
      expect(wrong.slice(0, 5)).toEqual([]);
      expect(c[0].flightRecord().slice(-2)).toMatchObject([
        { collective: 'gather', algorithm: 'direct', root: n - 1, state: 'done' },
        { collective: 'scatter', algorithm: 'direct', state: 'done' },
      ]);
      await all(c, (cm) => cm.barrier());
    }, 180_000);
  }
});
