// The package's version, read from its package.json: two levels above the bundle (dist/node/)
// when built, three above this file when run from the sources (tests).
import { readFileSync } from 'node:fs';

export function packageVersion(): string {
  for (const up of ['../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(up, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'webccl' && pkg.version) return pkg.version;
    } catch {
      // not there: the other layout
    }
  }
  return 'unknown';
}
