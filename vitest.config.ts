import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

// Multi-rank tests run many ranks on 2 oversubscribed cores: generous deadlines, never timing
// assertions. Two test files at once even on 2 cores: most files spend their time waiting on
// child processes, sockets and deadlines (the fault matrix, the launch forms), so a second
// worker fills those waits; on this machine the suite took 693 s so against 1,056 s with one.
export default defineConfig({
  test: {
    testTimeout: 240_000,
    hookTimeout: 60_000,
    include: ['test/**/*.test.ts'],
    maxWorkers: Math.max(2, availableParallelism() - 1),
  },
});
