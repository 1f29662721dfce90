// The entry of a node's progress thread (a worker_threads Worker; see progress-thread.ts).
import { workerData } from 'node:worker_threads';
import { setLogThread } from '../core/log.js';
import { installTraceSink } from '../core/nodejs/trace-files.js';
import { hostProgress } from '../hosts/shm-host.js';

setLogThread('progress thread'); // it runs ops for every rank of its node: its lines (the tuner's) say so
installTraceSink(); // WEBCCL_TRACE: this thread's track ('progress thread') goes to a part file of its own

const { memory, cores } = workerData as { memory: WebAssembly.Memory; cores: number };
hostProgress(memory, { cores });
