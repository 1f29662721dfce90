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

/**
 * A port free right now on `host`, for a test that passes --master-port to launchers it starts.
 * Picked at random below the OS's ephemeral range (32768 and up on Linux): ports the OS hands out
 * for listen(0) and outgoing connections — every other test's stores, meshes and clients — never
 * land there, so another test cannot take it between this check and the launcher's bind.
 */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  for (let tries = 0; ; tries++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    const ok = await new Promise<boolean>((resolve, reject) => {
      const s = net.createServer();
      s.once('error', (e: NodeJS.ErrnoException) =>
        e.code === 'EADDRINUSE' && tries < 50 ? resolve(false) : reject(e),
      );
      s.listen({ port, host, exclusive: true }, () => s.close(() => resolve(true)));
    });
    if (ok) return port;
  }
}
