// Rank 1 of test/browser/heap-lock.html: joins the node, then takes the node heap's lock word
// as a rank in the middle of an alloc() would (lock word = holder's rank + 1), holds it for a
// second and lets it go. The word's place comes from the node memory's layout (src/core/shm-map.ts:
// the node header at 64 KiB, the heap lock at byte 20 of it).
import { initCommGroup } from '/dist/browser/index.js';

const HEAP_LOCK = (64 * 1024 + 20) >> 2;

onmessage = async ({ data: { node, rank } }) => {
  await initCommGroup({ node, rank });
  const i32 = new Int32Array(node.memory.buffer);
  while (Atomics.compareExchange(i32, HEAP_LOCK, 0, rank + 1) !== 0)
    Atomics.wait(i32, HEAP_LOCK, Atomics.load(i32, HEAP_LOCK), 5);
  postMessage('holding');
  Atomics.wait(i32, HEAP_LOCK, rank + 1, 1000); // hold it for a second (blocking is fine in a worker)
  Atomics.store(i32, HEAP_LOCK, 0);
  Atomics.notify(i32, HEAP_LOCK);
  postMessage('released');
};
