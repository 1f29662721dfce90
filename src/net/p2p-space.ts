// The tag space of a communicator's point-to-point messages: its collectives' space with the
// high bit set (the transport's P2P_SPACE_BIT), so that their seq and step numbers never meet
// the collectives' (or another communicator's). A communicator's transport view adds its own
// space to what it is given, so the engines pass p2pSpace() (for space 0) whatever group they serve.
import { P2P_SPACE_BIT } from '../transport/transport.js';

/** The space of point-to-point messages of a communicator whose collectives use `space`. */
export const p2pSpace = (space = 0): number => (space | P2P_SPACE_BIT) >>> 0;

/** Whether a tag's space is a point-to-point one (its messages are not a collective's). */
export const isP2pSpace = (space = 0): boolean => (space & P2P_SPACE_BIT) !== 0;
