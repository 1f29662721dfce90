// The API boundary refuses what it cannot honour, with INVALID_ARGUMENT naming what was wrong:
// unknown option keys (every options-taking function, table-driven, so that a new option bag
// cannot forget the check), options that are not an object, values of the wrong type or range.
// The promise-returning module-level functions reject and never throw. Tensor objects of
// TensorFlow.js and ONNX Runtime, and their dtype names, are accepted or explained. Wrapped
// errors carry their code once.
import * as net from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import { Communicator } from '../../src/api/communicator.js';
import { COLLECTIVE_OPTIONS } from '../../src/api/options.js';
import { startStoreServer } from '../../src/bootstrap/nodejs/store-server.js';
import { ACCEPTS, decode, FrameParser, Kind, type Message } from '../../src/bootstrap/store-protocol.js';
import { WebcclError } from '../../src/core/errors.js';
import { closest } from '../../src/core/options.js';
import { joinNode } from '../../src/engine/context.js';
import * as api from '../../src/node.js';
import { createNode } from '../../src/progress/create-node.js';
import { TcpTransport } from '../../src/transport/tcp/nodejs/tcp-transport.js';
import { inprocRanks, settleAll } from '../helpers/inproc.js';

/** The error a call raises, thrown or as a rejection (a call that returns normally fails the test). */
async function errorOf(call: () => unknown): Promise<WebcclError> {
  let e: unknown;
  try {
    await call();
  } catch (x) {
    e = x;
  }
  expect(WebcclError.is(e), `expected a WebcclError, got ${String(e)}`).toBe(true);
  return e as WebcclError;
}

/** Only for calls that must throw at once (the Communicator's methods, createNode, joinNode). */
function thrown(call: () => unknown): WebcclError {
  try {
    call();
  } catch (e) {
    expect(WebcclError.is(e), `expected a WebcclError, got ${String(e)}`).toBe(true);
    return e as WebcclError;
  }
  throw new Error('expected the call to throw');
}

const SCRIPT = 'test/fixtures/sums.mjs';
/** Enough of the TF.js namespace for tfjsDataParallel to reach its options. */
const fakeTf = { tensor: (v: Float32Array) => v };
const f32 = (n: number, v = 1) => new Float32Array(n).fill(v);

// ---------------------------------------------------------------- every options bag

/** Every public function that takes an options object, called with `o` as its options. */
function optionTakers(): Record<string, (o: any) => unknown> {
  const [c] = inprocRanks(1);
  const node = createNode({ nranks: 1 });
  return {
    allReduce: (o) => c.allReduce(f32(4), o),
    allGather: (o) => c.allGather(f32(4), f32(4), o),
    reduceScatter: (o) => c.reduceScatter(f32(4), f32(4), o),
    broadcast: (o) => c.broadcast(f32(4), o),
    reduce: (o) => c.reduce(f32(4), o),
    barrier: (o) => c.barrier(o),
    allToAll: (o) => c.allToAll(f32(4), f32(4), o),
    gather: (o) => c.gather(f32(4), f32(4), o),
    scatter: (o) => c.scatter(f32(4), f32(4), o),
    // Options are checked first: the 1-rank communicator has no valid peer, so nothing is sent.
    send: (o) => c.send(f32(4), 1, o),
    recv: (o) => c.recv(f32(4), 1, o),
    createGroup: (o) => c.createGroup([0], o),
    split: (o) => c.split(0, 0, o),
    shrink: (o) => c.shrink(o),
    Communicator: (o) => new Communicator(joinNode(node, 0, { spinUs: 0 }), o),
    createNode: (o) => createNode({ nranks: 1, ...o }),
    joinNode: (o) => joinNode(node, 0, o),
    initCommGroup: (o) => api.initCommGroup(o),
    launch: (o) => api.launch({ nranks: 1, script: SCRIPT, ...o }),
    startRanks: (o) => api.startRanks({ nranks: 1, script: SCRIPT, ...o }),
    launchProcesses: (o) => api.launchProcesses({ nranks: 1, script: SCRIPT, ...o }),
    startProcesses: (o) => api.startProcesses({ nranks: 1, script: SCRIPT, ...o }),
    convertLayout: (o) => api.convertLayout({ data: f32(4), shape: [1, 4, 1, 1], layout: 'NCHW' }, 'NHWC', o),
    convertDtype: (o) => api.convertDtype(f32(4), 'f16', o),
    connectStore: (o) => api.connectStore({ url: 'ws://127.0.0.1:1/store', token: 't', jobId: 'j', ...o }),
    createDataParallel: (o) => api.createDataParallel(c, [f32(4)], o),
    createShardedOptimizer: (o) => api.createShardedOptimizer(c, [f32(4)], api.sgd({ lr: 0.1 }), o),
    sgd: (o) => api.sgd({ lr: 0.1, ...o }),
    adam: (o) => api.adam({ lr: 0.001, ...o }),
    tfjsDataParallel: (o) => api.tfjsDataParallel(fakeTf, c, [], o),
    // The module-level collectives pass their options to the world's communicator (checked
    // after initCommGroup below).
  };
}

/** Exported functions that take no options bag (or only pass one on to a function above). */
const NO_OPTIONS_BAG = [
  'abortNode',
  'leaveNode',
  'stopProgressThread',
  'getCommunicator',
  'getRank',
  'getWorldSize',
  'wait',
  'allReduce',
  'allReduceAsync',
  'allGather',
  'reduceScatter',
  'broadcast',
  'reduce',
  'barrier', // → the Communicator's
  'allToAll',
  'gather',
  'scatter',
  'send',
  'recv',
  'createGroup',
  'Work',
  'WebcclError',
  'traceSpan',
  'traceTrack',
  'traceFlush', // (name, fn), (name) and (): checked in test/core/trace.test.ts
];

describe('every options bag refuses an unknown key', () => {
  it('the table covers every exported function and every collective', () => {
    const exported = Object.entries(api)
      .filter(([, v]) => typeof v === 'function')
      .map(([k]) => k);
    const covered = [...Object.keys(optionTakers()), ...NO_OPTIONS_BAG];
    expect(
      exported.filter((k) => !covered.includes(k)),
      'add new options-taking functions to optionTakers()',
    ).toEqual([]);
    for (const name of Object.keys(COLLECTIVE_OPTIONS)) expect(Object.keys(optionTakers())).toContain(name);
  });

  for (const [name, call] of Object.entries(optionTakers())) {
    it(name, async () => {
      const e = await errorOf(() => call({ bogusOption: 1 }));
      expect(e.code).toBe('INVALID_ARGUMENT');
      expect(e.details.option).toBe('bogusOption');
      expect((e.details.known as string[]).length).toBeGreaterThan(0);
      expect(e.message).toMatch(/bogusOption/); // the message names the key
    });
  }
});

// ---------------------------------------------------------------- collectives

describe('collective options', () => {
  const [a, b] = inprocRanks(2);

  it('a misspelt key is refused, names the key and suggests the closest, and runs nothing', () => {
    const x = f32(4, 3);
    const before = a.stats().ops;
    const e = thrown(() => a.allReduce(x, { opp: 'max' } as any));
    expect(e.code).toBe('INVALID_ARGUMENT');
    expect(e.details).toMatchObject({ option: 'opp', suggestion: 'op' });
    expect(e.message).toMatch(/did you mean "op"\?/);
    expect(a.stats().ops).toBe(before);
    expect(Array.from(x)).toEqual([3, 3, 3, 3]);
    expect(closest('timeoutMS', ['op', 'timeoutMs'])).toBe('timeoutMs');
    expect(closest('zzz', ['op', 'root'])).toBeUndefined();
  });

  it('options that are not an object are refused, saying what was expected', () => {
    for (const bad of ['max', 42, [], null, true, f32(1)]) {
      const e = thrown(() => a.allReduce(f32(4), bad as any));
      expect(e.code).toBe('INVALID_ARGUMENT');
      expect(e.message).toMatch(/options must be an object like \{ op: 'max' \}/);
    }
    expect(thrown(() => a.allReduce(f32(4), 'max' as any)).message).toMatch(/got "max" \(a string\)/);
    for (const call of [
      () => a.broadcast(f32(4), 0 as any),
      () => a.reduce(f32(4), 'max' as any),
      () => a.barrier(null as any),
      () => b.allGather(f32(8), f32(4), 'x' as any),
      () => b.reduceScatter(f32(4), f32(8), [] as any),
    ]) {
      expect(thrown(call).code).toBe('INVALID_ARGUMENT');
    }
  });

  it('a key of another collective does not apply', () => {
    for (const [call, key] of [
      [() => a.broadcast(f32(4), { op: 'max' } as any), 'op'],
      [() => a.allGather(f32(8), f32(4), { algo: 'direct' } as any), 'algo'],
      [() => a.reduceScatter(f32(4), f32(8), { root: 1 } as any), 'root'],
      [() => a.barrier({ op: 'sum' } as any), 'op'],
    ] as const) {
      const e = thrown(call);
      expect(e.code).toBe('INVALID_ARGUMENT');
      expect(e.details.option).toBe(key);
      expect(e.message).toMatch(/does not apply/);
    }
  });

  it('roots of the wrong type or range, shown with their type', () => {
    for (const root of [null, '0', 1.5, -1, 2, NaN, true, 0n]) {
      const e = thrown(() => b.broadcast(f32(4), { root } as any));
      expect(e.code).toBe('INVALID_ARGUMENT');
      expect(e.details).toMatchObject({ option: 'root' });
      expect(e.message).toMatch(/0\.\.1 range/);
      expect(thrown(() => b.reduce(f32(4), { root } as any)).code).toBe('INVALID_ARGUMENT');
    }
    expect(thrown(() => b.broadcast(f32(4), { root: '0' } as any)).message).toMatch(/invalid root "0" \(a string\)/);
    expect(thrown(() => b.broadcast(f32(4), { root: 5 })).message).toMatch(
      /invalid root 5 \(root should be in the 0\.\.1 range\)/,
    );
  });

  it('ops, algorithms and deadlines of the wrong type or range', () => {
    for (const op of [42, null, { op: 'max' }]) {
      const e = thrown(() => a.allReduce(f32(4), { op } as any));
      expect([e.code, e.details.option]).toEqual(['INVALID_ARGUMENT', 'op']);
    }
    // Other libraries' names and typos get a hint, as option names do.
    for (const [op, near] of [
      ['mean', 'avg'],
      ['MAX', 'max'],
      ['product', 'prod'],
      ['summ', 'sum'],
    ]) {
      const e = thrown(() => a.allReduce(f32(4), { op } as any));
      expect([e.code, e.details.suggestion]).toEqual(['INVALID_OP', near]);
      expect(e.message).toContain(`did you mean "${near}"?`);
    }
    expect(thrown(() => a.allReduce(f32(4), { op: 'xor' } as any)).details.suggestion).toBeUndefined();
    expect(thrown(() => a.allReduce(f32(4), { algo: 3 } as any)).details.option).toBe('algo');
    for (const timeoutMs of [-1, 0, NaN, Infinity, '5', 2 ** 31, null]) {
      for (const call of [() => a.allReduce(f32(4), { timeoutMs } as any), () => a.barrier({ timeoutMs } as any)]) {
        const e = thrown(call);
        expect([e.code, e.details.option]).toEqual(['INVALID_ARGUMENT', 'timeoutMs']);
        expect(e.message).toMatch(/milliseconds in 1\.\.2147483647/);
      }
    }
  });

  it('undefined values count as absent', async () => {
    const x = f32(4, 1);
    const y = f32(4, 2);
    const none = { op: undefined, root: undefined, out: undefined, timeoutMs: undefined, algo: undefined };
    await settleAll([a.allReduce(x, none), b.allReduce(y, { ...none, op: 'max' as const, timeoutMs: 20_000 })]).then(
      (errs) => {
        // the ranks disagree on op only if undefined were taken as something else than sum
        expect(errs.map((e) => (e as WebcclError | undefined)?.code)).toEqual(['MISMATCH', 'MISMATCH']);
      },
    );
    await settleAll([a.allReduce(x, none), b.allReduce(y, { op: undefined })]);
    expect(Array.from(x)).toEqual([3, 3, 3, 3]);
    await settleAll([a.broadcast(x, { root: undefined }), b.broadcast(y, { root: undefined, out: undefined })]);
    await settleAll([a.barrier({ timeoutMs: undefined }), b.barrier(undefined)]);
  });
});

// ---------------------------------------------------------------- communicator, node, join, launch

describe('constructors and launchers', () => {
  const node = createNode({ nranks: 2 });

  it('Communicator options', () => {
    const ctx = joinNode(node, 0, { spinUs: 0 });
    for (const [o, key] of [
      [{ timeoutMs: -1 }, 'timeoutMs'],
      [{ timeoutMs: '5' }, 'timeoutMs'],
      [{ algo: 1 }, 'algo'],
      [{ timeoutMS: 5 }, 'timeoutMS'],
    ] as const) {
      expect(thrown(() => new Communicator(ctx, o as any)).details.option).toBe(key);
    }
    expect(thrown(() => new Communicator(ctx, 'fast' as any)).code).toBe('INVALID_ARGUMENT');
  });

  it('the spin budget: 20 µs with a core per rank, none when ranks outnumber cores, or as given', () => {
    const saved = process.env.WEBCCL_SPIN_US;
    delete process.env.WEBCCL_SPIN_US;
    try {
      const spins = (cores: number, spinUs?: number) => {
        const ctx = joinNode(node, 0, { cores, ...(spinUs !== undefined && { spinUs }) });
        return [ctx.spinUs, ctx.spinPolls > 0, ctx.tryPolls > 0];
      };
      expect(spins(2)).toEqual([20, true, true]);
      expect(spins(1)).toEqual([0, false, false]); // 2 ranks on 1 core: a spinning rank holds the core its peer needs
      expect(spins(1, 5)).toEqual([5, true, true]);
    } finally {
      if (saved !== undefined) process.env.WEBCCL_SPIN_US = saved;
    }
  });

  it('WEBCCL_TIMEOUT_MS out of the range a deadline can have', () => {
    const ctx = joinNode(node, 1, { spinUs: 0 });
    const saved = process.env.WEBCCL_TIMEOUT_MS;
    try {
      for (const v of ['0', String(2 ** 31)]) {
        process.env.WEBCCL_TIMEOUT_MS = v;
        expect(thrown(() => new Communicator(ctx)).details).toMatchObject({ variable: 'WEBCCL_TIMEOUT_MS' });
        expect(new Communicator(ctx, { timeoutMs: 1000 }).size).toBe(2); // the option wins over the variable
      }
    } finally {
      if (saved === undefined) delete process.env.WEBCCL_TIMEOUT_MS;
      else process.env.WEBCCL_TIMEOUT_MS = saved;
    }
  });

  it('createNode', () => {
    for (const bad of [4, 'x', null, [], undefined])
      expect(thrown(() => createNode(bad as any)).code).toBe('INVALID_ARGUMENT');
    for (const o of [
      { nranks: '2' },
      { nranks: 0 },
      { nranks: 65 },
      { nranks: 1.5 },
      {},
      { nranks: 2, slotBytes: '4096' },
      { nranks: 2, slotBytes: 100 },
    ]) {
      expect(thrown(() => createNode(o as any)).code).toBe('INVALID_ARGUMENT');
    }
    expect(thrown(() => createNode({ nRanks: 2 } as any)).details).toMatchObject({
      option: 'nRanks',
      suggestion: 'nranks',
    });
    expect(createNode({ nranks: 1, slotBytes: undefined }).nranks).toBe(1);
  });

  it('joinNode', () => {
    for (const o of [{ cores: 0 }, { cores: 1.5 }, { simd: 'yes' }, { spinUs: -1 }, { spinUs: NaN }]) {
      expect(thrown(() => joinNode(node, 0, o as any)).details.option).toBe(Object.keys(o)[0]);
    }
    expect(thrown(() => joinNode(node, 0, 'simd' as any)).code).toBe('INVALID_ARGUMENT');
    for (const rank of ['0', 2, -1, null])
      expect(thrown(() => joinNode(node, rank as any)).code).toBe('INVALID_ARGUMENT');
    for (const h of [null, {}, 'node', { memory: 1, nranks: 1, world: 0 }])
      expect(thrown(() => joinNode(h as any, 0)).code).toBe('INVALID_ARGUMENT');
  });

  it('launch and launchProcesses reject (never throw) and start nothing; startRanks/startProcesses throw at once', async () => {
    const bads = [
      'x',
      null,
      {},
      { nranks: 2 },
      { script: SCRIPT },
      { nranks: '2', script: SCRIPT },
      { nranks: 2, script: 7 },
      { nranks: 2, script: SCRIPT, args: 'a b' },
      { nranks: 2, script: SCRIPT, graceMs: -1 },
      { nranks: 2, script: SCRIPT, grace: 5 },
    ];
    for (const o of bads) {
      for (const launcher of [api.launch, api.launchProcesses]) {
        const p = launcher(o as any);
        expect(p).toBeInstanceOf(Promise);
        expect((await errorOf(() => p)).code).toBe('INVALID_ARGUMENT');
      }
      expect(thrown(() => api.startRanks(o as any)).code).toBe('INVALID_ARGUMENT');
      expect(thrown(() => api.startProcesses(o as any)).code).toBe('INVALID_ARGUMENT');
    }
    expect(
      (await errorOf(() => api.launchProcesses({ nranks: 1, script: SCRIPT, masterPort: 70000 }))).details.option,
    ).toBe('masterPort');
    expect(
      (await errorOf(() => api.launch({ nranks: 1, script: SCRIPT, onMessage: 'log' } as any))).details.option,
    ).toBe('onMessage');
  });
});

// ---------------------------------------------------------------- module-level functions

describe('module-level functions reject, never throw', () => {
  it('before initCommGroup: NOT_INITIALIZED as a rejection; getRank, getWorldSize, allReduceAsync throw', async () => {
    vi.resetModules();
    const fresh = await import('../../src/index.js');
    const promised: [string, () => Promise<unknown>][] = [
      ['allReduce', () => fresh.allReduce(f32(1))],
      ['allReduce bad', () => fresh.allReduce('x' as any, 'max' as any)],
      ['allGather', () => fresh.allGather(f32(1), f32(1))],
      ['reduceScatter', () => fresh.reduceScatter(null as any, null as any)],
      ['broadcast', () => fresh.broadcast(f32(1), { root: '0' } as any)],
      ['reduce', () => fresh.reduce(f32(1))],
      ['barrier', () => fresh.barrier()],
      ['allToAll', () => fresh.allToAll(f32(1), f32(1))],
      ['gather', () => fresh.gather(null, f32(1))],
      ['scatter', () => fresh.scatter(f32(1), null)],
      ['send', () => fresh.send(f32(1), 1)],
      ['recv', () => fresh.recv(f32(1), 1)],
      ['createGroup', () => fresh.createGroup([0])],
    ];
    for (const [what, call] of promised) {
      let p: Promise<unknown> | undefined;
      expect(() => (p = call()), what).not.toThrow();
      expect((await errorOf(() => p)).code, what).toBe('NOT_INITIALIZED');
    }
    let w: Promise<unknown> | undefined;
    expect(() => (w = fresh.wait(42 as any))).not.toThrow();
    expect((await errorOf(() => w)).code).toBe('INVALID_ARGUMENT');
    for (const sync of [
      () => fresh.getRank(),
      () => fresh.getWorldSize(),
      () => fresh.getCommunicator(),
      () => fresh.allReduceAsync(f32(1)),
    ]) {
      expect(thrown(sync).code).toBe('NOT_INITIALIZED');
    }
    // Bad options are refused before any joining; initCommGroup stays callable.
    for (const o of [
      'x',
      5,
      null,
      [],
      { timeoutMS: 5 },
      { timeoutMs: -1 },
      { rank: 1 },
      { node: {}, rank: 0 },
      { node: createNode({ nranks: 2 }), rank: 2 },
    ]) {
      let p: Promise<unknown> | undefined;
      expect(() => (p = fresh.initCommGroup(o as any))).not.toThrow();
      expect((await errorOf(() => p)).code, JSON.stringify(o)).toBe('INVALID_ARGUMENT');
    }
    expect((await errorOf(() => fresh.initCommGroup({ timeoutMS: 5 } as any))).details).toMatchObject({
      option: 'timeoutMS',
      suggestion: 'timeoutMs',
    });
  });

  it('after initCommGroup: bad buffers and options are rejections', async () => {
    vi.resetModules();
    const fresh = await import('../../src/index.js');
    await fresh.initCommGroup({ timeoutMs: 20_000, cores: 1, simd: undefined });
    const calls: [string, () => Promise<unknown>][] = [
      ['allReduce string options', () => fresh.allReduce(f32(4), 'max' as any)],
      ['allReduce unknown key', () => fresh.allReduce(f32(4), { opp: 'max' } as any)],
      ['allReduce not a buffer', () => fresh.allReduce([1, 2] as any)],
      ['allGather', () => fresh.allGather(f32(4), f32(4), { op: 'max' } as any)],
      ['reduceScatter', () => fresh.reduceScatter(f32(4), f32(4), 7 as any)],
      ['broadcast', () => fresh.broadcast(f32(4), { root: null } as any)],
      ['reduce', () => fresh.reduce(f32(4), { root: 1.5 } as any)],
      ['barrier', () => fresh.barrier({ timeoutMs: 'soon' } as any)],
      ['wait', () => fresh.wait(undefined as any)],
      ['allToAll counts', () => fresh.allToAll(f32(4), f32(4), { sendCounts: [4] } as any)],
      ['gather root', () => fresh.gather(f32(4), f32(4), { root: 1 })],
      ['send to itself', () => fresh.send(f32(4), 0)],
      ['recv tag', () => fresh.recv(f32(4), 0, { tag: -1 })],
      ['createGroup bad rank', () => fresh.createGroup(['rank1'])],
      ['group null', () => fresh.allReduce(f32(4), { group: null } as any)],
      ['group not a communicator', () => fresh.barrier({ group: {} } as any)],
      ['group with an unknown key', () => fresh.allReduce(f32(4), { group: undefined, opp: 1 } as any)],
    ];
    for (const [what, call] of calls) {
      let p: Promise<unknown> | undefined;
      expect(() => (p = call()), what).not.toThrow();
      expect((await errorOf(() => p)).code, what).toBe('INVALID_ARGUMENT');
    }
    const x = f32(4, 2);
    await fresh.allReduce(x, { op: 'max', timeoutMs: undefined });
    await fresh.barrier({ timeoutMs: 10_000 });
    await fresh.wait(fresh.allReduceAsync(x));
    expect(Array.from(x)).toEqual([2, 2, 2, 2]);
    // { group }: the op runs on that communicator (a world of one has a group of one).
    const group = (await fresh.createGroup(['rank0']))!;
    expect([group.size, group.worldRank(0)]).toEqual([1, 0]);
    await fresh.allReduce(x, { group, op: 'sum' });
    await fresh.barrier({ group });
    expect(group.stats().ops).toBe(2);
    expect((await errorOf(() => fresh.allReduce(x, { group, opp: 1 } as any))).details.option).toBe('opp');
    group.destroy();
  });
});

describe('module-level functions on a rank of a thread job (the built bundle)', () => {
  it('reject, never throw', async () => {
    const reports: unknown[][] = [[], []];
    const { launch } = await import('../../dist/node/index.js');
    const result = await launch({
      nranks: 2,
      script: 'test/api/fixtures/api-rejects.mjs',
      onMessage: (r, m) => reports[r].push(m),
      graceMs: 10_000,
    });
    expect(result.failure?.message).toBeUndefined();
    for (const [r, [rep]] of reports.entries()) {
      const list = rep as { what: string; threw: boolean; code: string; promise: boolean }[];
      expect(list.length, `rank ${r}`).toBe(13);
      for (const { what, threw, code, promise } of list) {
        expect({ rank: r, what, threw, promise, code }).toEqual({
          rank: r,
          what,
          threw: false,
          promise: true,
          code: what.includes('before') ? 'NOT_INITIALIZED' : 'INVALID_ARGUMENT',
        });
      }
    }
  });
});

// ---------------------------------------------------------------- tensors and dtype names

describe('tensors with a layout on the collectives that take row-major data only', () => {
  it('allToAll, send and recv refuse a non-NCHW tensor, and take an NCHW one (gather and scatter take every layout)', async () => {
    const [c] = inprocRanks(1);
    const t = (layout: string) =>
      ({ data: f32(4), dtype: 'f32', shape: [1, 4, 1, 1], layout, ...(layout === 'NC1HWC0' && { c0: 4 }) }) as any;
    const [p0] = inprocRanks(2); // send and recv need a peer (refused before anything moves)
    for (const call of [
      () => c.allToAll(t('NHWC'), f32(4)),
      () => p0.send(t('NHWC'), 1),
      () => p0.recv(t('NC1HWC0'), 1),
      () => c.allToAll(f32(4), t('NC1HWC0')),
    ]) {
      const e = thrown(call);
      expect(e.code).toBe('INVALID_ARGUMENT');
      expect(e.message).toMatch(/row-major data only/);
    }
    const out = f32(4, 0);
    const input = { data: Float32Array.of(1, 2, 3, 4), dtype: 'f32', shape: [1, 4, 1, 1], layout: 'NCHW' } as any;
    await settleAll([c.allToAll(out, input)]);
    expect(Array.from(out)).toEqual([1, 2, 3, 4]);
    const gathered = f32(4, 0);
    await settleAll([c.gather(gathered, { ...input, layout: 'NHWC' })]); // one pixel: NHWC places bytes as NCHW
    expect(Array.from(gathered)).toEqual([1, 2, 3, 4]);
  });
});

describe('tensor objects and dtype names of TF.js and ONNX Runtime', () => {
  const [a, b] = inprocRanks(2);

  it('{ data, dtype } with their dtype names', async () => {
    const x = { data: f32(3, 1), dtype: 'float32' as const };
    const y = { data: f32(3, 4), dtype: 'float32' as const };
    await settleAll([a.allReduce(x), b.allReduce(y)]);
    expect(Array.from(x.data)).toEqual([5, 5, 5]);
    const h = { data: new Uint16Array(2).fill(0x3c00), dtype: 'float16' as const }; // 1.0 in f16
    const g = { data: new Uint16Array(2).fill(0x3c00), dtype: 'f16' as const };
    await settleAll([a.allReduce(h), b.allReduce(g)]); // float16 and f16 are the same dtype: no MISMATCH
    expect(Array.from(h.data)).toEqual([0x4000, 0x4000]); // 2.0
    const i = { data: new BigInt64Array(2).fill(3n), dtype: 'int64' as const };
    await settleAll([a.allReduce(i, { op: 'max' }), b.allReduce(new BigInt64Array(2).fill(5n), { op: 'max' })]);
    expect(Array.from(i.data)).toEqual([5n, 5n]);
  });

  it('an ONNX Runtime tensor on the CPU is used in place', async () => {
    const ort = (data: Float32Array) => ({ data, type: 'float32', dims: [2, 2], location: 'cpu', size: data.length });
    const x = ort(Float32Array.of(1, 2, 3, 4));
    const y = ort(Float32Array.of(10, 20, 30, 40));
    await settleAll([a.allReduce(x as any), b.allReduce(y as any)]);
    expect(Array.from(x.data)).toEqual([11, 22, 33, 44]);
    const plain = { data: Int32Array.of(1), type: 'int32' };
    await settleAll([a.allReduce(plain as any), b.allReduce(Int32Array.of(2))]);
    expect(plain.data[0]).toBe(3);
  });

  it('alloc takes their dtype names', () => {
    const [c] = inprocRanks(1);
    expect(c.alloc('float32', 4)).toBeInstanceOf(Float32Array);
    expect(c.alloc('int64', 2)).toBeInstanceOf(BigInt64Array);
    expect(c.alloc('bfloat16', 2)).toMatchObject({ dtype: 'bf16' });
    expect(thrown(() => c.alloc('bool' as any, 2)).code).toBe('INVALID_DTYPE');
  });

  it('names without an exact element type are refused, saying what to do', () => {
    for (const [dtype, data, hint] of [
      ['bool', new Uint8Array(2), /uint8.*'max' for OR/],
      ['int16', new Int16Array(2), /int32/],
      ['uint16', new Uint16Array(2), /int32/],
      ['uint64', new BigUint64Array(2), /int64/],
      ['complex64', new Float32Array(4), /float32/],
      ['string', [], /cannot be reduced/],
    ] as const) {
      for (const t of [
        { data, dtype },
        { data, type: dtype, dims: [2] },
      ]) {
        const e = thrown(() => a.allReduce(t as any));
        expect([e.code, e.details.dtype]).toEqual(['INVALID_DTYPE', dtype]);
        expect(e.message).toMatch(hint);
        expect(e.message).toMatch(/^allReduce buffer: /); // names the argument
      }
    }
    // the known names are listed
    expect(thrown(() => a.allReduce({ data: f32(2), dtype: 'f8' } as any)).message).toMatch(/float32/);
  });

  it('a TensorFlow.js tensor, or data not there yet, says what to pass instead', () => {
    const tfjs = {
      dtype: 'float32',
      shape: [4],
      size: 4,
      dataSync: () => f32(4),
      data: async () => f32(4),
      arraySync: () => [],
    };
    const e = thrown(() => a.allReduce(tfjs as any));
    expect([e.code, e.details.tensor]).toEqual(['INVALID_ARGUMENT', 'tfjs']);
    expect(e.message).toMatch(/dataSync\(\)/);
    expect(thrown(() => a.allReduce({ data: () => f32(4), dtype: 'float32' } as any)).message).toMatch(/function/);
    expect(thrown(() => a.allReduce({ data: Promise.resolve(f32(4)), dtype: 'float32' } as any)).message).toMatch(
      /await it/,
    );
    const gpu = {
      type: 'float32',
      dims: [4],
      location: 'gpu-buffer',
      get data(): never {
        throw new Error('The data is not on CPU');
      },
    };
    const g = thrown(() => a.allReduce(gpu as any));
    expect([g.code, g.details.location]).toEqual(['INVALID_ARGUMENT', 'gpu-buffer']);
    expect(g.message).toMatch(/getData\(\)/);
  });
});

// ---------------------------------------------------------------- wrapped messages carry their code once

const once = (m: string) => (m.match(/\[[A-Z_]+\]/g) ?? []).length <= 1;

describe('an error wrapped into another shows one code', () => {
  it('a store peer sending an oversize frame is told why without the code suffix', async () => {
    const s = await startStoreServer({ token: 't', jobId: 'j', onReject: () => {} });
    try {
      const socket = net.connect({ host: '127.0.0.1', port: s.port });
      socket.on('error', () => {});
      const frames: Message[] = [];
      const parser = new FrameParser(1 << 20, [...ACCEPTS.clientHandshake, ...ACCEPTS.clientReady], (k, bytes) =>
        frames.push(decode(k, bytes, 1 << 20)),
      );
      socket.on('data', (d: Buffer) => parser.push(d));
      await new Promise<void>((r) => socket.once('data', () => r())); // HELLO
      const header = Buffer.alloc(5);
      header.writeUInt8(Kind.auth, 0);
      header.writeUInt32LE(1_000_000_000, 1);
      socket.write(header);
      await new Promise((r) => socket.once('close', r));
      const refusal = frames.find((f) => f.type === 'protocolError') as { message: string } | undefined;
      expect(refusal?.message).toMatch(/over its limit/);
      expect(refusal?.message).not.toMatch(/\[PROTOCOL_ERROR\]/); // the client adds its own code
    } finally {
      await s.close();
    }
  });

  it('a data port refusing garbage reports PROTOCOL_ERROR once', async () => {
    const rejects: WebcclError[] = [];
    const t = await TcpTransport.listen({
      rank: 0,
      size: 2,
      jobId: 'j',
      token: 't',
      timeoutMs: 10_000,
      onReject: (e) => rejects.push(e),
    });
    try {
      const s = net.connect(t.address);
      s.on('error', () => {});
      s.write(Uint8Array.of(1, 0xff, 0xff, 0xff, 0xff)); // a HELLO announcing 4 GiB
      await new Promise((r) => s.once('close', r));
      expect(rejects.map((e) => e.code)).toEqual(['PROTOCOL_ERROR']);
      expect(
        rejects.every((e) => once(e.message)),
        rejects.map((e) => e.message).join('\n'),
      ).toBe(true);
    } finally {
      t.close();
    }
  });
});
