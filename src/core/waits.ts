// How long one blocking wait of a rank may last before it looks around again: a deadline passed,
// the node or communicator aborted, a peer departed, a progress thread lost. Every wait in a loop
// sleeps at most this long at a time, so any of those is noticed within it.
export const WAIT_SLICE_MS = 50;
