// `webccl serve [DIR]`: serves DIR (default: the current directory) over HTTP, cross-origin
// isolated, with this package's browser build at /webccl.js, until Ctrl-C (see static-server.ts).
import { CliUsageError, parseFlags } from '../flags.js';
import { browserBuildPath } from '../paths.js';
import { startStaticServer } from './static-server.js';

export const SERVE_USAGE = `usage: webccl serve [DIR] [options]

Serves DIR (default .) over HTTP with the headers that make a page cross-origin isolated
(Cross-Origin-Opener-Policy: same-origin, Cross-Origin-Embedder-Policy: require-corp), so that
its Web Workers can share memory as ranks of one node; the browser build of webccl is at
/webccl.js. GET and HEAD only; nothing outside DIR. Runs until Ctrl-C.

  -p, --port P   port, 0..65535 (default 8080; 0: a free one)
  --host H       interface to listen on (default 127.0.0.1; browsers allow shared memory only
                 in a secure context: localhost, or HTTPS in front of this server)
  -h, --help     show this text

  webccl serve node_modules/webccl --port 8080   then open http://127.0.0.1:8080/examples/browser/`;

class ServeUsageError extends CliUsageError {
  override readonly name = 'ServeUsageError';
}

export async function serveMain(argv: string[], until: Promise<unknown> = signalled()): Promise<number> {
  let dir: string;
  let port: number;
  let host: string;
  try {
    const { given, help, positionals } = parseFlags(argv, { port: { names: ['p', 'port'] }, host: { names: ['host'] } }, { error: ServeUsageError, once: true });
    if (help) {
      process.stdout.write(SERVE_USAGE + '\n');
      return 0;
    }
    if (positionals.length > 1) throw new ServeUsageError(`one directory only, got ${positionals.join(', ')}`);
    dir = positionals[0] ?? '.';
    const p = given.get('port');
    port = p === undefined ? 8080 : Number(p.value);
    if (p && (!/^\d+$/.test(p.value) || port > 65535)) throw new ServeUsageError(`${p.flag} needs a port in 0..65535, got ${JSON.stringify(p.value)}`);
    host = given.get('host')?.value ?? '127.0.0.1';
    if (!host || /\s/.test(host)) throw new ServeUsageError(`--host needs a host name or address, got ${JSON.stringify(host)}`);
  } catch (e) {
    if (!(e instanceof ServeUsageError)) throw e;
    process.stderr.write(`webccl serve: ${e.message}\n${SERVE_USAGE}\n`);
    return 2;
  }
  const server = await startStaticServer({ dir, host, port, browserBuild: browserBuildPath() });
  process.stdout.write(`webccl serve: ${dir} at ${server.url}/ (cross-origin isolated; webccl at ${server.url}/webccl.js)\n`);
  await until;
  await server.close();
  return 0;
}

/** Resolves on the first SIGINT or SIGTERM. */
function signalled(): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      process.off('SIGINT', done);
      process.off('SIGTERM', done);
      resolve();
    };
    process.on('SIGINT', done);
    process.on('SIGTERM', done);
  });
}
