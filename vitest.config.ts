import { defineConfig } from 'vitest/config';

// Multi-rank tests run many ranks on 2 oversubscribed cores: generous deadlines, never timing
// assertions.
export default defineConfig({
  test: {
    testTimeout: 240_000,
    hookTimeout: 60_000,
    include: ['test/**/*.test.ts'],
  },
});
