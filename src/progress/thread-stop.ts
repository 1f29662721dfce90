// Ending a progress thread that was asked to stop, on any platform: it gets a moment to end by
// itself (its loop looks at least every 200 ms, and writes its trace on the way out), then it
// is ended by force.

/** How long a thread asked to stop gets before it is ended by force. */
export const STOP_GRACE_MS = 2000;
/** Why a thread ended by force after its grace ended (page workers report it as their end). */
export const FORCED_STOP = `it did not end within ${STOP_GRACE_MS / 1000} s of being asked, and was terminated`;

/** Waits until `exited` settles, calling `force` (and waiting for it) if STOP_GRACE_MS pass first. */
export async function stopWithin(exited: Promise<void>, force: () => unknown): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const forced = new Promise<void>(
    (done) => (timer = setTimeout(() => void Promise.resolve(force()).then(() => done()), STOP_GRACE_MS)),
  );
  await Promise.race([exited, forced]);
  clearTimeout(timer);
}

/**
 * The text of a Web Worker's error event (an uncaught error, or '' for a script that could not be loaded), kept from
 * the page's own errors.
 */
export function workerErrorText(e: Event): string {
  e.preventDefault();
  return (e as ErrorEvent).message ?? '';
}
