// How many of the connections per pair (WEBCCL_NCHANNELS) a ring allReduce spreads its messages
// over: the cost model's choice for the op's size, after its piece size (ring-pieces.ts).
//   - the ring keeps up to LANES pieces in flight to its next rank; with k connections they
//     travel on min(k, lanes) of them at once (`ways`, schedules.ts);
//   - each connection serialises its share of the bytes (φ per byte: a flow slower than the
//     path), so more ways cut (bytes / ways)·φ;
//   - each connection beyond the first costs ω per step (its own wake-ups and system calls),
//     so more ways add steps·(ways − 1)·ω.
// The model's time is taken for k = 1 … the connections there are. Ties, which are every k when
// the model has neither cost (a model fitted before them, or on a machine where a connection
// carries the path's whole rate and costs nothing more), go to the most: the op spreads over
// every connection, as it did before the choice existed. Only the ring is weighed: the other
// schedules send one message per peer and step, which travels on one connection whatever k is.
// Which connection carries a message does not change what it matches (tags do), so ranks need
// not agree on the choice.
import { type CostModel, pathTimeUs } from './cost-model.js';
import { netCounts } from './schedules.js';

export interface ChannelCost {
  channels: number;
  /** The ring's predicted time (µs) over that many connections. */
  us: number;
}

/** The ring allReduce's predicted time over 1 … `most` connections per pair. */
export function ringChannelCosts(
  model: CostModel,
  n: number,
  bytes: number,
  pieceBytes: number,
  sharing: number,
  cores: number,
  most: number,
): ChannelCost[] {
  return Array.from({ length: Math.max(1, most) }, (_, i) => ({
    channels: i + 1,
    us: pathTimeUs(model.tcp, netCounts('ring', n, bytes, pieceBytes, i + 1), sharing, cores),
  }));
}

/**
 * The model's number of connections for a ring allReduce of `bytes` in pieces of `pieceBytes` (see the top of this
 * file).
 */
export function ringChannels(
  model: CostModel,
  n: number,
  bytes: number,
  pieceBytes: number,
  sharing: number,
  cores: number,
  most: number,
): number {
  if (most <= 1 || n <= 1) return Math.max(1, most);
  const costs = ringChannelCosts(model, n, bytes, pieceBytes, sharing, cores, most);
  let best = costs[costs.length - 1];
  for (let i = costs.length - 2; i >= 0; i--) if (costs[i].us < best.us * (1 - 1e-9)) best = costs[i];
  return best.channels;
}
