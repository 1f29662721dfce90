// `webccl serve [DIR]`: serves DIR (default: the current directory) over HTTP, cross-origin
// isolated, with this package's browser build at /webccl.js, and with a job token the job's
// rendezvous store, until Ctrl-C (see static-server.ts and serve-job.ts).
import { randomBytes } from 'node:crypto';
import { envString } from '../../core/config.js';
import { textBytes } from '../../wire/bytes.js';
import { MAX_JOB_ID_BYTES } from '../../wire/limits.js';
import { CliUsageError, parseFlags } from '../flags.js';
import { browserBuildPath, packageRoot } from '../paths.js';
import { type ServeOptions, startServe } from './serve-job.js';

export const SERVE_USAGE = `usage: webccl serve [DIR] [options]

Serves DIR (default .) over HTTP with the headers that make a page cross-origin isolated
(Cross-Origin-Opener-Policy: same-origin, Cross-Origin-Embedder-Policy: require-corp), so that
its Web Workers can share memory as ranks of one node; the browser build of webccl is at
/webccl.js. GET and HEAD only; nothing outside DIR. Runs until Ctrl-C.

  -p, --port P        port, 0..65535 (default 8080; 0: a free one)
  --host H            interface to listen on (default 127.0.0.1; browsers allow shared memory,
                      and WebCrypto for the token proof, only in a secure context: localhost,
                      or HTTPS in front of this server)
  --token T           also host the job's rendezvous store, whose clients prove T (default
                      WEBCCL_TOKEN; without either, pages only and every WebSocket upgrade gets
                      a 404): pages connect at ws://HOST:P/store, Node ranks over TCP at
                      MASTER_ADDR=HOST MASTER_PORT=<store port>; and a relay between pages'
                      ranks at ws://HOST:P/webccl-relay?job=J&from=A&to=B&channel=C (pairs A->B
                      with B->A, forwards bytes it never reads). The store empties when its last
                      client leaves, so each run of the job starts afresh
  --job-id J          the job's id (default WEBCCL_JOB_ID, else HOST:S with S the store port,
                      which Node ranks and pages also take by default; with S = 0 a random one)
  --store-port S      the store's TCP port (default P + 1; 0: a free one)
  --demo              serve this package's live benchmark instead of DIR: allReduce across the
                      page's Web Workers, busbw against size drawn as the rows arrive (its
                      address is printed); with a token, ?size=N&first=R&token=T makes the
                      page's workers ranks of a job with other pages and Node ranks
  -h, --help          show this text

  webccl serve node_modules/webccl --port 8080   then open http://127.0.0.1:8080/examples/browser/
  A job of Node processes and pages: webccl serve node_modules/webccl -p 8080 --token T, Node
  ranks with MASTER_ADDR=127.0.0.1 MASTER_PORT=8081 WEBCCL_TOKEN=T WEBCCL_TRANSPORT=ws
  WEBCCL_STORE_SERVED=1, pages at /examples/browser/job.html?size=N&first=R&ranks=K&token=T`;

class ServeUsageError extends CliUsageError {
  override readonly name = 'ServeUsageError';
}

export async function serveMain(argv: string[], until: Promise<unknown> = signalled()): Promise<number> {
  let dir: string;
  let port: number;
  let host: string;
  let store: ServeOptions['store'];
  let demo: boolean;
  try {
    const { given, help, positionals } = parseFlags(
      argv,
      {
        port: { names: ['p', 'port'] },
        host: { names: ['host'] },
        token: { names: ['token'] },
        jobId: { names: ['job-id'] },
        storePort: { names: ['store-port'] },
        demo: { names: ['demo'], switch: true },
      },
      { error: ServeUsageError, once: true },
    );
    if (help) {
      process.stdout.write(`${SERVE_USAGE}\n`);
      return 0;
    }
    if (positionals.length > 1) throw new ServeUsageError(`one directory only, got ${positionals.join(', ')}`);
    demo = given.has('demo');
    if (demo && positionals.length)
      throw new ServeUsageError(`--demo serves this package's own pages: give no directory (got ${positionals[0]})`);
    dir = demo ? packageRoot() : (positionals[0] ?? '.');
    const p = given.get('port');
    port = p === undefined ? 8080 : Number(p.value);
    if (p && (!/^\d+$/.test(p.value) || port > 65535))
      throw new ServeUsageError(`${p.flag} needs a port in 0..65535, got ${JSON.stringify(p.value)}`);
    host = given.get('host')?.value ?? '127.0.0.1';
    if (!host || /\s/.test(host))
      throw new ServeUsageError(`--host needs a host name or address, got ${JSON.stringify(host)}`);
    store = storeFlags(given, port, host);
  } catch (e) {
    if (!(e instanceof ServeUsageError)) throw e;
    process.stderr.write(`webccl serve: ${e.message}\n${SERVE_USAGE}\n`);
    return 2;
  }
  const server = await startServe({ dir, host, port, browserBuild: browserBuildPath(), store });
  process.stdout.write(
    `webccl serve: ${dir} at ${server.http.url}/ (cross-origin isolated; webccl at ${server.http.url}/webccl.js)\n`,
  );
  if (demo)
    process.stdout.write(
      `webccl serve: the live benchmark at ${server.http.url}/examples/browser/perf.html (?ranks=N, ?max=BYTES)\n`,
    );
  if (server.store) {
    const { url, host: h, port: p } = server.store;
    process.stdout.write(
      `webccl serve: job ${JSON.stringify(store!.jobId)} store at ${url} (pages: connectStore) and tcp ${h}:${p} (Node ranks: MASTER_ADDR=${h} MASTER_PORT=${p} WEBCCL_JOB_ID=${store!.jobId})\n`,
    );
  }
  await until;
  await server.close();
  return 0;
}

/**
 * The store's settings from --token/--job-id/--store-port (or WEBCCL_TOKEN, WEBCCL_JOB_ID); undefined without a token.
 */
function storeFlags(
  given: Map<string, { flag: string; value: string }>,
  httpPort: number,
  host: string,
): ServeOptions['store'] {
  const token = given.get('token')?.value ?? envString('WEBCCL_TOKEN');
  if (token === undefined) {
    const stray = ['jobId', 'storePort'].map((k) => given.get(k)).find((g) => g !== undefined);
    if (stray)
      throw new ServeUsageError(
        `${stray.flag} needs a job token (--token T or WEBCCL_TOKEN): without one no store is served`,
      );
    return undefined;
  }
  if (token === '') throw new ServeUsageError('--token needs a non-empty value');
  const sp = given.get('storePort');
  const port = sp === undefined ? (httpPort === 0 ? 0 : httpPort + 1) : Number(sp.value);
  // The default every rank derives by itself: Node ranks from MASTER_ADDR:MASTER_PORT (the store
  // port), pages from their master ws://HOST:P (HOST:P+1). A free port (0) is known only later:
  // then a random id, which the ranks must be given.
  const jobId =
    given.get('jobId')?.value ??
    envString('WEBCCL_JOB_ID') ??
    (port === 0 ? `serve-${randomBytes(6).toString('hex')}` : `${host}:${port}`);
  const n = textBytes(jobId).length;
  if (n < 1 || n > MAX_JOB_ID_BYTES)
    throw new ServeUsageError(`--job-id needs 1..${MAX_JOB_ID_BYTES} UTF-8 bytes, got ${n}`);
  if (sp && (!/^\d+$/.test(sp.value) || port > 65535))
    throw new ServeUsageError(`${sp.flag} needs a port in 0..65535, got ${JSON.stringify(sp.value)}`);
  if (port > 65535)
    throw new ServeUsageError(`the store's default port ${port} (the HTTP port + 1) is over 65535: give --store-port`);
  return { token, jobId, port };
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
