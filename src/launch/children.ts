// What the process launchers share: a group of child processes that ends together. The first
// failure gives the others a grace period to end on their own (and print their own message),
// then SIGTERM, then SIGKILL a grace period later; terminate() does the same at once, and a
// second terminate() kills. None is left behind.
import type { ChildProcess } from 'node:child_process';
import type { LaunchResult, RankFailure } from './threads.js';

const epochMs = () => performance.timeOrigin + performance.now();

export class ChildGroup {
  readonly failures: RankFailure[] = [];
  terminated = false;
  /** When each failed rank said it started to exit (ms since the epoch), where it could say. */
  private readonly exitAt = new Map<number, number>();
  /** When this launcher heard of each failure. */
  private readonly heardAt = new Map<RankFailure, number>();
  private ending = false;
  private readonly children: ChildProcess[] = [];
  private readonly timers: ReturnType<typeof setTimeout>[] = [];

  /** `tolerant`: a rank's failure is recorded but does not end the others (--fault-tolerant). */
  constructor(
    private readonly graceMs: number,
    private readonly tolerant = false,
  ) {}

  /**
   * Tracks `child`; resolves once it has ended, calling `ended` once with why it failed
   * (undefined when it exited with 0). `on` is the event that marks its end ('exit', or 'close'
   * to have every IPC message first).
   */
  watch(child: ChildProcess, on: 'exit' | 'close', ended: (failure?: string, error?: unknown) => void): Promise<void> {
    this.children.push(child);
    return new Promise<void>((done) => {
      // 'error' alone (spawn failed) or the end alone, or both: count the child once.
      let seen = false;
      const end = (failure?: string, error?: unknown) => {
        if (seen) return;
        seen = true;
        ended(failure, error);
        done();
      };
      child.once('error', (e) => end(`could not start: ${e.message}`, e));
      child.once(on, (code: number | null, signal: NodeJS.Signals | null) =>
        end(code === 0 ? undefined : signal ? `killed by ${signal}` : `exited with code ${code}`),
      );
    });
  }

  /** Records a failure; the first one ends the group after the grace period. */
  fail(rank: number, message: string, error?: unknown): void {
    const f = { rank, message, ...(error !== undefined && { error }) };
    this.failures.push(f);
    this.heardAt.set(f, epochMs());
    if (this.tolerant && rank >= 0) return;
    if (!this.ending && !this.terminated) this.endAll(this.graceMs);
    this.ending = true;
  }

  /** Ends every child now (SIGTERM, SIGKILL a grace later); called again, SIGKILL at once. */
  terminate(reason: string): void {
    if (this.terminated) return this.signalAll('SIGKILL');
    this.terminated = true;
    const f = { rank: -1, message: reason };
    this.failures.push(f);
    this.heardAt.set(f, epochMs());
    this.endAll(0);
  }

  /** Rank `rank` said it started to exit with a failure at `at` (ms since the epoch). */
  exiting(rank: number, at: number): void {
    if (!this.exitAt.has(rank)) this.exitAt.set(rank, at);
  }

  /**
   * The failures in the order they happened: a rank that said when it started to exit counts
   * from then (its exit events may come after those of peers that failed on its closed
   * connections), any other from when this launcher heard of it.
   */
  result(): LaunchResult {
    this.timers.forEach(clearTimeout);
    const when = (f: RankFailure) =>
      (f.rank >= 0 ? this.exitAt.get(f.rank) : undefined) ?? this.heardAt.get(f) ?? Infinity;
    const failures = [...this.failures].sort((a, b) => when(a) - when(b));
    const tolerated = this.tolerant && failures.every((f) => f.rank >= 0) && failures.length < this.children.length;
    return { exitCode: failures.length && !tolerated ? 1 : 0, failure: failures[0], failures };
  }

  private signalAll(signal: NodeJS.Signals): void {
    for (const c of this.children) if (c.exitCode === null && c.signalCode === null) c.kill(signal);
  }

  /** SIGTERM to every child still running after `waitMs`, SIGKILL a grace period later. */
  private endAll(waitMs: number): void {
    for (const [ms, signal] of [
      [waitMs, 'SIGTERM'],
      [waitMs + this.graceMs, 'SIGKILL'],
    ] as const) {
      const t = setTimeout(() => this.signalAll(signal), ms);
      t.unref?.();
      this.timers.push(t);
    }
  }
}
