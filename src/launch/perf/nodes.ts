// `webccl perf --transport tcp` (and ws): the job as M node processes on this machine. Node k is
//
//   node cli.js run --nnodes M --node-rank k --nproc-per-node L --master-port P perf-rank.js SPEC
//
// with the job's WEBCCL_TOKEN and WEBCCL_JOB_ID in its environment and an IPC channel, over
// which its launcher forwards every rank's posts as { rank: world rank, msg }. Its L worker
// threads share memory; the nodes meet over TCP loopback. A node that fails, a rank that posts
// its failure, or terminate() ends the job: the other nodes get a grace period to end on their
// own (and print their own message), then SIGTERM, then SIGKILL. None is left behind.
import { spawn } from 'node:child_process';
import { randomJobId, randomToken } from '../../bootstrap/nodejs/job-secrets.js';
import { reserveStorePort, STORE_FD_VAR, storeHandoff } from '../../bootstrap/nodejs/store-handoff.js';
import { ChildGroup } from '../children.js';
import type { LaunchResult } from '../threads.js';

export interface NodesLaunchOptions {
  nodes: number;
  /** Ranks (worker threads) per node. */
  perNode: number;
  /** The webccl CLI (dist/node/cli.js) each node runs, and the script its ranks run. */
  cliScript: string;
  rankScript: string;
  args: string[];
  /** Every rank's post, by world rank. */
  onMessage(rank: number, msg: unknown): void;
  /** The nodes' stderr (default: this process's). */
  onStderr?(text: string): void;
  env?: Record<string, string | undefined>;
  /**
   * How long the other nodes get to end on their own after one failed, and again between SIGTERM and SIGKILL (default 3
   * s).
   */
  graceMs?: number;
}

export interface NodesLaunchHandle {
  done: Promise<LaunchResult>;
  /** Records a failure (e.g. a rank's post saying it failed) and ends the job. */
  fail(rank: number, message: string): void;
  /** Ends every node (e.g. on Ctrl-C); called again, SIGKILL at once. */
  terminate(reason?: string): void;
}

/** The IPC envelope a node's launcher sends for each post of one of its ranks. */
export interface Forwarded {
  rank: number;
  msg: unknown;
}

const isForwarded = (m: unknown): m is Forwarded =>
  typeof m === 'object' && m !== null && typeof (m as Forwarded).rank === 'number' && 'msg' in m;

export function startNodes(o: NodesLaunchOptions): NodesLaunchHandle {
  const group = new ChildGroup(o.graceMs ?? 3000);
  const base = o.env ?? process.env;

  const run = async (): Promise<LaunchResult> => {
    // Bound here and handed, listening, to node 0, whose rank 0 serves the store on it.
    const reserved = await reserveStorePort('127.0.0.1');
    const masterPort = reserved.port;
    if (group.terminated) {
      reserved.release();
      return group.result();
    }
    const env = {
      ...base,
      WEBCCL_TOKEN: base.WEBCCL_TOKEN || randomToken(),
      WEBCCL_JOB_ID: base.WEBCCL_JOB_ID || randomJobId(),
    };
    await Promise.all(
      Array.from({ length: o.nodes }, (_, k) => {
        const first = k * o.perNode;
        const ranks = o.perNode === 1 ? `rank ${first}` : `ranks ${first}..${first + o.perNode - 1}`;
        const handoff = storeHandoff(k === 0 ? reserved : undefined, 4);
        const child = spawn(
          process.execPath,
          [
            o.cliScript,
            'run',
            '--nnodes',
            String(o.nodes),
            '--node-rank',
            String(k),
            '--nproc-per-node',
            String(o.perNode),
            '--master-addr',
            '127.0.0.1',
            '--master-port',
            String(masterPort),
            o.rankScript,
            ...o.args,
          ],
          {
            env: { ...env, [STORE_FD_VAR]: undefined, ...handoff.env },
            stdio: ['ignore', 'inherit', o.onStderr ? 'pipe' : 'inherit', 'ipc', ...handoff.stdio],
          },
        );
        if (k === 0) reserved.release();
        if (o.onStderr) child.stderr!.setEncoding('utf8').on('data', o.onStderr);
        child.on('message', (m) => {
          if (isForwarded(m)) o.onMessage(m.rank, m.msg);
        });
        // 'close', not 'exit': it comes after the last IPC message of the node.
        return group.watch(
          child,
          'close',
          (failure) => failure && !group.terminated && group.fail(-1, `node ${k} (${ranks}) ${failure}`),
        );
      }),
    );
    return group.result();
  };

  return {
    done: run(),
    fail: (rank, message) => group.fail(rank, message),
    terminate: (reason = 'terminated') => group.terminate(reason),
  };
}
