// Symbols on globalThis by which the package's entries and launchers hand each other what a
// module cannot import without pulling in its platform: a launcher leaves a rank's identity
// (RANK_INIT), the Node entry leaves how to join a job across nodes (JOIN_WORLD) and Node's
// WebSocket class (PAGE_WEBSOCKET). Not part of the public API.
/** Where a launcher leaves a rank's identity before the rank's script starts. */
export const RANK_INIT = Symbol.for('webccl.rankInit');
/** Joins a job across nodes; the Node entry leaves it here (a page has no sockets). */
export const JOIN_WORLD = Symbol.for('webccl.joinWorld');
/** The WebSocket class a rank that dials only uses where the runtime has none (Node 20: the Node entry loads `ws`). */
export const PAGE_WEBSOCKET = Symbol.for('webccl.pageWebSocket');
