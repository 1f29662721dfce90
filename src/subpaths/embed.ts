// `webccl/embed`: for code that starts ranks itself instead of a launcher (a test harness, a
// page that makes its own workers): a node's memory, a thread's place in it, its progress
// thread, and communicators over it. Re-exports of the main entry: one module, one state.
export {
  abortNode,
  Communicator,
  type CommunicatorOptions,
  createNode,
  type JoinOptions,
  joinNode,
  leaveNode,
  type NodeHandle,
  type NodeOptions,
  type RankContext,
  stopProgressThread,
} from '../index.js';
