// A job across nodes inside the test's own process: `nodes` node memories of `perNode` ranks
// each, every rank with its own TCP mesh over loopback, all driven by this thread's event loop.
// This exercises rendezvous, the transport and every network schedule on the TypeScript sources;
// test/net/jobs.test.ts runs the same across real processes.

import { afterEach } from 'vitest';
import type { Communicator } from '../../src/api/communicator.js';
import type { Work } from '../../src/engine/work.js';
import { joinWorld } from '../../src/launch/join-world.js';
import { createNode } from '../../src/progress/create-node.js';
import { freePort } from './net.js';

export interface NetRanksOptions {
  simd?: boolean;
  timeoutMs?: number;
  slotBytes?: number;
  algo?: string;
  /** Where rank 0 serves the store (default 127.0.0.1; '::1' for IPv6). */
  masterAddr?: string;
}

export async function netRanks(nodes: number, perNode: number, o: NetRanksOptions = {}): Promise<Communicator[]> {
  const masterAddr = o.masterAddr ?? '127.0.0.1';
  const masterPort = await freePort(masterAddr);
  const jobId = `test-${masterPort}-${Math.random().toString(16).slice(2)}`;
  const size = nodes * perNode;
  const handles = Array.from({ length: nodes }, () =>
    createNode({ nranks: perNode, slotBytes: o.slotBytes ?? 4096, progress: false }),
  );
  const comms = await Promise.all(
    Array.from({ length: size }, (_, r) =>
      joinWorld({
        node: handles[Math.floor(r / perNode)],
        localRank: r % perNode,
        world: { rank: r, size, masterAddr, masterPort, token: 'test-token', jobId },
        opts: { simd: o.simd, timeoutMs: o.timeoutMs ?? 60_000, spinUs: 0, ...(o.algo ? { algo: o.algo } : {}) },
        nodeMayBlock: false, // a node's ranks share this thread
      }),
    ),
  );
  return comms.map((c) => c!);
}

/** Issues one op per rank and waits for all; rethrows the first error. */
export async function all(comms: Communicator[], issue: (c: Communicator, r: number) => Work): Promise<void> {
  const works = comms.map((c, r) => issue(c, r));
  const errs = await Promise.all(
    works.map((w) =>
      w.wait().then(
        () => undefined,
        (e: Error) => e,
      ),
    ),
  );
  const e = errs.find((x) => x);
  if (e) throw e;
}

export function destroyAll(comms: Communicator[]): void {
  for (const c of comms) c.destroy();
}

/**
 * For a file whose tests make one world each (call it at the file's top level): a function that
 * makes that world with the given deadline; after each test, its ranks with no op pending are
 * destroyed (one left with ops pending ends at its deadline).
 */
export function worldPerTest(): (nodes: number, perNode: number, timeoutMs?: number) => Promise<Communicator[]> {
  let open: Communicator[] = [];
  afterEach(() => {
    for (const c of open) if (c.stats().pending === 0) c.destroy();
    open = [];
  });
  return async (nodes, perNode, timeoutMs = 30_000) => (open = await netRanks(nodes, perNode, { timeoutMs }));
}
