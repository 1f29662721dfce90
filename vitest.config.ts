import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

// Multi-rank tests run many ranks on 2 oversubscribed cores: generous deadlines, never timing
// assertions. Three test files at once even on 2 cores: most files spend their time waiting on
// child processes, sockets and deadlines (the fault matrix, the launch forms), so more workers
// fill those waits (on the 2-core machine: 1,056 s with one worker, 802 s with two, 719 s with
// three, Node 20).
export default defineConfig({
  test: {
    testTimeout: 240_000,
    hookTimeout: 60_000,
    include: ['test/**/*.test.ts'],
    maxWorkers: Math.max(3, availableParallelism() - 1),
  },
});
