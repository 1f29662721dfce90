// Keeps only the declaration files an entry reaches: tsc declares every source file, but a
// user can reach only what the package's entries import; the rest would ship for nothing.
import { readdirSync, rmdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import ts from 'typescript';

/** The .d.ts files under `dir` that the entries (paths relative to `dir`) reach through imports. */
export function reachedDeclarations(dir, entries) {
  const roots = entries.map((e) => resolve(dir, e));
  const program = ts.createProgram(roots, {
    noEmit: true,
    types: [],
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
  });
  const inside = `${resolve(dir)}/`;
  return new Set(
    program
      .getSourceFiles()
      .map((f) => resolve(f.fileName))
      .filter((f) => f.startsWith(inside)),
  );
}

/** Deletes every declaration file under `dir` the entries do not reach, and folders left empty. */
export function pruneDeclarations(dir, entries) {
  const keep = reachedDeclarations(dir, entries);
  for (const e of entries)
    if (!keep.has(resolve(dir, e))) throw new Error(`prune-declarations: entry ${e} missing under ${dir}`);
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) {
        walk(p);
        if (readdirSync(p).length === 0) rmdirSync(p);
      } else if (!keep.has(resolve(p))) rmSync(p);
    }
  };
  walk(dir);
}
