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

/** A port free right now on `host` (the OS picks it). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  const s = net.createServer();
  return new Promise((resolve, reject) => {
    s.once('error', reject);
    s.listen(0, host, () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}
