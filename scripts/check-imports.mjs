#!/usr/bin/env node
// The import graph of src/: fails on any import cycle (type-only imports count: they are design
// dependencies too) and on any layer importing a layer above it. Reads every import and export
// specifier with TypeScript's own scanner (`ts.preProcessFile`), so comments and strings never
// count, and resolves each relative specifier to its file.
//
//   node scripts/check-imports.mjs            # exit 1 with every cycle and upward import listed
//   node scripts/check-imports.mjs --graph    # also print the folder-level graph
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(root, 'src');

/**
 * Layers of src/, lowest first: a folder may import its own layer and those before it, never a
 * later one. Folders not listed sit on top and may import anything: the entries (index.ts,
 * browser.ts, node.ts) and launch/ (the launchers and the CLI). docs/architecture.md says what
 * each folder holds.
 */
export const LAYERS = [
  ['core'],
  ['wire', 'algorithms'],
  ['transport', 'tuner'],
  ['sim', 'bootstrap', 'engine'],
  ['layouts', 'shm'],
  ['net'],
  ['progress'],
  ['groups'],
  ['api'],
  ['training'],
  ['join'],
  ['hosts'],
];

/** Every .ts file under `dir`. */
function filesUnder(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...filesUnder(p));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** Every specifier `file` imports or re-exports, as written (import, export ... from, import()). */
function specifiersOf(file) {
  return ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles.map((f) => f.fileName);
}

/** The files of src/ that `file` imports or re-exports (relative specifiers; packages are not ours). */
function importsOf(file) {
  return specifiersOf(file)
    .filter((s) => s.startsWith('.'))
    .map((s) => resolve(dirname(file), s.replace(/\.js$/, '.ts')));
}

/** Whether `file` may use Node.js itself: under a nodejs/ folder, under launch/, or the Node entry. */
const nodeOnly = (file) =>
  /(^|\/)nodejs\//.test(relative(src, file)) ||
  relative(src, file).startsWith('launch/') ||
  relative(src, file) === 'node.ts';

/** Files a folder may hold directly before it wants splitting by concept. */
export const MAX_FILES_PER_FOLDER = 20;

/** Strongly connected components of more than one file, or a file importing itself (Tarjan). */
export function cycles(graph) {
  let index = 0;
  const idx = new Map(),
    low = new Map(),
    stack = [],
    on = new Set(),
    found = [];
  const visit = (v) => {
    idx.set(v, index);
    low.set(v, index++);
    stack.push(v);
    on.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!idx.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) !== idx.get(v)) return;
    const comp = [];
    for (let w; w !== v; ) {
      w = stack.pop();
      on.delete(w);
      comp.push(w);
    }
    if (comp.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(comp);
  };
  for (const v of graph.keys()) if (!idx.has(v)) visit(v);
  return found;
}

/** The layer index of a file's top folder under src/, or -1 when it is free. */
function layerOf(file) {
  const top = relative(src, file).split('/')[0];
  return LAYERS.findIndex((l) => l.includes(top));
}

/** Checks the graph; returns the problems found, one line each. */
export function check() {
  const graph = new Map(filesUnder(src).map((f) => [f, importsOf(f)]));
  const problems = [];
  for (const [file, targets] of graph) {
    for (const t of targets) {
      // (a *.generated.ts file is written by the build: a fresh clone has none before it)
      if (!graph.has(t) && !t.endsWith('.generated.ts')) {
        problems.push(`${relative(root, file)}: imports ${relative(root, t)}, which does not exist`);
      }
      const from = layerOf(file),
        to = layerOf(t);
      if (from >= 0 && (to < 0 || to > from))
        problems.push(`${relative(root, file)}: imports ${relative(root, t)} from a layer above it`);
    }
  }
  // Everything else runs in a browser too: no node: module, no ws, nothing from a nodejs/ folder.
  for (const file of graph.keys()) {
    if (nodeOnly(file)) continue;
    for (const spec of specifiersOf(file)) {
      const local = spec.startsWith('.') && nodeOnly(resolve(dirname(file), spec.replace(/\.js$/, '.ts')));
      if (spec.startsWith('node:') || spec === 'ws' || local)
        problems.push(
          `${relative(root, file)}: imports ${spec}, which only Node.js has (only nodejs/ folders, launch/ and node.ts may)`,
        );
    }
  }
  const perFolder = new Map();
  for (const file of graph.keys()) perFolder.set(dirname(file), (perFolder.get(dirname(file)) ?? 0) + 1);
  for (const [dir, n] of perFolder)
    if (n > MAX_FILES_PER_FOLDER)
      problems.push(`${relative(root, dir)}/: ${n} files, more than ${MAX_FILES_PER_FOLDER} (split it by concept)`);
  for (const comp of cycles(graph))
    problems.push(
      `cycle of ${comp.length}: ${comp
        .map((f) => relative(src, f))
        .sort()
        .join(', ')}`,
    );
  return { graph, problems };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { graph, problems } = check();
  if (process.argv.includes('--graph')) {
    const edges = new Set();
    const folder = (f) => dirname(relative(src, f)) || '.';
    for (const [file, targets] of graph)
      for (const t of targets) if (folder(file) !== folder(t)) edges.add(`${folder(file)} -> ${folder(t)}`);
    console.log([...edges].sort().join('\n'));
  }
  for (const p of problems) console.log(p);
  console.log(`check-imports: ${graph.size} files, ${problems.length} problem(s)`);
  process.exit(problems.length ? 1 : 0);
}
