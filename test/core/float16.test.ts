// Float16Array (Node 24 and later): passed as f16 in place, alone, as { data, dtype } and as an
// ONNX Runtime float16 tensor; reduced exactly like the same patterns in a Uint16Array. Skipped
// where the runtime has none (Node 20, 22): CI runs the suite on the newest LTS line.
import { describe, expect, it } from 'vitest';
import { inprocRanks, together } from '../helpers/inproc.js';

type F16 = ArrayBufferView & { length: number; [i: number]: number };
const F16 = (globalThis as { Float16Array?: new (values: number[]) => F16 }).Float16Array;

describe.skipIf(F16 === undefined)('Float16Array as f16', () => {
  it('allReduce, allGather and broadcast of Float16Arrays, every form of passing them', async () => {
    const comms = inprocRanks(3);
    const values = (r: number) => [0.5 * (r + 1), -2 * (r + 1), 1024, 0];
    // Alone (its own dtype), as { data, dtype }, as an ONNX Runtime tensor.
    const forms = [
      (a: F16) => a,
      (a: F16) => ({ data: a, dtype: 'f16' as const }),
      (a: F16) => ({ data: a, type: 'float16' as const, dims: [a.length] }),
    ];
    for (const form of forms) {
      const xs = comms.map((_, r) => new F16!(values(r)));
      await together(comms, (c, r) => c.allReduce(form(xs[r]) as never));
      for (const x of xs) expect(Array.from(x as unknown as ArrayLike<number>)).toEqual([3, -12, 3072, 0]);
    }
    const outs = comms.map(() => new F16!(new Array(6).fill(0)));
    await together(comms, (c, r) => c.allGather(outs[r] as never, new F16!([r, r + 0.25]) as never));
    for (const o of outs) expect(Array.from(o as unknown as ArrayLike<number>)).toEqual([0, 0.25, 1, 1.25, 2, 2.25]);
    const b = comms.map((_, r) => new F16!(r === 1 ? [7.5, -0.125] : [0, 0]));
    await together(comms, (c, r) => c.broadcast(b[r] as never, { root: 1 }));
    for (const x of b) expect(Array.from(x as unknown as ArrayLike<number>)).toEqual([7.5, -0.125]);
    for (const c of comms) c.destroy();
  });

  it('a Float16Array where another dtype is named is refused at issue', () => {
    const [c] = inprocRanks(1);
    expect(() => c.allReduce({ data: new F16!([1]), dtype: 'bf16' } as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_DTYPE' }),
    );
    c.destroy();
  });
});
