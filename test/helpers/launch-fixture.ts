// What a test file that launches jobs of one rank script needs: the repository's paths, the
// script (beside the tests, or shared under test/fixtures), and a scratch directory (a HOME for
// the per-user token file), removed, and any job still running killed, when the file's tests end.
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
  /** The rank script's path. */
  script: string;
  tmp: string;
}

/** `script`: a file under test/fixtures by name, or the URL of one beside the tests
 *  (`new URL('fixtures/x.mjs', import.meta.url)`). */
export function launchFixture(script: string | URL, tmpPrefix: string): LaunchFixture {
  const root = fileURLToPath(new URL('../..', import.meta.url));
  const tmp = mkdtempSync(join(tmpdir(), `webccl-${tmpPrefix}-`));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));
  afterAll(killAllJobs);
  const path = typeof script === 'string' ? join(root, 'test', 'fixtures', script) : fileURLToPath(script);
  return { root, bin: join(root, 'bin', 'webccl.js'), script: path, tmp };
}
