// Double binary tree allreduce, for many ranks: the buffer's two halves are each reduced up one
// binary tree to its root and broadcast back down, in pipelined pieces, so a small message
// takes 2·depth = 2·log2(n) steps instead of the ring's 2(n−1). The two trees are built so that
// a rank which forwards for its children in one tree is (nearly always) a leaf of the other:
// tree A is the in-order balanced binary tree over ranks 0..n−1, whose interior nodes sit at odd
// positions when n = 2^k − 1, and tree B is the same tree shifted by one rank, which puts its
// interior nodes on A's leaves. Each rank then sends about twice the buffer in all (up once per
// tree, down to at most two children in the tree where it is interior).
import { awaitedLater, type Group, type Mem, mod, piecesFor, type Span, subSpan } from './group.js';

/** Parent (−1 at the root) and children of position `pos` in the in-order tree over 0..n−1. */
export function inOrderTree(n: number, pos: number): { parent: number; children: number[] } {
  let lo = 0;
  let hi = n;
  let parent = -1;
  for (;;) {
    const mid = (lo + hi) >> 1;
    if (mid === pos) {
      const children: number[] = [];
      if (lo < mid) children.push((lo + mid) >> 1);
      if (mid + 1 < hi) children.push((mid + 1 + hi) >> 1);
      return { parent, children };
    }
    parent = mid;
    if (pos < mid) hi = mid;
    else lo = mid + 1;
  }
}

/** This rank's parent and children, as ranks, in tree `t` (0: A, 1: B shifted by one). */
export function treeLinks(n: number, rank: number, t: 0 | 1): { parent: number; children: number[] } {
  const { parent, children } = inOrderTree(n, mod(rank - t, n));
  const toRank = (p: number) => mod(p + t, n);
  return { parent: parent < 0 ? -1 : toRank(parent), children: children.map(toRank) };
}

/** Allreduce of `half` over tree `t`: up to the root piece by piece, reducing, and back down. */
async function overTree(g: Group, m: Mem, half: Span, t: 0 | 1, stepBase: number, pieces: number): Promise<void> {
  const { parent, children } = treeLinks(g.size, g.rank, t);
  const ps = Array.from({ length: pieces }, (_, k) => subSpan(half, pieces, k, m.elemBytes));
  const up = (k: number) => stepBase + k;
  const down = (k: number) => stepBase + pieces + k;
  const view = (s: Span) => m.view(s.addr, s.count);
  // Every receive is posted up front: each child's pieces land in their own scratch, the
  // parent's pieces (the result) in place, which this rank no longer reads once it sent piece k up.
  const fromChild = children.map((c) => {
    const tmp = m.scratch(half.count);
    return ps.map((p, k) => {
      const at = tmp + (p.addr - half.addr);
      return { at, arrived: awaitedLater(g.recv(c, up(k), m.view(at, p.count))) };
    });
  });
  const fromParent = parent >= 0 ? ps.map((p, k) => awaitedLater(g.recv(parent, down(k), view(p)))) : [];
  const sends: Promise<void>[] = [];
  const sendDown = (k: number) => {
    for (const c of children) sends.push(awaitedLater(g.send(c, down(k), view(ps[k]))));
  };
  const upward = async () => {
    for (let k = 0; k < pieces; k++) {
      for (const child of fromChild) {
        await child[k].arrived;
        m.reduce(ps[k].addr, child[k].at, ps[k].count);
      }
      if (parent >= 0) sends.push(awaitedLater(g.send(parent, up(k), view(ps[k]))));
      else sendDown(k); // the root's piece k is complete
    }
  };
  const downward = async () => {
    for (let k = 0; k < fromParent.length; k++) {
      await fromParent[k];
      sendDown(k);
    }
  };
  await Promise.all([upward(), downward()]);
  await Promise.all(sends);
}

/** The smallest piece a half is cut into to fill the trees' pipeline. */
export const MIN_TREE_PIECE_BYTES = 64 * 1024;

/**
 * Pieces of a half: none over PIECE_BYTES, and up to 2·depth of at least MIN_TREE_PIECE_BYTES,
 * so that a mid-size buffer still streams down the 2·depth hops instead of crossing each whole
 * (time ≈ (pieces + 2·depth − 1)·(α + piece/β)).
 */
export function treePieces(size: number, half: Span, elemBytes: number): number {
  const depth = Math.floor(Math.log2(size));
  return Math.max(
    piecesFor([half], elemBytes),
    Math.min(2 * depth, Math.ceil((half.count * elemBytes) / MIN_TREE_PIECE_BYTES)),
  );
}

export async function treeAllReduce(g: Group, m: Mem, buf: Span): Promise<void> {
  if (g.size === 1) return;
  const halves = [subSpan(buf, 2, 0, m.elemBytes), subSpan(buf, 2, 1, m.elemBytes)];
  const pieces = halves.map((h) => treePieces(g.size, h, m.elemBytes));
  await Promise.all([
    overTree(g, m, halves[0], 0, 0, pieces[0]),
    overTree(g, m, halves[1], 1, 2 * pieces[0], pieces[1]),
  ]);
}
