// The layering of src/, read from the sources themselves: every relative import of every
// src/**/*.ts file (import, export ... from, import()). The layer rules count type-only imports
// too (a type still ties one layer to another); the cycle rule counts the imports that load a
// file at run time, since a type-only import is erased and cannot make two files wait on each
// other (comm/ has such type-only loops: a communicator and the groups it forms name each other). The wire module sits under the store protocol and
// every transport, so that a new transport builds on it without reaching into bootstrap/, and
// bootstrap/ may use a transport without a transport using bootstrap/ back.
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const SRC = resolve(__dirname, '../src');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return sources(p);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [p] : [];
  });
}

// Comments are dropped first so an import named in prose does not count.
const IMPORT = /(?:^|[\s;])(?:import|export)\s+([^'";]*?\sfrom\s+)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;

/** An import clause that brings in types only: `import type …`, or every name marked `type`. */
function typeOnly(clause: string | undefined): boolean {
  if (!clause) return false;
  if (/^type\s/.test(clause)) return true;
  const names = /^\{([^}]*)\}/.exec(clause.trim())?.[1].split(',').map((n) => n.trim()).filter(Boolean);
  return !!names && names.length > 0 && names.every((n) => n.startsWith('type '));
}

/** Every file's specifiers, as written (relative ones and `node:` ones), and whether each is types only. */
export function importsOf(text: string): { spec: string; typeOnly: boolean }[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
  return [...code.matchAll(IMPORT)].map((m) => ({ spec: m[2] ?? m[3], typeOnly: typeOnly(m[1]) }));
}

interface Node {
  /** Files imported, relative to src/ (x.js resolved to x.ts). */
  relative: string[];
  /** Those of them loaded at run time (not type-only). */
  runtime: string[];
  node: string[];
}

/** The import graph of src/, as paths relative to src/ (x.js resolved to x.ts). */
function graph(): Map<string, Node> {
  const g = new Map<string, Node>();
  for (const file of sources(SRC)) {
    const specs = importsOf(readFileSync(file, 'utf8'));
    const local = specs.filter((s) => s.spec.startsWith('.'));
    const at = (s: { spec: string }) => relative(SRC, resolve(dirname(file), s.spec)).replace(/\.js$/, '.ts');
    g.set(relative(SRC, file), {
      relative: local.map(at), runtime: local.filter((s) => !s.typeOnly).map(at), node: specs.filter((s) => s.spec.startsWith('node:')).map((s) => s.spec),
    });
  }
  return g;
}

/** Every cycle (as a path of files, first = last), one per strongly connected group. */
function cycles(g: Map<string, Node>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (f: string): void => {
    state.set(f, 'open');
    stack.push(f);
    for (const to of g.get(f)?.runtime ?? []) {
      if (!g.has(to)) continue;
      if (state.get(to) === 'open') found.push([...stack.slice(stack.indexOf(to)), to]);
      else if (!state.has(to)) visit(to);
    }
    stack.pop();
    state.set(f, 'done');
  };
  for (const f of [...g.keys()].sort()) if (!state.has(f)) visit(f);
  return found;
}

const under = (dir: string) => (f: string) => f.startsWith(`${dir}/`);
/** Each import from a file under `from` to a file under any of `to`, as "a -> b". */
function crossings(g: Map<string, { relative: string[] }>, from: string, to: string[]): string[] {
  return [...g].filter(([f]) => under(from)(f)).flatMap(([f, d]) => d.relative.filter((t) => to.some((dir) => under(dir)(t))).map((t) => `${f} -> ${t}`));
}

describe('layers of src/', () => {
  const g = graph();

  it('reads the imports it checks (sanity: the graph is not empty and resolves)', () => {
    expect(g.size).toBeGreaterThan(50);
    expect(g.get('bootstrap/node/store-server.ts')?.relative).toContain('bootstrap/store-protocol.ts');
    expect(importsOf("import type { A } from './a.js';\nexport * from \"./b.js\";\n// import x from './c.js'\nconst m = await import('./d.js');\nimport { type E, f } from './e.js';\nimport { type G } from 'node:g';"))
      .toEqual([['./a.js', true], ['./b.js', false], ['./d.js', false], ['./e.js', false], ['node:g', true]].map(([spec, typeOnly]) => ({ spec, typeOnly })));
  });

  it('has no import cycle between files (counting the imports that load a file)', () => {
    expect(cycles(g).map((c) => c.join(' -> '))).toEqual([]);
  });

  it('has nothing under transport/ importing from bootstrap/', () => {
    expect(crossings(g, 'transport', ['bootstrap'])).toEqual([]);
  });

  it('has nothing under wire/ importing from bootstrap/, transport/ or comm/', () => {
    expect(crossings(g, 'wire', ['bootstrap', 'transport', 'comm'])).toEqual([]);
  });

  it('has no node: import in a browser-safe file of wire/ (only under wire/node/)', () => {
    const wire = [...g].filter(([f]) => under('wire')(f) && !under('wire/node')(f));
    expect(wire.length).toBeGreaterThan(0);
    expect(wire.filter(([, d]) => d.node.length > 0).map(([f, d]) => `${f}: ${d.node.join(', ')}`)).toEqual([]);
  });

  it('has the mesh of transport/mesh/ browser-safe: no node:, ws or node/ directory import (a page\'s carrier builds on it)', () => {
    const mesh = sources(join(SRC, 'transport', 'mesh'));
    expect(mesh.map((f) => relative(SRC, f))).toContain('transport/mesh/mesh.ts');
    const bad = mesh.flatMap((f) => importsOf(readFileSync(f, 'utf8'))
      .filter(({ spec }) => spec.startsWith('node:') || spec === 'ws' || /(^|\/)node\//.test(spec))
      .map(({ spec }) => `${relative(SRC, f)}: ${spec}`));
    expect(bad).toEqual([]);
  });

  it('has nothing browser-safe in bootstrap/ (outside bootstrap/node/) importing node:, ws or a node/ directory', () => {
    // The store protocol and its client session run in pages too (connectStore over the native WebSocket).
    const safe = sources(join(SRC, 'bootstrap')).filter((f) => !relative(SRC, f).startsWith('bootstrap/node/'));
    expect(safe.map((f) => relative(SRC, f))).toContain('bootstrap/store-session.ts');
    const bad = safe.flatMap((f) => importsOf(readFileSync(f, 'utf8'))
      .filter(({ spec }) => spec.startsWith('node:') || spec === 'ws' || /(^|\/)node\//.test(spec))
      .map(({ spec }) => `${relative(SRC, f)}: ${spec}`));
    expect(bad).toEqual([]);
  });
});
