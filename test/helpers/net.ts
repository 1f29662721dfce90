// Network facts the loopback tests need.
import net from 'node:net';

/** Whether this machine can listen on `host` (e.g. '::1' where IPv6 loopback exists). */
export async function canListen(host: string): Promise<boolean> {
  const s = net.createServer();
  return new Promise((resolve) => {
    s.once('error', () => resolve(false));
    s.listen(0, host, () => s.close(() => resolve(true)));
  });
}
