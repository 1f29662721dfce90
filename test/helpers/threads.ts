// Runs a scenario of test/ranks/scenario.mjs on real worker threads through the library's own
// launcher (the built bundle: worker threads cannot load TypeScript), collecting each rank's
// report.
import { fileURLToPath } from 'node:url';
import { type LaunchResult, launch } from '../../dist/node/index.js';

const SCRIPT = fileURLToPath(new URL('../ranks/scenario.mjs', import.meta.url));

export interface ThreadRun {
  result: LaunchResult;
  reports: any[][]; // per rank, in arrival order
}

export async function runScenario(
  nranks: number,
  name: string,
  params: object = {},
  o: { simd?: boolean; slotBytes?: number; env?: Record<string, string> } = {},
): Promise<ThreadRun> {
  const reports: any[][] = Array.from({ length: nranks }, () => []);
  const result = await launch({
    nranks,
    script: SCRIPT,
    args: [name, JSON.stringify(params)],
    simd: o.simd,
    slotBytes: o.slotBytes,
    env: { ...process.env, ...o.env },
    onMessage: (rank, m) => reports[rank].push(m),
    graceMs: 10_000,
  });
  return { result, reports };
}
