// The check every rank issues before each step's first bucket: one allReduce (op max) of six
// f64 telling each rank the maximum and minimum, over ranks, of the micro-batches, the step
// number and the bucket layout, so that every rank refuses a step on which they disagree alike.

import { DTYPE_SIZE } from '../core/dtypes.js';
import { WebcclError } from '../core/errors.js';
import type { WireDtype } from './data-parallel-options.js';

/** What a rank sends: each value as [x, -x], so that the maximum of each pair gives max and min. */
export function agreementBuffer(microBatches: number, step: number, layout: number): Float64Array {
  return Float64Array.of(microBatches, -microBatches, step, -step, layout, -layout);
}

/**
 * Reads the reduced check `c`: undefined when the ranks agree, else the MISMATCH to throw (the
 * same on every rank: each reads the same maxima) and the step number every rank goes on from.
 * `local` is this rank's micro-batch count, `rank` its number.
 */
export function disagreement(
  c: Float64Array,
  local: number,
  rank: number,
): { error: WebcclError; nextStep: number } | undefined {
  const [maxK, minK, maxStep, minStep, maxLayout, minLayout] = [c[0], -c[1], c[2], -c[3], c[4], -c[5]];
  if (maxK === minK && maxStep === minStep && maxLayout === minLayout) return undefined;
  const field = maxLayout !== minLayout ? 'parameters' : maxK !== minK ? 'microBatches' : 'step';
  const why =
    field === 'parameters'
      ? 'the ranks made their data-parallel objects from different parameter lists or options (sizes, wireDtype, bucketBytes, average)'
      : field === 'microBatches'
        ? `ranks disagree on when to synchronise: they accumulated ${minK} to ${maxK} micro-batches this step (this rank ${local})`
        : `ranks are at different steps (${minStep} to ${maxStep}): one skipped a synchronize`;
  const error = new WebcclError(
    'MISMATCH',
    `synchronize: ${why}; no rank applied this step's gradients, every rank of the communicator got this error, and the next step starts afresh`,
    { field, microBatches: [minK, maxK], steps: [minStep, maxStep], local, rank },
  );
  return { error, nextStep: maxStep + 1 }; // every rank starts the next step from the same number
}

/** A number every rank computes alike from what must agree (FNV-1a over the parameter sizes and options). */
export function layoutHash(sizes: readonly number[], wire: WireDtype, cap: number, average: boolean): number {
  let h = 0x811c9dc5;
  const mix = (v: number) => {
    h = Math.imul(h ^ (v & 0xffff), 0x01000193) >>> 0;
    h = Math.imul(h ^ (v >>> 16), 0x01000193) >>> 0;
  };
  mix(sizes.length);
  for (const s of sizes) mix(s);
  mix(DTYPE_SIZE[wire] + (wire === 'bf16' ? 8 : 0));
  mix(cap);
  mix(average ? 1 : 0);
  return h;
}
