// A WARN line per event, up to a few per interval, then one summary line per interval: a flood
// of refused connections (a port scan, a misconfigured job) must not flood the terminal.
import { log } from './log.js';

export class RateLimitedLog {
  private shown = 0;
  private suppressed = 0;
  private timer?: ReturnType<typeof setTimeout>;

  /** `what` names the events in the summary ("refused connections to rank 0's data port"). */
  constructor(
    private readonly what: string,
    private readonly perInterval = 5,
    private readonly intervalMs = 10_000,
  ) {}

  warn(line: string): void {
    this.timer ??= setTimeout(() => this.flush(), this.intervalMs).unref();
    if (this.shown < this.perInterval) {
      this.shown++;
      log('WARN', line);
    } else this.suppressed++;
  }

  /** Ends the interval: says how many lines it held back. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.suppressed)
      log(
        'WARN',
        `${this.what}: ${this.suppressed} more in the last ${Math.round(this.intervalMs / 1000)} s (only the first ${this.perInterval} are shown per interval)`,
      );
    this.shown = this.suppressed = 0;
  }
}
