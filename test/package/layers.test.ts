// The layering of src/, read from the sources themselves by scripts/check-imports.mjs (which
// `npm run lint` runs too): no import cycle between files (type-only imports count: a type still
// ties one file to another), no folder importing a layer above its own (core/ at the bottom,
// wire/ under every connection, transport/ under bootstrap/, engines under the Communicator),
// Node.js-only code only in nodejs/ folders, launch/ and node.ts, and no folder of more than 20
// files.
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a script of the repository, plain JavaScript without declarations
import { check, cycles, LAYERS } from '../../scripts/check-imports.mjs';

describe('layers of src/', () => {
  const { graph, problems } = check() as { graph: Map<string, string[]>; problems: string[] };

  it('reads the imports it checks (the graph resolves, and holds known edges)', () => {
    expect(graph.size).toBeGreaterThan(150);
    const edge = (from: string, to: string) =>
      [...graph].some(([f, ts]) => f.endsWith(from) && ts.some((t) => t.endsWith(to)));
    expect(edge('src/bootstrap/nodejs/store-server.ts', 'src/bootstrap/store-protocol.ts')).toBe(true);
    expect(edge('src/api/forming.ts', 'src/groups/form.ts')).toBe(true);
    expect(edge('src/progress/thread-engine.ts', 'src/progress/postbox-client.ts')).toBe(true);
    expect(LAYERS[0]).toEqual(['core']);
  });

  it('finds a cycle where there is one (the finder itself)', () => {
    const g = new Map([
      ['a', ['b']],
      ['b', ['c']],
      ['c', ['a']],
      ['d', ['a']],
      ['e', ['e']],
    ]);
    expect((cycles(g) as string[][]).map((c) => [...c].sort().join(','))).toEqual(
      expect.arrayContaining(['a,b,c', 'e']),
    );
    expect(
      cycles(
        new Map([
          ['a', ['b']],
          ['b', []],
        ]),
      ),
    ).toEqual([]);
  });

  it('has no cycle, no upward import, no Node.js outside its folders, no folder over 20 files', () => {
    expect(problems).toEqual([]);
  });
});
