// Finding that MASTER_ADDR:MASTER_PORT is `webccl serve`'s HTTP port rather than a rendezvous
// store, so that a Node rank joins a job with browser ranks from the variables every launcher
// sets (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, WEBCCL_TOKEN) instead of also needing the
// store's own port, WEBCCL_STORE_SERVED and WEBCCL_TRANSPORT. webccl serve answers
// GET /webccl-job with its job's id and store port (nothing secret: it prints both; every
// connection still proves the token).
//
// A store speaks first (its HELLO); an HTTP server waits for a request. So a rank's store
// connection that stays silent for SILENCE_MS makes the rank ask, on a second connection
// (store-client.ts), while the first goes on waiting: a store that was merely slow to start (a
// port a launcher listens on before rank 0 serves it) greets the first as before and lets the
// question go quietly (store-server.ts). Rank 0 asks when MASTER_PORT is taken (rendezvous.ts).
// Under TLS nobody asks: a TLS store also waits for its client, and serve speaks no TLS.
import * as net from 'node:net';

export const JOB_INFO_PATH = '/webccl-job';

/** What webccl serve says of the job it hosts. */
export interface ServedJobInfo {
  jobId: string;
  /** The store's TCP port, on the same host. */
  storePort: number;
}

/**
 * How long a rank's store connection may stay silent before the rank also asks, on a second
 * connection, whether the port is webccl serve's (a store greets within milliseconds).
 */
export const SILENCE_MS = 500;
/** How long the asking waits for the answer, and the most it reads. */
const ANSWER_MS = 3000;
const ANSWER_MAX_BYTES = 4096;

/**
 * Thrown by a store connection attempt that met `webccl serve`'s HTTP port: the job it hosts
 * (rendezvous.ts joins that store instead).
 */
export class ServedElsewhere extends Error {
  constructor(readonly info: ServedJobInfo) {
    super(`webccl serve hosts job ${JSON.stringify(info.jobId)}, its store on port ${info.storePort}`);
  }
}

/**
 * Asks host:port, on a connection of its own, whether it is webccl serve's: its job, or
 * undefined (nothing listens; a store, which greets and then lets the request go quietly; any
 * other program, whose answer is not trusted).
 */
export function askServedJob(host: string, port: number): Promise<ServedJobInfo | undefined> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    let answer = Buffer.alloc(0);
    const done = (info: ServedJobInfo | undefined) => {
      clearTimeout(deadline);
      socket.destroy();
      resolve(info);
    };
    const deadline = setTimeout(() => done(undefined), ANSWER_MS);
    socket.on('error', () => done(undefined));
    socket.on('data', (chunk: Buffer) => {
      answer = Buffer.concat([answer, chunk]);
      if (answer.length > ANSWER_MAX_BYTES) done(undefined);
    });
    socket.on('end', () => done(parseAnswer(answer.toString('utf8'))));
    socket.once('connect', () =>
      socket.write(`GET ${JOB_INFO_PATH} HTTP/1.0\r\nHost: ${host.includes(':') ? `[${host}]` : host}:${port}\r\n\r\n`),
    );
  });
}

/** The job info in an HTTP/1.x answer, if it is one (status 200, a JSON body with both fields). */
export function parseAnswer(text: string): ServedJobInfo | undefined {
  const m = /^HTTP\/1\.[01] 200 [^\r\n]*\r\n[\s\S]*?\r\n\r\n([\s\S]*)$/.exec(text);
  if (!m) return undefined;
  try {
    const body = JSON.parse(m[1]) as Partial<ServedJobInfo>;
    const ok =
      typeof body.jobId === 'string' &&
      body.jobId !== '' &&
      Number.isInteger(body.storePort) &&
      body.storePort! >= 1 &&
      body.storePort! <= 65535;
    return ok ? { jobId: body.jobId!, storePort: body.storePort! } : undefined;
  } catch {
    return undefined;
  }
}
