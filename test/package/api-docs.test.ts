// The reference part of docs/api.md is what scripts/docs-api.mjs generates from the TSDoc of the
// public API: a signature or comment changed without `npm run docs:api` fails here.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../..', import.meta.url));
const page = () => readFileSync(join(root, 'docs', 'api.md'), 'utf8');

/** The generated region of the page. */
function reference(): string {
  const text = page();
  const a = text.indexOf('<!-- api-reference:start -->');
  const b = text.indexOf('<!-- api-reference:end -->');
  expect(a).toBeGreaterThan(0);
  expect(b).toBeGreaterThan(a);
  return text.slice(a, b);
}

/** The text under the heading `#### name` or `##### name`, up to the next heading. */
function section(ref: string, heading: string): string {
  const lines = ref.split('\n');
  const at = lines.findIndex((l) => /^#{4,5} /.test(l) && l.replace(/^#+ /, '') === heading);
  expect(at, `no heading ${heading}`).toBeGreaterThanOrEqual(0);
  const end = lines.findIndex((l, i) => i > at && /^#{3,5} /.test(l));
  return lines.slice(at, end < 0 ? undefined : end).join('\n');
}

describe('docs/api.md reference', () => {
  it('is what node scripts/docs-api.mjs generates (npm run docs:api rewrites it)', () => {
    const r = spawnSync(process.execPath, [join(root, 'scripts', 'docs-api.mjs'), '--check'], {
      cwd: root,
      encoding: 'utf8',
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
  });

  it('has a section per entry: the main entry, its Node.js build, then the subpaths', () => {
    const headings = reference()
      .split('\n')
      .filter((l) => l.startsWith('### '));
    expect(headings).toEqual([
      '### `webccl`',
      '### `webccl` in Node.js',
      '### `webccl/embed`',
      '### `webccl/trace`',
      '### `webccl/layouts`',
    ]);
  });

  it('documents entry points with their signature and summary', () => {
    const ref = reference();
    const init = section(ref, '`initCommGroup`');
    expect(init).toContain('function initCommGroup(options?: InitOptions): Promise<Communicator>');
    expect(init).toContain('Joins the default world group');

    const allReduce = section(ref, '`Communicator.allReduce`');
    expect(allReduce).toContain('allReduce(x: BufferArg, opts?: AllReduceOptions): Work');

    expect(section(ref, '`Communicator.createGroup`')).toContain('A communicator over `ranks`');
    expect(section(ref, '`Communicator.abort`')).toContain('Fails every pending op');
    expect(section(ref, '`Work.wait`')).toContain('Completes the op');
    expect(section(ref, '`launch`')).toContain('function launch(');
    expect(section(ref, '`traceSpan`')).toContain('function traceSpan<T>(name: string, fn: () => T): T');
  });

  it('lists public members only, and no file paths', () => {
    const ref = reference();
    expect(ref).not.toMatch(/^#{5} `Communicator\.(engine|placement|options|issue|bufs)`$/m);
    expect(ref).not.toContain('RankInit');
    expect(ref).not.toContain(root);
    expect(ref).not.toMatch(/import\(["']/);
  });

  it('links each subpath export to its reference', () => {
    const ref = reference();
    const embed = ref.slice(ref.indexOf('### `webccl/embed`'), ref.indexOf('### `webccl/trace`'));
    expect(embed).toContain('| [`createNode`](#createnode) | function |');
    expect(embed).toContain('| [`Communicator`](#communicator) | class |');
  });
});
