// Property-based interleavings of a link's byte stream with the receives its ranks post
// (src/transport/mailbox.ts behind src/wire/link-reader.ts): each receive is posted at a random
// point (before its payload, while it arrives, or after), some are failed with their
// communicator on the way, and the stream is cut anywhere and read through push() or through
// target()/received() as a dialled socket reads. Every receive that was not failed must end with
// exactly its payload, a failed one must get no byte after its failure, and every hold must end
// (a later early payload still fits the hold limits).

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { WebcclError } from '../../src/core/errors.js';
import { type HoldLimits, Mailbox } from '../../src/transport/mailbox.js';
import type { Tag } from '../../src/transport/transport.js';
import { encodeDataHeader } from '../../src/wire/link-frames.js';
import { FrameReader } from '../../src/wire/link-reader.js';
import { concatAll, cuts, fuzzSettings, longRun, split } from '../helpers/fuzz.js';

const DEADLINE = longRun ? 3_600_000 : 60_000;
/** Room for every payload of a case held at once (6 of at most 600 bytes), and no more messages. */
const LIMITS: HoldLimits = { maxHeldMessages: 6, maxHeldBytes: 6 * 600 };

const message = fc.record({
  payload: fc.uint8Array({ minLength: 0, maxLength: 600 }),
  /** Where its receive is posted: before piece `postAt` of the stream (past the end: after it). */
  postAt: fc.nat(40),
  /** Its communicator fails before piece `failAt` (only when fails is true). */
  fails: fc.boolean(),
  failAt: fc.nat(40),
});
const feeding = fc.oneof(
  fc.constant({ direct: false, spare: 0 }),
  fc.record({ direct: fc.constant(true), spare: fc.integer({ min: 1, max: 96 }) }),
);

describe('mailbox interleavings', () => {
  it(
    'receives posted before, during or after their payload arrives get exactly it; failed ones get nothing more',
    async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(message, { minLength: 1, maxLength: 6 }), cuts, feeding, async (ms, at, how) => {
          // Each message in its own communicator (tag space), so failing one touches no other.
          const tags: Tag[] = ms.map((_, k) => ({ comm: 1, seq: k, step: 0, space: k + 1 }));
          const stream = concatAll(
            ms.map((m, k) => concatAll([encodeDataHeader(tags[k], m.payload.length), m.payload])),
          );
          const pieces = split(stream, at);
          const box = new Mailbox(0, LIMITS);
          const r = new FrameReader({ handshake: () => {}, data: (t, n) => box.claim(t, n) });
          r.ready();
          const spare = new Uint8Array(how.spare);
          const into = ms.map((m) => new Uint8Array(m.payload.length).fill(0xee));
          const ended: ('ok' | 'failed' | undefined)[] = ms.map(() => undefined);
          /** What each failed receive held when it failed: it must not change afterwards. */
          const atFailure: (Uint8Array | undefined)[] = ms.map(() => undefined);
          const posted = ms.map(() => false);
          const post = (k: number) => {
            posted[k] = true;
            box.post(tags[k], into[k]).then(
              () => (ended[k] = 'ok'),
              () => (ended[k] = 'failed'),
            );
          };
          const fail = (k: number) => {
            box.failSpace(k + 1, new WebcclError('ABORTED', `communicator ${k + 1} failed`));
            atFailure[k] = into[k].slice();
          };
          for (let i = 0; i <= pieces.length; i++) {
            ms.forEach((m, k) => {
              if (!posted[k] && Math.min(m.postAt, pieces.length) === i) post(k);
              if (m.fails && !atFailure[k] && Math.min(m.failAt, pieces.length) === i) fail(k);
            });
            await Promise.resolve(); // (a receive's settling runs between reads, as on the event loop)
            if (i === pieces.length) break;
            const piece = pieces[i];
            if (!how.direct) r.push(piece);
            else
              for (let p = 0; p < piece.length; ) {
                const dst = r.target(spare);
                const n = Math.min(dst.length, piece.length - p);
                dst.set(piece.subarray(p, p + n));
                r.received(dst, n);
                p += n;
              }
          }
          for (let k = 0; k < ms.length; k++) if (!posted[k]) post(k);
          await new Promise((resolve) => setImmediate(resolve));
          ms.forEach((m, k) => {
            if (atFailure[k]) {
              expect(ended[k], `receive ${k}`).toBeDefined();
              if (ended[k] === 'failed') expect(into[k], `receive ${k} after its failure`).toEqual(atFailure[k]);
            } else {
              expect(ended[k], `receive ${k}`).toBe('ok');
              expect(into[k], `receive ${k}`).toEqual(m.payload);
            }
          });
          // Every hold ended: as many early payloads as the limits allow still fit, in a fresh space.
          const later = { comm: 1, seq: 0, step: 0, space: 99 };
          for (let j = 0; j < LIMITS.maxHeldMessages; j++) {
            const sink = box.claim({ ...later, seq: j }, 1);
            expect('skip' in sink).toBe(false);
          }
        }),
        fuzzSettings(1500),
      );
    },
    DEADLINE,
  );
});
