// Environment configuration: the WEBCCL_* variables, read once, with unknown names reported
// rather than ignored (a typo in a tuning variable should never pass silently).
import { WebcclError } from './errors.js';

/**
 * Every WEBCCL_* environment variable webccl reads, with what it means (docs/configuration.md).
 * World rank 0 reports any other WEBCCL_* name it finds as unknown, once, when it joins.
 */
export const ENV_VARS: Record<string, string> = {
  WEBCCL_ALGO:
    'force an allReduce algorithm: direct | twoshot on one node; ring | doubling | hierarchical | tree across nodes; or per collective, e.g. allreduce:ring,allgather:ring (default: chosen by the cost model for the size and topology)',
  WEBCCL_MODEL:
    'path of a cost model (JSON, as webccl tune writes) the tuner uses (default: ~/.webccl/model.json when webccl tune wrote one, else the built-in model)',
  WEBCCL_BUFFSIZE: 'bytes of one staging slot per rank, the chunk size of pipelined copies (default 262144)',
  WEBCCL_TIMEOUT_MS: 'deadline of every wait in milliseconds (default 300000)',
  WEBCCL_SPIN_US: 'microseconds a rank spins on a flag before it blocks (default 20, or 0 when ranks outnumber cores)',
  WEBCCL_WASM: 'simd | scalar: force a build of the WebAssembly core (default: simd where supported)',
  WEBCCL_DEBUG: 'WARN | INFO | TRACE: log level on stderr (default WARN)',
  WEBCCL_KEEP_INPUT_MAX_BYTES:
    'largest input, in bytes, that an allGather, allToAll, gather or scatter on one node stages through the slots instead of letting peers read it in place (default: one slot, WEBCCL_BUFFSIZE, when the ranks outnumber the cores, else 0)',
  WEBCCL_DIRECT_MAX_BYTES:
    "largest allReduce, in bytes, that the tuner runs with the direct algorithm (default: the cost model's crossover)",
  WEBCCL_TOKEN:
    'secret every rank of a job proves at rendezvous, the same on every node (default: a fresh one per webccl run --procs job; else a per-user file when the master is loopback)',
  WEBCCL_TRANSPORT:
    "tcp | ws: what carries the connections between nodes: TCP, or WebSocket (ws://, on each rank's own port, path /webccl-link); every rank of a job must agree (default tcp, or ws when MASTER_PORT is webccl serve's own port)",
  WEBCCL_PIECE_BYTES:
    'piece size, in bytes, of the ring allReduce across nodes, 4096..16777216; every rank must set the same (default: chosen per message by the cost model, 64 KiB..4 MiB)',
  WEBCCL_NCHANNELS:
    'TCP connections per pair of ranks across nodes, 1..64 (default 2); an allReduce ring uses as many as the cost model picks',
  WEBCCL_SOCKET_IFNAME:
    'network interface whose address peers dial, e.g. eth0 (default: loopback for a job on one machine, else the interface that reaches MASTER_ADDR)',
  WEBCCL_CONNECT_TIMEOUT_MS:
    'deadline for every rank to reach the rendezvous and connect, in milliseconds (default 120000)',
  WEBCCL_TLS:
    '1: run the rendezvous store and the connections between nodes over TLS 1.3, keyed by the job token unless certificates are given (default 0)',
  WEBCCL_TLS_CERT:
    'with WEBCCL_TLS=1: PEM certificate of this rank (mutual TLS; with WEBCCL_TLS_KEY and WEBCCL_TLS_CA)',
  WEBCCL_TLS_KEY: 'with WEBCCL_TLS=1: PEM private key of WEBCCL_TLS_CERT',
  WEBCCL_TLS_CA: "with WEBCCL_TLS=1: PEM CA certificate(s) that every rank's certificate must chain to",
  WEBCCL_FLIGHT_RECORDER:
    'ops each communicator remembers for comm.flightRecord() and prints at WARN on a TIMEOUT or ABORTED, 0..65536; 0 turns it off (default 64)',
  WEBCCL_CHECK:
    '1: debug mode that fails an op (BUFFER_BUSY) whose buffers the program writes while it is in flight, found by hashing them at issue, start, between slices and at completion (default 0)',
  WEBCCL_PROGRESS:
    "thread | caller | auto: who moves ops along: the node's progress thread (ops go on while the rank computes), the calling rank while it waits or polls, or chosen per op (default auto)",
  WEBCCL_TRACE:
    'path of a Chrome-trace / Perfetto JSON timeline to write (one track per rank and per progress thread); unset: no trace',
  WEBCCL_STORE_SERVED:
    "1: the job's rendezvous store is already served at MASTER_ADDR:MASTER_PORT (by webccl serve, for a job with browser ranks): world rank 0 joins it as a client instead of serving it; each run of the job finds it empty (default 0; not needed when MASTER_PORT is webccl serve's own port, where ranks find its store)",
  WEBCCL_JOB_ID:
    "name every rank of a job must share at rendezvous (default: the outer launcher's job id, else MASTER_ADDR:MASTER_PORT)",
};

/**
 * The variable in which `webccl run --procs` names the descriptor of a rank's pipe to its launcher
 * (bootstrap/nodejs/launcher-pipe.ts): set by the launcher, not by users, so not in ENV_VARS (the
 * rank removes it from its environment when it takes the pipe).
 */
export const LAUNCHER_FD_VAR = 'WEBCCL_LAUNCHER_FD';

/** Paths of PEM files for TLS between nodes (WEBCCL_TLS_CERT, WEBCCL_TLS_KEY, WEBCCL_TLS_CA): this
 *  rank's certificate and key, and the CA that signs every rank's certificate. */
export interface TlsFiles {
  cert: string;
  key: string;
  ca: string;
}

function env(): Record<string, string | undefined> {
  const p = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process;
  return p?.env ?? {};
}

let warned = false;
/** WEBCCL_* names that webccl does not know (a warning is printed once). */
export function unknownEnvNames(): string[] {
  const bad = Object.keys(env()).filter((k) => k.startsWith('WEBCCL_') && !(k in ENV_VARS));
  if (bad.length && !warned) {
    warned = true;
    console.warn(
      `webccl: unknown environment variable(s) ${bad.join(', ')} (known: ${Object.keys(ENV_VARS).join(', ')})`,
    );
  }
  return bad;
}

export function envString(name: keyof typeof ENV_VARS & string): string | undefined {
  const v = env()[name];
  return v === undefined || v === '' ? undefined : v;
}

export function envNumber(name: keyof typeof ENV_VARS & string): number | undefined {
  const v = envString(name);
  if (v === undefined) return undefined;
  const x = Number(v);
  if (!Number.isFinite(x) || x < 0)
    throw new WebcclError('INVALID_ARGUMENT', `${name}=${JSON.stringify(v)} is not a non-negative number`);
  return x;
}
