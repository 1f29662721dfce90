// The browser entry: everything of src/index.ts, with a node's progress thread started as a
// module Web Worker (the Node entry, src/node.ts, starts it as a worker_threads Worker).
import { registerProgressStarter } from './progress/start.js';
import { startPageProgress } from './progress/page-thread.js';

export * from './index.js';

registerProgressStarter(startPageProgress, { loadsLater: true });
