// The first module of every rank thread the launcher starts: it sends the rank's output
// straight to the process's stdout and stderr, leaves the rank's identity where
// initCommGroup() looks for it, then runs the user's script.
import { writeSync } from 'node:fs';
import { workerData } from 'node:worker_threads';

/**
 * A worker's process.stdout hands its text to the parent thread, which writes it when its event
 * loop turns, and the worker sends the next piece only once the parent acknowledged the last on
 * the worker's own event loop. A rank blocked in Atomics.wait, or ended by terminate(), would
 * keep (or lose) the lines it printed last. Writing to the file descriptor at once cannot.
 */
function writeDirect(stream: NodeJS.WriteStream, fd: number): void {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  let broken = false;
  stream.write = ((
    chunk: string | Uint8Array,
    encoding?: BufferEncoding | ((e?: Error | null) => void),
    cb?: (e?: Error | null) => void,
  ) => {
    if (typeof encoding === 'function') [cb, encoding] = [encoding, undefined];
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk, encoding ?? 'utf8') : chunk;
    for (let off = 0; off < bytes.length && !broken; ) {
      try {
        off += writeSync(fd, bytes, off);
      } catch (e) {
        // A full non-blocking pipe: wait a moment for the reader. Anything else (the terminal
        // or pipe is gone): stop writing, as the parent's own stream would.
        if ((e as NodeJS.ErrnoException).code === 'EAGAIN') Atomics.wait(pause, 0, 0, 1);
        else broken = true;
      }
    }
    if (cb) process.nextTick(cb);
    return true;
  }) as typeof stream.write;
}
writeDirect(process.stdout, 1);
writeDirect(process.stderr, 2);

// The same symbol as RANK_INIT in src/index.ts, spelled out so this entry stays a few lines
// instead of bundling the library.
const RANK_INIT = Symbol.for('webccl.rankInit');
const data = workerData as { init: unknown; script: string };
(globalThis as Record<symbol, unknown>)[RANK_INIT] = data.init;
await import(data.script);
