// The entry of a page's progress thread (a module Web Worker; see page-thread.ts): runs the
// node's progress loop on the memory the page sends, then says it has ended.

import { setLogThread } from '../core/log.js';
import type { PageThreadEnded } from '../progress/page-thread.js';
import { hostProgress } from './shm-host.js';

setLogThread('progress thread');

onmessage = ({ data }: MessageEvent<{ memory: WebAssembly.Memory; cores: number }>) => {
  let ended: PageThreadEnded = { ended: '' };
  try {
    hostProgress(data.memory, { cores: data.cores });
  } catch (e) {
    ended = { ended: `it failed: ${e instanceof Error ? e.message : String(e)}` };
  }
  postMessage(ended);
};
