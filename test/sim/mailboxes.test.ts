// The simulator's mailboxes (one open-addressing table for every rank): against a Map, over
// random files and takes that collide, grow the table and delete from the middle of runs.
import { describe, expect, it } from 'vitest';
import { Mailboxes } from '../../src/sim/mailboxes.js';

describe('Mailboxes', () => {
  it('finds what was filed and nothing else, through growth and deletions, as a Map does', () => {
    let seed = 12345;
    const rnd = (n: number) => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % n;
    const mail = new Mailboxes();
    const ref = new Map<string, { bytes: number; into: Uint8Array | null }>();
    const view = new Uint8Array(4);
    for (let op = 0; op < 200_000; op++) {
      // Few ranks and keys (some beyond 2^32) so entries collide; the live count rises to ~3,000 and falls.
      const rank = rnd(64);
      const key = rnd(op < 100_000 ? 4096 : 64) * (rnd(4) === 0 ? 2 ** 33 + 1 : 1);
      const k = `${rank}/${key}`;
      const i = mail.find(rank, key);
      expect(i >= 0).toBe(ref.has(k));
      if (i >= 0) {
        expect(mail.bytes(i)).toBe(ref.get(k)!.bytes);
        expect(mail.into(i)).toBe(ref.get(k)!.into);
        mail.remove(i);
        ref.delete(k);
      } else if (op < 100_000 || rnd(3) === 0) {
        const into = rnd(2) ? view : null;
        mail.add(rank, key, into, null, null, op);
        ref.set(k, { bytes: op, into });
      }
    }
    for (const [k, v] of ref) {
      const [rank, key] = k.split('/').map(Number);
      const i = mail.find(rank, key);
      expect(i).toBeGreaterThanOrEqual(0);
      expect(mail.bytes(i)).toBe(v.bytes);
    }
    const withReceive = [...ref]
      .filter(([k, v]) => k.startsWith('5/') && v.into)
      .map(([k]) => Number(k.split('/')[1]))
      .sort((a, b) => a - b);
    expect(mail.receivesOf(5).sort((a, b) => a - b)).toEqual(withReceive);
  });
});
