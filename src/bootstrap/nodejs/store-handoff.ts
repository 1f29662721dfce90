// The rendezvous port a launcher picks is bound by the launcher and handed, still listening, to
// the process of world rank 0 (torchrun's agent hands its store's socket over the same way).
// Picking a free port, closing it and letting rank 0 bind it later leaves a window in which any
// other program — another job's store, typically — can take the port; rank 0 then fails with
// ADDRESS_IN_USE and the other ranks talk to the wrong store. A socket that never stops
// listening leaves no such window.

import net from 'node:net';
import { WebcclError } from '../../core/errors.js';

/** The variable that names the listening socket's descriptor in rank 0's environment. */
export const STORE_FD_VAR = 'WEBCCL_STORE_FD';
/** The descriptor a launcher gives the socket in its child (after stdio and the launcher's pipe or IPC channel). */
export const STORE_FD = 4;

export interface ReservedPort {
  port: number;
  /**
   * The listening socket's descriptor in this process, for a child's stdio; undefined where the platform gives none.
   */
  fd?: number;
  /** Closes this process's copy; a child given `fd` keeps listening on its own. */
  release(): void;
}

/**
 * Binds a listening socket on a port the OS picks. Hand `fd` to the child that will serve the
 * store (as stdio[STORE_FD], with STORE_FD_VAR set) and release it in the same tick as that
 * spawn: this process never accepts on it.
 */
export function reserveStorePort(host: string): Promise<ReservedPort> {
  return new Promise((resolve, reject) => {
    const server = net.createServer((s) => s.destroy());
    server.once('error', reject);
    server.listen({ host, port: 0, exclusive: true }, () => {
      const { port } = server.address() as net.AddressInfo;
      // Node exposes no public accessor for a server's descriptor; the handle's is stable on POSIX
      // (on Windows it is -1 and the child binds the port itself, as before).
      const raw = (server as unknown as { _handle?: { fd?: number } })._handle?.fd;
      resolve({ port, fd: typeof raw === 'number' && raw >= 0 ? raw : undefined, release: () => server.close() });
    });
  });
}

/** stdio and environment entries that hand `reserved` to a child, or none when there is no descriptor. */
export function storeHandoff(
  reserved: ReservedPort | undefined,
  stdioBefore: number,
): { stdio: number[]; env: Record<string, string> } {
  if (reserved?.fd === undefined) return { stdio: [], env: {} };
  if (stdioBefore !== STORE_FD)
    throw new Error(`store handoff: the child's stdio has ${stdioBefore} entries before it, expected ${STORE_FD}`);
  return { stdio: [reserved.fd], env: { [STORE_FD_VAR]: String(STORE_FD) } };
}

/**
 * The listening descriptor the launcher handed this process, if any; the variable is removed so
 * that processes this rank starts, which lack the descriptor, do not take it.
 */
export function takeStoreFd(env: Record<string, string | undefined>): number | undefined {
  const named = env[STORE_FD_VAR];
  delete env[STORE_FD_VAR];
  return named !== undefined && /^\d+$/.test(named) ? Number(named) : undefined;
}

/**
 * WEBCCL_STORE_SERVED: 1 when the job's store is already served (webccl serve, for a job with
 * browser ranks), so that world rank 0 joins it as a client instead of serving it.
 */
export function storeServedFromEnv(env: Record<string, string | undefined>): boolean {
  const v = env.WEBCCL_STORE_SERVED;
  if (v !== undefined && v !== '' && v !== '0' && v !== '1')
    throw new WebcclError('INVALID_ARGUMENT', `WEBCCL_STORE_SERVED=${JSON.stringify(v)}: expected 0 or 1`);
  return v === '1';
}
