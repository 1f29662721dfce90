// A node memory that cannot be shared (a page without cross-origin isolation): the core's module
// with its memory import made unshared runs both builds on an unshared memory of a fixed size;
// a module whose import section the patch does not understand is refused, not mis-patched.
import { describe, expect, it } from 'vitest';
import { importUnsharedMemory, isShared, UNSHARED_NODE_BYTES, unsharedMemory } from '../../src/core/unshared-memory.js';
import { loadWasm } from '../../src/core/wasm.js';

describe('the core on an unshared memory', () => {
  for (const simd of [true, false]) {
    it(`${simd ? 'simd' : 'scalar'} build: instantiates on an unshared fixed memory and its kernels write into it`, () => {
      const m = unsharedMemory(1 << 20);
      expect(isShared(m)).toBe(false);
      expect(m.buffer.byteLength).toBe(UNSHARED_NODE_BYTES);
      expect(() => m.grow(1)).toThrow(RangeError); // fixed: no view of it is ever detached
      const core = loadWasm(m, simd);
      const u8 = new Uint8Array(m.buffer);
      const at = 1 << 16;
      u8.set([1, 2, 3, 250], at);
      core.exports.copyBytes(at + 100, at, 4);
      expect([...u8.subarray(at + 100, at + 104)]).toEqual([1, 2, 3, 250]);
    });
  }

  it('refuses a module with no memory import, or one that is not shared, rather than guessing', () => {
    // magic, version, an empty import section (id 2, size 1, count 0)
    const none = Uint8Array.of(0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, 2, 1, 0);
    expect(() => importUnsharedMemory(none)).toThrow(/no memory import found/);
    // one import "e"."m" of an unshared memory (kind 2, limits flag 1, min 1, max 1)
    const unshared = Uint8Array.of(0, 0x61, 0x73, 0x6d, 1, 0, 0, 0, 2, 9, 1, 1, 0x65, 1, 0x6d, 2, 1, 1, 1);
    expect(() => importUnsharedMemory(unshared)).toThrow(/limits flag 1, expected shared/);
  });
});
