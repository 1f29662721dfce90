// A small seeded generator (mulberry32's mixing): the same seed gives the same jitter, so the same trace.

/**
 * The uniform number in [0, 1) of message `seq` of rank `src` under `seed`: a hash rather than a
 * stream, so that a message's draw does not depend on the order in which ranks sent (which
 * differs when the simulation is split over threads).
 */
export function messageRandom(seed: number, src: number, seq: number): number {
  let t =
    Math.imul(seed ^ 0x6d2b79f5, 0x9e3779b1) ^
    Math.imul(src + 1, 0x85ebca6b) ^
    Math.imul(seq | 0, 0xc2b2ae35) ^
    Math.imul((seq / 4294967296) | 0, 0x27d4eb2f);
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
