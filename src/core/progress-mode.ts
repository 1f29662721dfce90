// Who moves a communicator's ops along: the node's progress thread ('thread': ops go on while
// the rank computes without calling webccl), the rank itself while it waits or polls ('caller'),
// or chosen per op ('auto'). Call option > communicator option > WEBCCL_PROGRESS > auto.
import { envString } from './config.js';
import { WebcclError } from './errors.js';

export const PROGRESS_MODES = ['thread', 'caller', 'auto'] as const;
export type ProgressMode = (typeof PROGRESS_MODES)[number];

export function isProgressMode(v: unknown): v is ProgressMode {
  return typeof v === 'string' && (PROGRESS_MODES as readonly string[]).includes(v);
}

/** The mode given (option), else WEBCCL_PROGRESS, else 'auto'; anything else is INVALID_ARGUMENT. */
export function resolveProgressMode(given?: unknown): ProgressMode {
  if (given !== undefined) {
    if (isProgressMode(given)) return given;
    throw new WebcclError(
      'INVALID_ARGUMENT',
      `progress must be one of ${PROGRESS_MODES.join(', ')}, got ${JSON.stringify(given)}`,
      { option: 'progress', value: given },
    );
  }
  const v = envString('WEBCCL_PROGRESS')?.toLowerCase();
  if (v === undefined) return 'auto';
  if (isProgressMode(v)) return v;
  throw new WebcclError(
    'INVALID_ARGUMENT',
    `WEBCCL_PROGRESS=${JSON.stringify(v)} is not one of ${PROGRESS_MODES.join(', ')}`,
    { variable: 'WEBCCL_PROGRESS', value: v },
  );
}
