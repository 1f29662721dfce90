// How parameters fall into gradient buckets. A backward pass produces gradients from the last
// layer to the first, so buckets are filled over the parameters in reverse order (as torch's DDP
// does): the first bucket is complete first, and its allReduce runs under the rest of the pass.

/** One bucket: the parameters it holds, in the order they lie in its buffer. */
export interface BucketPlan {
  /** Parameter indices, highest first. */
  readonly params: readonly number[];
  /** Element offset of each of `params` in the bucket's buffer. */
  readonly offsets: readonly number[];
  /** Elements the bucket holds. */
  readonly count: number;
}

/**
 * Buckets of at most `capElements` elements over parameters of `sizes` elements, filled from the
 * last parameter to the first. A parameter larger than the cap gets a bucket of its own; a
 * parameter of no element is in no bucket (it has nothing to reduce).
 */
export function planBuckets(sizes: readonly number[], capElements: number): BucketPlan[] {
  const out: BucketPlan[] = [];
  let params: number[] = [];
  let offsets: number[] = [];
  let count = 0;
  const close = () => {
    if (count > 0) out.push({ params, offsets, count });
    params = [];
    offsets = [];
    count = 0;
  };
  for (let i = sizes.length - 1; i >= 0; i--) {
    const n = sizes[i];
    if (n === 0) continue;
    if (count > 0 && count + n > capElements) close();
    params.push(i);
    offsets.push(count);
    count += n;
  }
  close();
  return out;
}
