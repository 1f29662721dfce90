// Where the bundled worker entry sits next to the bundle that starts workers (ESM or CJS).
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

declare const __dirname: string | undefined;

export function workerEntryPath(): string {
  if (typeof __dirname === 'string') return join(__dirname, 'worker-entry.js');
  return fileURLToPath(new URL('./worker-entry.js', import.meta.url));
}
