import { availableParallelism } from 'node:os';
import { relative } from 'node:path';
import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

// The files that take longest (seconds on the 2-core machine, Node 20, whole suite), started
// first so that none of them begins near the end and runs on alone. Vitest orders by the
// durations it cached on earlier runs, or by file size on a fresh clone, where the longest
// (random-ops, 225 s, a short file) would otherwise start late.
const LONGEST = [
  'system/random-ops',
  'groups/groups',
  'progress/net',
  'net/collectives',
  'system/fault-matrix',
  'progress/progress',
  'groups/shrink',
  'net/mismatch',
  'net/jobs',
  'net/faults',
  'net/alltoall-gather',
  'net/tree',
  'api/p2p',
  'package/tarball',
  'shm/collectives',
].map((name) => `test/${name}.test.ts`);

class LongestFirst extends BaseSequencer {
  async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const place = (f: TestSpecification) => {
      const k = LONGEST.indexOf(relative(f.project.config.root, f.moduleId).replaceAll('\\', '/'));
      return k < 0 ? LONGEST.length : k;
    };
    return (await super.sort(files)).sort((a, b) => place(a) - place(b));
  }
}

// Multi-rank tests run many ranks on 2 oversubscribed cores: generous deadlines, never timing
// assertions. Three test files at once even on 2 cores: most files spend their time waiting on
// child processes, sockets and deadlines (the fault matrix, the launch forms), so more workers
// fill those waits (on the 2-core machine: 1,056 s with one worker, 802 s with two, 719 s with
// three, Node 20; 580 s once the grids' own checks stopped dominating them).
export default defineConfig({
  test: {
    testTimeout: 240_000,
    hookTimeout: 60_000,
    include: ['test/**/*.test.ts'],
    maxWorkers: Math.max(3, availableParallelism() - 1),
    sequence: { sequencer: LongestFirst },
  },
});
