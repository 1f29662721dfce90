// A communicator's doorbell: ranks that have waited long enough sleep on one word of its block
// instead of on each flag they wait for, and whoever makes progress others may wait for rings
// it. A sleeper registers and reads the bell first, and only then takes a last look, so a post
// after that look always wakes it. Used by the step loops' runner and by point-to-point ops.
import { C } from '../core/shm-map.js';

/** How often a rank on an unshared memory looks again instead of sleeping on the bell. */
const UNSHARED_LOOK_MS = 1;

/** The last look, once registered: how long to sleep (ms), or null when the wait is over. */
export type LastLook = () => number | null;

export class Doorbell {
  private readonly bell: number;
  private readonly sleepers: number;
  /**
   * `words`: a view of the node memory, kept: the bell's two words lie in the communicator's
   * block, which existed before the bell, and a view of a shared memory stays valid however it
   * grows (an unshared one never grows). Asking for the current view on every post cost a
   * ping-pong a load and a call per message.
   */
  constructor(
    private readonly words: Int32Array,
    comm: number,
  ) {
    this.bell = (comm + C.DOORBELL) >> 2;
    this.sleepers = (comm + C.SLEEPERS) >> 2;
  }

  /** Blocks the thread until rung, or until `look`'s time has passed (not at all when it says null). */
  sleep(look: LastLook): void {
    try {
      const bell = this.register();
      const ms = look();
      if (ms !== null) Atomics.wait(this.words, this.bell, bell, ms);
    } finally {
      this.unregister();
    }
  }

  /** The same without blocking the thread (a page's main thread may not block). */
  async sleepAsync(look: LastLook): Promise<void> {
    try {
      const bell = this.register();
      const ms = look();
      if (ms === null) return;
      const view = this.words;
      if (!(view.buffer instanceof (globalThis.SharedArrayBuffer ?? Object))) {
        // An unshared node memory (a node of one rank in a page without isolation) cannot be
        // waited on; no other thread rings it, and what this rank waits for arrives on its own
        // event loop (the network): look again shortly.
        await new Promise((r) => setTimeout(r, Math.min(ms, UNSHARED_LOOK_MS)));
        return;
      }
      const r = Atomics.waitAsync(view, this.bell, bell, ms);
      if (!r.async) return;
      // Node does not count a pending waitAsync as work: without a timer, a process (or worker)
      // with nothing else to do would exit in the middle of the op.
      const keepAlive = setTimeout(() => undefined, Math.min(ms, 0x7fffffff));
      await r.value.finally(() => clearTimeout(keepAlive));
    } finally {
      this.unregister();
    }
  }

  /** Wakes every sleeper, so that each looks again. */
  ring(): void {
    const i32 = this.words;
    Atomics.add(i32, this.bell, 1);
    Atomics.notify(i32, this.bell);
  }

  /** Rings only when someone sleeps (a post on the fast path). */
  ringIfSleepers(): void {
    if (Atomics.load(this.words, this.sleepers) > 0) this.ring();
  }

  /** Counts this thread as a sleeper (every poster that finds one rings) and reads the bell. */
  private register(): number {
    const i32 = this.words;
    Atomics.add(i32, this.sleepers, 1);
    return Atomics.load(i32, this.bell);
  }

  private unregister(): void {
    Atomics.sub(this.words, this.sleepers, 1);
  }
}
