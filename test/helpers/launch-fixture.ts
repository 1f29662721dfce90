// What a test file that launches jobs of one rank script needs: the repository's paths, the
// script under test/fixtures, and a scratch directory (a HOME for the per-user token file),
// removed, and any job still running killed, when the file's tests end.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll } from 'vitest';
import { killAllJobs } from './jobs.js';

export interface LaunchFixture {
  root: string;
  /** bin/webccl.js */
  bin: string;
  /** test/fixtures/<script> */
  script: string;
  tmp: string;
}

export function launchFixture(script: string, tmpPrefix: string): LaunchFixture {
  const root = fileURLToPath(new URL('../..', import.meta.url));
  const tmp = mkdtempSync(join(tmpdir(), `webccl-${tmpPrefix}-`));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  afterAll(killAllJobs);
  return { root, bin: join(root, 'bin', 'webccl.js'), script: join(root, 'test', 'fixtures', script), tmp };
}
