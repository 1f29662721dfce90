// The Node.js entry: everything the browser build has, plus launching ranks.

import { installTraceSink } from './core/nodejs/trace-files.js';
import { JOIN_WORLD, PAGE_WEBSOCKET } from './core/wiring.js';
import { joinWorld } from './launch/join-world.js';
import { startNodeProgress } from './launch/progress-thread.js';
import { registerProgressStarter } from './progress/start.js';

export * from './index.js';

// Jobs across processes and machines need sockets: only this entry can join them.
(globalThis as Record<symbol, unknown>)[JOIN_WORLD] = joinWorld;
// A rank that joins by dialling (initCommGroup or createNode with master) needs a WebSocket,
// which Node 20 lacks: the ws package's, loaded only then.
(globalThis as Record<symbol, unknown>)[PAGE_WEBSOCKET] = async () => (await import('ws')).WebSocket;
// A node's progress thread is a worker_threads Worker.
registerProgressStarter(startNodeProgress);
// WEBCCL_TRACE: each thread writes its events to a part file at its end (core/nodejs/trace-files.ts).
installTraceSink();

// Shadows the browser build's connectStore (export * above): Node 20 brings no WebSocket of its own.
export { connectStore } from './bootstrap/nodejs/connect-store.js';
export {
  launchProcesses,
  type ProcessLaunchHandle,
  type ProcessLaunchOptions,
  startProcesses,
} from './launch/processes.js';
export {
  type LaunchHandle,
  type LaunchOptions,
  type LaunchResult,
  launch,
  type RankFailure,
  startRanks,
} from './launch/threads.js';
