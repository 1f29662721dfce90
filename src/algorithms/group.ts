// What a network algorithm sees: a group of ranks it can send tagged messages to, and the op's
// working memory (inside the wasm memory, so the kernels can reduce what arrives in place).
// Algorithms know nothing else: not sockets, not communicators, not where the bytes came from.

/** Ranks 0..size-1 of a group; `step` names a message within the op (with the op's sequence). */
export interface Group {
  readonly rank: number;
  readonly size: number;
  /** Resolves once `data` is handed to the wire; the caller leaves it untouched until then. */
  send(peer: number, step: number, data: Uint8Array): Promise<void>;
  /** Resolves once `into` holds what `peer` sent for `step` (lengths must match). */
  recv(peer: number, step: number, into: Uint8Array): Promise<void>;
  /**
   * Optional: send `data` to `to` and receive `into` from `from` under one step, settling as
   * Promise.all of the two would. A group that knows at once whether its send went (the
   * simulator's) answers with the receive alone, without Promise.all's bookkeeping, which a
   * 4,096-rank ring pays 33 M times in one process.
   */
  exchange?(to: number, from: number, step: number, data: Uint8Array, into: Uint8Array): Promise<unknown>;
  /**
   * Optional: how many messages to one peer travel side by side (the connections a pair has;
   * 1 when absent). Data that crosses one hop unreduced is cut into that many pieces, one per
   * connection (see singleHopPieces).
   */
  readonly lanes?: number;
}

/** Sends to `to` and receives from `from` at once (see Group.exchange). */
export function exchange(
  g: Group,
  to: number,
  from: number,
  step: number,
  data: Uint8Array,
  into: Uint8Array,
): Promise<unknown> {
  return g.exchange
    ? g.exchange(to, from, step, data, into)
    : Promise.all([g.send(to, step, data), g.recv(from, step, into)]);
}

/** The op's memory: regions are byte addresses in the wasm memory, lengths in elements. */
export interface Mem {
  readonly elemBytes: number;
  /** A byte view of `count` elements at `addr`. */
  view(addr: number, count: number): Uint8Array;
  /** dst[i] = dst[i] (op) src[i] for `count` elements, with the op's dtype and reduction. */
  reduce(dst: number, src: number, count: number): void;
  /**
   * dst[i] = a[i] (op) b[i]: reduce() of a copy of `a`, without the copy (an out-of-place op's first touch of its
   * output).
   */
  reduceFrom(dst: number, a: number, b: number, count: number): void;
  /** Copies `count` elements from src to dst (regions must not overlap). */
  copy(dst: number, src: number, count: number): void;
  /** Scratch for `count` elements, owned by the op until it ends. */
  scratch(count: number): number;
}

/** A run of elements: where it starts (byte address) and how many. */
export interface Span {
  addr: number;
  count: number;
}

/** Part `i` of `parts` near-equal parts of `count` elements (the first `count % parts` get one more). */
export function part(count: number, parts: number, i: number): { start: number; count: number } {
  const q = Math.floor(count / parts);
  const r = count % parts;
  return { start: i * q + Math.min(i, r), count: q + (i < r ? 1 : 0) };
}

/** Sub-span `i` of `parts` of `s` (part()'s arithmetic inline: the simulator calls this millions of times). */
export function subSpan(s: Span, parts: number, i: number, elemBytes: number): Span {
  if (parts === 1) return s;
  const q = Math.floor(s.count / parts);
  const r = s.count % parts;
  return { addr: s.addr + (i * q + Math.min(i, r)) * elemBytes, count: q + (i < r ? 1 : 0) };
}

export const mod = (a: number, n: number): number => ((a % n) + n) % n;

/** A message's piece size: big enough to keep the wire busy, small enough to pipeline. */
export const PIECE_BYTES = 512 * 1024;

/**
 * The piece size where pieces pipeline nothing: data that crosses one hop and is not reduced on
 * arrival (a broadcast or an allgather between 2 ranks). Each message costs a system call or
 * two, a read of its header and a few promise turns on both sides, for no overlap; a 64 MiB
 * broadcast or allgather between 2 processes took about 30% less CPU per rank in 16 MiB pieces
 * than in 512 KiB ones. Bounded so that a message arriving before its receive is posted (held,
 * then copied) stays well within the transport's hold limits.
 */
export const SINGLE_HOP_PIECE_BYTES = 16 * 1024 * 1024;

/**
 * The least one-hop message cut across a pair's connections: from here each connection moving
 * half took less time than one moving all (2 processes over TCP loopback, broadcast, 4
 * interleaved rounds: 1 MiB 243-343 against 340-528 µs, 16 MiB 6,176-9,272 against 6,804-9,929).
 */
export const SPLIT_MIN_BYTES = 1024 * 1024;

/**
 * How many pieces `bytes` that cross one hop unreduced (a broadcast or an allgather between 2
 * ranks) travel in: none over SINGLE_HOP_PIECE_BYTES, and from SPLIT_MIN_BYTES one per
 * connection of the pair (`lanes`), so that every connection carries a share.
 */
export function singleHopPieces(bytes: number, lanes = 1): number {
  const pieces = pieceCount(bytes, SINGLE_HOP_PIECE_BYTES);
  return bytes >= SPLIT_MIN_BYTES ? Math.max(pieces, lanes) : pieces;
}

/** How many pieces of at most `pieceBytes` carry `bytes`: at least one. */
export function pieceCount(bytes: number, pieceBytes: number): number {
  return Math.max(1, Math.ceil(bytes / pieceBytes));
}

/** How many pieces each of `blocks` is cut into so that none exceeds `pieceBytes`. */
export function piecesFor(blocks: Span[], elemBytes: number, pieceBytes = PIECE_BYTES): number {
  const most = Math.max(0, ...blocks.map((b) => b.count));
  return pieceCount(most * elemBytes, pieceBytes);
}

/** `s` cut into the pieces that travel as separate messages: at least one (empty for an empty span). */
export function piecesOf(s: Span, elemBytes: number, pieceBytes = PIECE_BYTES): Span[] {
  return cutInto(s, piecesFor([s], elemBytes, pieceBytes), elemBytes);
}

/** `s` cut into `n` near-equal pieces. */
export function cutInto(s: Span, n: number, elemBytes: number): Span[] {
  return Array.from({ length: n }, (_, k) => subSpan(s, n, k, elemBytes));
}

/**
 * Marks promises that are awaited one at a time, later: one that fails before its turn is not an
 * unhandled rejection (the op fails through whichever is awaited first).
 */
export function awaitedLater<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}
