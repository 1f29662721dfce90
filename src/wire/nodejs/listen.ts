// Starting a listener with the errors every webccl listener gives: a port in use is
// ADDRESS_IN_USE, any other failure INVALID_ARGUMENT, both naming who listens and where; an error
// after it listens is logged, not thrown (Node only).
import type * as net from 'node:net';
import { WebcclError } from '../../core/errors.js';
import { log } from '../../core/log.js';
import { hostPort } from '../secrets.js';

/**
 * Listens on host:port (0: a free port) and resolves to the bound address; `who` names the listener in errors ("rank
 * 3").
 */
export async function listenCoded(
  server: net.Server,
  host: string,
  port: number,
  who: string,
): Promise<{ host: string; port: number }> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) => {
      const where = hostPort(host, port);
      if (e.code === 'EADDRINUSE')
        reject(
          new WebcclError('ADDRESS_IN_USE', `${who} cannot listen on ${where}: address already in use`, { host, port }),
        );
      else
        reject(
          new WebcclError('INVALID_ARGUMENT', `${who} cannot listen on ${where}: ${e.code ?? e.message}`, {
            host,
            port,
          }),
        );
    });
    server.listen({ host, port, exclusive: true }, () => resolve());
  });
  const a = server.address() as net.AddressInfo;
  server.on('error', (e) => log('WARN', `${who} listener: ${e.message}`));
  return { host: a.address, port: a.port };
}
