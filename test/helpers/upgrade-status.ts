// The HTTP status a WebSocket upgrade request gets (101 when it is accepted), for the tests of
// the paths webccl serve answers.
import { WebSocket } from 'ws';

export function upgradeStatus(url: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = new WebSocket(url);
    s.on('open', () => {
      s.close();
      resolve(101);
    });
    s.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      s.terminate();
    });
    s.on('error', (e) => {
      if (!/Unexpected server response/.test(e.message)) reject(e);
    });
  });
}
