// The entry of a node's progress thread (a worker_threads Worker; see node-start.ts).
import { workerData } from 'node:worker_threads';
import { hostProgress } from './host.js';

const { memory, cores } = workerData as { memory: WebAssembly.Memory; cores: number };
hostProgress(memory, { cores });
