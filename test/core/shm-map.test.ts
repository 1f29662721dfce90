// src/core/shm-map.ts mirrors assembly/engine/shm-map.ts: every shared constant must agree.
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { DTYPE_CODE, OP_CODE } from '../../src/core/dtypes.js';
import {
  ALGO,
  C,
  D,
  DESC_BYTES,
  descOffset,
  E,
  FLAG_STRIDE,
  flagOffset,
  KIND,
  MAX_RANKS,
  N,
  REASON_BYTES,
  SIG_BYTES,
  SIG_START,
  SLOT_BUFFERS,
  ST,
  sigOffset,
} from '../../src/core/shm-map.js';

const text =
  readFileSync(new URL('../../assembly/engine/shm-map.ts', import.meta.url), 'utf8') +
  readFileSync(new URL('../../assembly/kernels/codes.ts', import.meta.url), 'utf8');
const as: Record<string, number> = {};
for (const m of text.matchAll(/export const (\w+): [iu]32 = (\d+);/g)) as[m[1]] = Number(m[2]);

it('descriptor, communicator and status constants agree', () => {
  for (const [k, v] of Object.entries(D)) expect([`D_${k}`, as[`D_${k}`]]).toEqual([`D_${k}`, v]);
  for (const [k, v] of Object.entries(C)) if (`C_${k}` in as) expect([`C_${k}`, as[`C_${k}`]]).toEqual([`C_${k}`, v]);
  for (const [k, v] of Object.entries(ST)) expect(as[`ST_${k}`]).toBe(v);
  for (const [k, v] of Object.entries(E)) expect(as[`E_${k}`]).toBe(v);
  expect(as.C_HEADER_BYTES).toBe(C.HEADER_BYTES);
  expect([as.DESC_BYTES, as.FLAG_STRIDE, as.SIG_BYTES, as.SLOT_BUFFERS, as.MAX_RANKS]).toEqual([
    DESC_BYTES,
    FLAG_STRIDE,
    SIG_BYTES,
    SLOT_BUFFERS,
    MAX_RANKS,
  ]);
  expect([
    as.K_ALLREDUCE,
    as.K_ALLGATHER,
    as.K_REDUCESCATTER,
    as.K_BROADCAST,
    as.K_REDUCE,
    as.K_BARRIER,
    as.K_ALLTOALL,
    as.K_GATHER,
    as.K_SCATTER,
    as.K_SEND,
    as.K_RECV,
  ]).toEqual(Object.values(KIND));
  expect([as.A_DIRECT, as.A_TWOSHOT]).toEqual(Object.values(ALGO));
  // The start stamp (an f64, 8-byte aligned) lies past every field the step loops write.
  expect(as.S_START).toBe(SIG_START);
  expect(SIG_START % 8).toBe(0);
  expect(SIG_START).toBeGreaterThanOrEqual(as.S_OUT + 4);
  expect(SIG_START + 8).toBeLessThanOrEqual(SIG_BYTES);
  // Signature records (as assembly sigAddr lays them out): after the flags, two per rank by seq parity, then the
  // descriptors.
  expect(sigOffset(1024, 4, 0, 0)).toBe(flagOffset(1024, 4));
  expect(sigOffset(1024, 4, 1, 3) - sigOffset(1024, 4, 1, 2)).toBe(SIG_BYTES);
  expect(sigOffset(1024, 4, 3, 1) + SIG_BYTES).toBe(descOffset(1024, 4, 0));
});

it('node header fields agree, and the per-rank and reason areas fit inside their headers', () => {
  expect(as.NODE_MAGIC).toBe(N.MAGIC);
  expect(as.NODE_ABORT).toBe(N.ABORT);
  expect(N.LEFT % 64).toBe(0);
  expect(N.LEFT + 4 * MAX_RANKS).toBeLessThanOrEqual(N.REASON);
  expect(N.REASON + REASON_BYTES).toBeLessThanOrEqual(N.HEADER_BYTES);
  expect(N.HEADER_BYTES % 64).toBe(0);
  expect(C.REASON).toBeGreaterThanOrEqual(C.SLEEPERS + 4);
  expect(C.REASON + REASON_BYTES).toBeLessThanOrEqual(C.HEADER_BYTES);
  expect(C.HEADER_BYTES % 64).toBe(0);
});

it('dtype and op codes agree', () => {
  const names: Record<string, string> = {
    f32: 'DT_F32',
    f64: 'DT_F64',
    i32: 'DT_I32',
    u32: 'DT_U32',
    i8: 'DT_I8',
    u8: 'DT_U8',
    i64: 'DT_I64',
    bf16: 'DT_BF16',
    f16: 'DT_F16',
  };
  for (const [d, v] of Object.entries(DTYPE_CODE)) expect(as[names[d]]).toBe(v);
  for (const [o, v] of Object.entries(OP_CODE)) expect(as[`OP_${o.toUpperCase()}`]).toBe(v);
});
