// busbw arithmetic exactly as nccl-tests' doc/PERFORMANCE.md, and how sizes map to counts.
import { describe, expect, it } from 'vitest';
import {
  bandwidths,
  busBwFactor,
  COLLECTIVES,
  HAS_IN_PLACE,
  HAS_ROOT,
  LEGS,
  shapeOf,
  sweepSizes,
} from '../../src/launch/perf/collectives.js';

describe('busBwFactor', () => {
  it.each([1, 2, 3, 4, 8, 64])('n = %d', (n) => {
    expect(busBwFactor('allreduce', n)).toBeCloseTo((2 * (n - 1)) / n, 15);
    expect(busBwFactor('allgather', n)).toBeCloseTo((n - 1) / n, 15);
    expect(busBwFactor('reducescatter', n)).toBeCloseTo((n - 1) / n, 15);
    expect(busBwFactor('broadcast', n)).toBe(1);
    expect(busBwFactor('reduce', n)).toBe(1);
    expect(busBwFactor('alltoall', n)).toBeCloseTo((n - 1) / n, 15);
    expect(busBwFactor('gather', n)).toBeCloseTo((n - 1) / n, 15);
    expect(busBwFactor('scatter', n)).toBeCloseTo((n - 1) / n, 15);
    expect(busBwFactor('sendrecv', n)).toBe(1);
    expect(busBwFactor('pingpong', n)).toBe(1);
  });

  it('has the textbook values', () => {
    expect(busBwFactor('allreduce', 2)).toBe(1);
    expect(busBwFactor('allreduce', 4)).toBe(1.5);
    expect(busBwFactor('allgather', 4)).toBe(0.75);
    expect(busBwFactor('reducescatter', 2)).toBe(0.5);
    expect(busBwFactor('allreduce', 1)).toBe(0);
    expect(busBwFactor('alltoall', 4)).toBe(0.75);
    expect(busBwFactor('alltoall', 2)).toBe(0.5);
    expect(busBwFactor('gather', 8)).toBe(0.875);
    expect(busBwFactor('scatter', 4)).toBe(0.75);
  });

  it('pingpong reports one message per leg: a call is there and back', () => {
    expect(LEGS.pingpong).toBe(2);
    for (const c of COLLECTIVES.filter((x) => x !== 'pingpong')) expect(LEGS[c]).toBe(1);
  });

  it('alltoall, sendrecv and pingpong have no in-place form; the others do', () => {
    expect(COLLECTIVES.filter((c) => !HAS_IN_PLACE[c])).toEqual(['alltoall', 'sendrecv', 'pingpong']);
    expect(COLLECTIVES.filter((c) => HAS_ROOT[c])).toEqual(['broadcast', 'reduce', 'gather', 'scatter']);
  });
});

describe('bandwidths', () => {
  it('algbw = size / time in GB/s (1e9), busbw = algbw × factor', () => {
    // 64 MiB in 10 ms: 6.7108864 GB/s.
    const bytes = 64 << 20;
    const { algbw, busbw } = bandwidths('allreduce', 4, bytes, 10_000);
    expect(algbw).toBeCloseTo(6.7108864, 12);
    expect(busbw).toBeCloseTo(6.7108864 * 1.5, 12);
    expect(bandwidths('broadcast', 8, 1e9, 1e6)).toEqual({ algbw: 1, busbw: 1 });
    expect(bandwidths('allgather', 2, 2e9, 1e6)).toEqual({ algbw: 2, busbw: 1 });
    expect(bandwidths('reducescatter', 4, 4e9, 2e6)).toEqual({ algbw: 2, busbw: 1.5 });
    expect(bandwidths('alltoall', 4, 4e9, 2e6)).toEqual({ algbw: 2, busbw: 1.5 });
    expect(bandwidths('gather', 2, 2e9, 1e6)).toEqual({ algbw: 2, busbw: 1 });
    expect(bandwidths('scatter', 2, 2e9, 1e6)).toEqual({ algbw: 2, busbw: 1 });
    expect(bandwidths('sendrecv', 4, 2e9, 1e6)).toEqual({ algbw: 2, busbw: 2 });
    expect(bandwidths('pingpong', 2, 8, 1)).toEqual({ algbw: 0.008, busbw: 0.008 });
  });

  it('is zero, not infinite, for a zero time', () => {
    expect(bandwidths('allreduce', 2, 8, 0)).toEqual({ algbw: 0, busbw: 0 });
  });
});

describe('shapeOf', () => {
  it('allreduce, broadcast, reduce: size is the vector', () => {
    for (const c of ['allreduce', 'broadcast', 'reduce'] as const) {
      expect(shapeOf(c, 'f32', 4, 1024)).toEqual({ bytes: 1024, count: 256, sendCount: 256, recvCount: 256 });
    }
    expect(shapeOf('allreduce', 'f64', 2, 8)).toEqual({ bytes: 8, count: 1, sendCount: 1, recvCount: 1 });
    expect(shapeOf('allreduce', 'bf16', 2, 8).count).toBe(4);
  });

  it('allgather: size is the whole output, count the per-rank block', () => {
    expect(shapeOf('allgather', 'f32', 4, 1024)).toEqual({ bytes: 1024, count: 64, sendCount: 64, recvCount: 256 });
  });

  it('reducescatter: size is the whole input, count the per-rank block', () => {
    expect(shapeOf('reducescatter', 'f32', 4, 1024)).toEqual({ bytes: 1024, count: 64, sendCount: 256, recvCount: 64 });
  });

  it('alltoall: size is the whole input (n blocks, one per peer), count the block; input and output alike', () => {
    expect(shapeOf('alltoall', 'f32', 4, 1024)).toEqual({ bytes: 1024, count: 64, sendCount: 256, recvCount: 256 });
    expect(shapeOf('alltoall', 'f32', 4, 8)).toEqual({ bytes: 16, count: 1, sendCount: 4, recvCount: 4 });
    expect(shapeOf('alltoall', 'f64', 3, 100)).toEqual({ bytes: 96, count: 4, sendCount: 12, recvCount: 12 });
  });

  it("gather: size is the root's whole output; scatter: the root's whole input; count the block", () => {
    expect(shapeOf('gather', 'f32', 4, 1024)).toEqual({ bytes: 1024, count: 64, sendCount: 64, recvCount: 256 });
    expect(shapeOf('scatter', 'f32', 4, 1024)).toEqual({ bytes: 1024, count: 64, sendCount: 256, recvCount: 64 });
    expect(shapeOf('gather', 'u8', 3, 4)).toEqual({ bytes: 3, count: 1, sendCount: 1, recvCount: 3 });
    expect(shapeOf('scatter', 'i64', 8, 8)).toEqual({ bytes: 64, count: 1, sendCount: 8, recvCount: 1 });
  });

  it('sendrecv and pingpong: size is one message', () => {
    expect(shapeOf('sendrecv', 'f32', 4, 1024)).toEqual({ bytes: 1024, count: 256, sendCount: 256, recvCount: 256 });
    expect(shapeOf('pingpong', 'f32', 2, 8)).toEqual({ bytes: 8, count: 2, sendCount: 2, recvCount: 2 });
  });

  it('rounds to whole elements and blocks, at least one element per block', () => {
    expect(shapeOf('allgather', 'f32', 4, 8)).toEqual({ bytes: 16, count: 1, sendCount: 1, recvCount: 4 });
    expect(shapeOf('reducescatter', 'f32', 3, 32)).toEqual({ bytes: 24, count: 2, sendCount: 6, recvCount: 2 });
    expect(shapeOf('allreduce', 'f64', 2, 4)).toEqual({ bytes: 8, count: 1, sendCount: 1, recvCount: 1 });
  });

  it('knows every collective', () => {
    for (const c of COLLECTIVES) expect(shapeOf(c, 'u8', 2, 100).bytes).toBe(100);
  });
});

describe('sweepSizes', () => {
  it('multiplies by the factor up to and including the maximum', () => {
    expect(sweepSizes(8, 64 << 20, 4, 0)).toEqual([
      8, 32, 128, 512, 2048, 8192, 32768, 131072, 524288, 2097152, 8388608, 33554432,
    ]);
    expect(sweepSizes(8, 128, 2, 0)).toEqual([8, 16, 32, 64, 128]);
    expect(sweepSizes(1024, 1024, 2, 0)).toEqual([1024]);
  });

  it('adds the step when the factor is 1', () => {
    expect(sweepSizes(1 << 20, 4 << 20, 1, 1 << 20)).toEqual([1 << 20, 2 << 20, 3 << 20, 4 << 20]);
  });
});
