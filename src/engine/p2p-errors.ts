// The errors point-to-point ops fail with, the same on both paths: both sides of a size
// disagreement name both sizes, and a missed deadline names the peer that never matched.
import { WebcclError } from '../core/errors.js';

export interface P2pOp {
  name: 'send' | 'recv';
  seq: number;
  rank: number;
  peer: number;
  tag: number;
}

export const opText = (o: P2pOp): string =>
  `${o.name} #${o.seq} on rank ${o.rank} ${o.name === 'send' ? 'to' : 'from'} rank ${o.peer} (tag ${o.tag})`;

/** The sender sent `sentBytes`, the receiver's buffer holds `recvBytes`: raised on both sides. */
export function sizeMismatch(o: P2pOp, sentBytes: number, recvBytes: number): WebcclError {
  return new WebcclError(
    'SIZE_MISMATCH',
    `${opText(o)}: the send holds ${sentBytes} bytes, the matching recv ${recvBytes}; they must match`,
    {
      peer: o.peer,
      tag: o.tag,
      sentBytes,
      recvBytes,
    },
  );
}

export function p2pTimeout(o: P2pOp, ms: number): WebcclError {
  const what = o.name === 'send' ? 'no matching recv took it' : 'no matching send arrived';
  return new WebcclError(
    'TIMEOUT',
    `${opText(o)}: ${what} within ${ms} ms (WEBCCL_TIMEOUT_MS); rank ${o.peer} did not match it`,
    {
      peer: o.peer,
      tag: o.tag,
      missing: [o.peer],
      seq: o.seq,
    },
  );
}
