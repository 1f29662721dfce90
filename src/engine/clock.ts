// The clock of every op's timing: performance.now() ms, through the object read once. Node's
// global `performance` is a getter (~10 ns a read), and a small op reads the clock several times.

const perf = globalThis.performance;

/** performance.now(): this thread's monotonic clock, in ms. */
export const nowMs = (): number => perf.now();
