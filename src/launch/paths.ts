// Where the bundled entries the launchers start (a rank thread's first module, a rank process's
// guard) sit: next to the bundle that starts them (ESM or CJS).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { WebcclError } from '../core/errors.js';

declare const __dirname: string | undefined;

export function workerEntryPath(): string {
  if (typeof __dirname === 'string') return join(__dirname, 'worker-entry.js');
  return fileURLToPath(new URL('./worker-entry.js', import.meta.url));
}

/** The module every rank process loads first (node --import), as a file: URL. */
export function rankGuardUrl(): string {
  const path =
    typeof __dirname === 'string'
      ? join(__dirname, 'rank-guard.js')
      : fileURLToPath(new URL('./rank-guard.js', import.meta.url));
  // Run from the TypeScript sources, there is no bundle beside this module: say so before any rank starts.
  if (!existsSync(path))
    throw new WebcclError(
      'INTERNAL',
      `the rank processes' guard ${path} is missing: run the built package (npm run build)`,
    );
  return pathToFileURL(path).href;
}

/** The browser build of this package (served by `webccl serve` at /webccl.js). */
export function browserBuildPath(): string {
  const path =
    typeof __dirname === 'string'
      ? join(__dirname, '..', 'browser', 'index.js')
      : fileURLToPath(new URL('../browser/index.js', import.meta.url));
  if (!existsSync(path))
    throw new WebcclError('INTERNAL', `the browser build ${path} is missing: run the built package (npm run build)`);
  return path;
}

/** The package's own root (where bin/, dist/ and examples/ are). */
export function packageRoot(): string {
  return typeof __dirname === 'string' ? join(__dirname, '..', '..') : fileURLToPath(new URL('../..', import.meta.url));
}
