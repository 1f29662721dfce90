// A rank process's link to the launcher that started it (webccl run --procs), as torchrun's
// agents watch their workers: the launcher holds one end of a pipe given to the rank as an extra
// file descriptor (named in WEBCCL_LAUNCHER_FD). The kernel closes the launcher's end when the
// launcher ends, however it ends (SIGKILL included); the rank then aborts its communicators, so
// that peers elsewhere fail with a coded error instead of waiting, and ends itself. The rank
// also writes on that pipe when it starts to exit with a failure, and when: a process that
// exits closes its sockets before it is gone, so a peer that fails on the closed connection
// may end first, and only that word lets the launcher name the rank that failed first.
import { writeSync } from 'node:fs';
import { Socket } from 'node:net';
import { isMainThread } from 'node:worker_threads';
import { LAUNCHER_FD_VAR } from '../../core/config.js';

export { LAUNCHER_FD_VAR };

/** The descriptor the process launcher gives the pipe (after stdin, stdout and stderr). */
export const LAUNCHER_FD = 3;
/** How long a rank whose launcher ended gives its aborts to reach its peers before it exits. */
export const FLUSH_MS = 250;
/** Exit code of a rank ended because its launcher ended. */
export const LAUNCHER_LOST_EXIT = 1;

type Hook = (reason: string) => void;
/** Shared through globalThis: the rank guard and the library are separate bundles. */
const HOOKS = Symbol.for('webccl.launcherLostHooks');

/**
 * Runs `hook` with the reason when this process's launcher ends (only in a rank a launcher
 * watches; elsewhere it is never called). The world communicator aborts itself through this.
 */
export function onLauncherLost(hook: Hook): void {
  (globalThis as Record<symbol, Set<Hook> | undefined>)[HOOKS]?.add(hook);
}

/**
 * Watches the launcher's pipe named in the environment, if any; returns whether it does. The
 * variable is removed, so processes this rank starts do not watch a descriptor they lack.
 */
export function watchLauncher(env: Record<string, string | undefined> = process.env): boolean {
  const named = env[LAUNCHER_FD_VAR];
  delete env[LAUNCHER_FD_VAR];
  if (!isMainThread || named === undefined || !/^\d+$/.test(named)) return false;
  const hooks = new Set<Hook>();
  (globalThis as Record<symbol, Set<Hook>>)[HOOKS] = hooks;
  const pipe = new Socket({ fd: Number(named), readable: true, writable: false });
  const launcher = process.ppid;
  let ended = false;
  const lost = () => {
    if (ended) return;
    ended = true;
    const reason = `its launcher (pid ${launcher}) ended`;
    process.stderr.write(
      `webccl: rank ${env.RANK ?? '?'} (pid ${process.pid}): ${reason}; aborting and ending this rank\n`,
    );
    for (const hook of hooks) {
      try {
        hook(reason);
      } catch {
        // a communicator already closed: nothing to tell its peers
      }
    }
    setTimeout(() => process.exit(LAUNCHER_LOST_EXIT), FLUSH_MS);
  };
  pipe.on('data', () => undefined); // the launcher never writes; reading is how the end is seen
  pipe.on('end', lost);
  pipe.on('close', lost);
  pipe.on('error', lost);
  pipe.unref(); // the pipe alone must not keep the rank alive
  // (the first 'exit' listener: --import loads this before the rank's script)
  process.on('exit', (code) => {
    if (code === 0) return;
    try {
      writeSync(Number(named), exitNotice(code, performance.timeOrigin + performance.now()));
    } catch {
      // the launcher has gone: nobody to tell
    }
  });
  return true;
}

/** What a rank writes on the pipe as it starts to exit with `code`, at `at` (ms since the epoch). */
export const exitNotice = (code: number, at: number): string => `exiting ${code} ${at}\n`;

/** The times (ms since the epoch) at which a rank said it was exiting, read from what it wrote. */
export function exitNoticeTimes(text: string): number[] {
  return [...text.matchAll(/^exiting -?\d+ ([\d.]+)$/gm)].map((m) => Number(m[1]));
}
