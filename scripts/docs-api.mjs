#!/usr/bin/env node
// Regenerates the reference part of docs/api.md (between its api-reference markers) from the
// TSDoc comments of the public API: the entries package.json exports (the main entry, its Node.js
// build, the subpaths), each export's kind, signatures and documentation, and the public members
// of its classes and interfaces. test/package/api-docs.test.ts fails when the page is stale.
//
//   node scripts/docs-api.mjs [--check]
//
// Only the entry files are named here: the exports are found through them, so the page does not
// change when the files behind them move. Members and exports tagged @internal are left out.
// api-docs/extract.mjs reads the API with the TypeScript compiler; api-docs/render.mjs writes the markdown.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { root } from './api-docs/extract.mjs';
import { headings, reference } from './api-docs/render.mjs';

export { collect, entries } from './api-docs/extract.mjs';
export { reference } from './api-docs/render.mjs';

export const PAGE = join(root, 'docs', 'api.md');
const START = '<!-- api-reference:start -->';
const END = '<!-- api-reference:end -->';

/** `page` with its generated region rewritten. */
export function regenerate(page, warn) {
  const a = page.indexOf(START);
  const b = page.indexOf(END);
  if (a < 0 || b < a) throw new Error(`docs/api.md: no ${START} ... ${END} region`);
  const ref = reference(headings(page.slice(0, a)), warn);
  if (ref.includes(root) || /import\(["'][./]/.test(ref)) throw new Error('docs-api: a file path leaked into the page');
  return `${page.slice(0, a + START.length)}\n\n${ref}\n\n${page.slice(b)}`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const check = process.argv.includes('--check');
  const undocumented = [];
  const page = readFileSync(PAGE, 'utf8');
  const next = regenerate(page, (name) => undocumented.push(name));
  if (!check) for (const name of undocumented) console.warn(`docs-api: ${name} has no documentation comment`);
  if (check) {
    if (next !== page) {
      console.error('docs/api.md: the reference differs from the TSDoc of the public API (run npm run docs:api)');
      process.exit(1);
    }
  } else if (next !== page) {
    writeFileSync(PAGE, next);
    console.log('docs/api.md: reference regenerated');
  }
}
