#!/usr/bin/env node
// Regenerates the table of environment variables in docs/configuration.md (between its
// env-table markers) from ENV_VARS, the one list the library checks variables against
// (src/core/config.ts). test/package/docs.test.ts fails when the page and the list differ.
//
//   npm run build && node scripts/docs-config.mjs [--check]
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
export const PAGE = join(root, 'docs', 'configuration.md');
const START = '<!-- env-table:start -->';
const END = '<!-- env-table:end -->';

/** The markdown table of `vars` (name → meaning). */
export function envTable(vars) {
  const rows = Object.entries(vars).map(([name, meaning]) => `| \`${name}\` | ${meaning.replaceAll('|', '\\|')} |`);
  return ['| variable | meaning |', '| --- | --- |', ...rows].join('\n');
}

/** `page` with its table replaced by the table of `vars`. */
export function withTable(page, vars) {
  const a = page.indexOf(START),
    b = page.indexOf(END);
  if (a < 0 || b < a) throw new Error(`docs/configuration.md: no ${START} ... ${END} section`);
  return `${page.slice(0, a + START.length)}\n${envTable(vars)}\n${page.slice(b)}`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { ENV_VARS } = await import(join(root, 'dist', 'node', 'index.js'));
  const page = readFileSync(PAGE, 'utf8');
  const next = withTable(page, ENV_VARS);
  if (process.argv.includes('--check')) {
    if (next !== page) {
      console.error(
        'docs/configuration.md: the variables table differs from ENV_VARS (run node scripts/docs-config.mjs)',
      );
      process.exit(1);
    }
  } else if (next !== page) {
    writeFileSync(PAGE, next);
    console.log('docs/configuration.md: table regenerated');
  }
}
