// The browser entry: everything of src/index.ts, with a node's progress thread started as a
// module Web Worker (the Node entry, src/node.ts, starts it as a worker_threads Worker).

import { startPageProgress } from './progress/page-thread.js';
import { registerProgressStarter } from './progress/start.js';

export * from './index.js';

registerProgressStarter(startPageProgress, { loadsLater: true });
