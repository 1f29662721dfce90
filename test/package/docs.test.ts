// The documentation holds together: the README stays a front page, every relative link of the
// README, docs/ and bench/ pages reaches a file (and a heading, when it names one), and the
// variables table of docs/configuration.md is the library's own list.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a script of the repository, plain JavaScript without declarations
import { withTable } from '../../scripts/docs-config.mjs';
import { ENV_VARS } from '../../src/core/config.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const pages = [
  'README.md',
  'CONTRIBUTING.md',
  'CHANGELOG.md',
  'bench/README.md',
  'bench/RESULTS.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
].filter((p) => existsSync(join(root, p)));

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens; repeats numbered. */
function anchors(markdown: string): Set<string> {
  const out = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const m = !fenced && /^#{1,6} (.*)$/.exec(line);
    if (!m) continue;
    const base = m[1]
      .trim()
      .toLowerCase()
      .replace(/[^\p{L}\p{N} _-]/gu, '')
      .replace(/ /g, '-');
    const k = seen.get(base) ?? 0;
    seen.set(base, k + 1);
    out.add(k ? `${base}-${k}` : base);
  }
  return out;
}

/** The relative links of a markdown page outside code: [text](target). */
function links(markdown: string): string[] {
  const text = markdown.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]).filter((t) => !/^[a-z]+:/i.test(t));
}

describe('the documentation', () => {
  it('the README is a front page of at most 400 lines', () => {
    expect(readFileSync(join(root, 'README.md'), 'utf8').split('\n').length).toBeLessThanOrEqual(400);
  });

  it.each(pages)('every relative link of %s reaches a file and its heading', (page) => {
    const text = readFileSync(join(root, page), 'utf8');
    const broken: string[] = [];
    for (const link of links(text)) {
      const [path, hash] = link.split('#');
      const target = path ? resolve(dirname(join(root, page)), path) : join(root, page);
      if (!existsSync(target)) broken.push(`${link}: no such file`);
      else if (hash && target.endsWith('.md') && !anchors(readFileSync(target, 'utf8')).has(hash))
        broken.push(`${link}: no such heading`);
    }
    expect(broken).toEqual([]);
  });

  it("docs/configuration.md's table of variables is ENV_VARS (node scripts/docs-config.mjs rewrites it)", () => {
    const page = readFileSync(join(root, 'docs', 'configuration.md'), 'utf8');
    expect(withTable(page, ENV_VARS)).toBe(page);
  });
});
