// The tag space of a communicator's point-to-point messages: its collectives' space with the
// high bit set, so that their seq and step numbers never meet the collectives' (or another
// communicator's). Kept here only: the network path and the transport's watcher both ask.
const P2P_BIT = 0x80000000;

/** The space of point-to-point messages of a communicator whose collectives use `space`. */
export const p2pSpace = (space = 0): number => (space | P2P_BIT) >>> 0;

/** Whether a tag's space is a point-to-point one (its messages are not a collective's). */
export const isP2pSpace = (space = 0): boolean => (space & P2P_BIT) !== 0;
