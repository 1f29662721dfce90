// What test/fixtures/shrink-check.mjs prints: each survivor's "ok rank R of N shrunk to S as
// rank R' after CODE" line, read back as [R, S, R', CODE], sorted by R.
export function shrunkIn(out: string): [number, number, number, string][] {
  return [...out.matchAll(/^ok rank (\d+) of \d+ shrunk to (\d+) as rank (\d+) after (\w+)$/gm)]
    .map((m): [number, number, number, string] => [Number(m[1]), Number(m[2]), Number(m[3]), m[4]])
    .sort((a, b) => a[0] - b[0]);
}
