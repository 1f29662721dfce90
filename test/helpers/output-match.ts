// Waits for a child's output to match `re` (the address a server prints, say): resolves with the
// match, rejects with what was printed when `ms` pass first.
import type { Readable } from 'node:stream';

export function outputMatch(stream: Readable, re: RegExp, ms = 30_000): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`no match for ${re} in ${ms} ms: ${out}`)), ms);
    stream.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const m = re.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    });
  });
}
