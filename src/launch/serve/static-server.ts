// `webccl serve DIR`: a page's Web Workers can share memory (SharedArrayBuffer, one WebAssembly
// memory per node) only when the page is cross-origin isolated, which takes two response
// headers a plain static server does not send. This one sends them on every response, and
// serves the browser build of this package at /webccl.js so a page needs no bundler.
// Read-only: GET and HEAD, files under DIR only (no `..`, no symlink leading out of it).
import { createReadStream, realpathSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { dirname, extname, join, sep } from 'node:path';
import { JOB_INFO_PATH, type ServedJobInfo } from '../../bootstrap/nodejs/served-store.js';
import { WebcclError } from '../../core/errors.js';

/** The headers that make a page cross-origin isolated (and let it load this server's files). */
export const ISOLATION_HEADERS = {
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-embedder-policy': 'require-corp',
  'cross-origin-resource-policy': 'same-origin',
} as const;

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.wasm': 'application/wasm',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.txt': 'text/plain; charset=utf-8',
  '.ico': 'image/x-icon',
};

export interface StaticServerOptions {
  /** Directory whose files are served. */
  dir: string;
  /** Default 127.0.0.1; 0.0.0.0 or :: to serve other machines. */
  host?: string;
  /** Default 0: a free port. */
  port?: number;
  /** The browser build served at /webccl.js (and its source map at /webccl.js.map). */
  browserBuild: string;
  /** The job hosted beside the files, answered at /webccl-job (served-store.ts); absent: 404. */
  job?: ServedJobInfo;
}

export interface StaticServer {
  /** http://host:port */
  url: string;
  port: number;
  /** The HTTP server itself (webccl serve adds the store's WebSocket upgrades to it). */
  http: Server;
  close(): Promise<void>;
}

/** Starts serving; resolves once listening. A port in use is ADDRESS_IN_USE, a missing DIR INVALID_ARGUMENT. */
export async function startStaticServer(o: StaticServerOptions): Promise<StaticServer> {
  let root: string;
  try {
    root = realpathSync(o.dir);
    if (!statSync(root).isDirectory()) throw new Error('not a directory');
  } catch (e) {
    throw new WebcclError('INVALID_ARGUMENT', `serve: ${o.dir} is not a directory (${(e as Error).message})`, {
      dir: o.dir,
    });
  }
  const host = o.host ?? '127.0.0.1';
  const server = createServer((req, res) => respond(req, res, root, o.browserBuild, o.job));
  await new Promise<void>((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) =>
      reject(
        e.code === 'EADDRINUSE'
          ? new WebcclError('ADDRESS_IN_USE', `serve: ${host}:${o.port ?? 0} is in use`, { host, port: o.port })
          : new WebcclError(
              'INVALID_ARGUMENT',
              `serve: cannot listen on ${host}:${o.port ?? 0}: ${e.code ?? e.message}`,
              { host, port: o.port },
            ),
      ),
    );
    server.listen({ host, port: o.port ?? 0 }, () => resolve());
  });
  const { port } = server.address() as { port: number };
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    http: server,
    close: () => closeServer(server),
  };
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections(); // keep-alive connections of a page would hold close() open
  });
}

/**
 * Served from beside the browser build: the progress threads' worker scripts, which index.js loads from its own
 * directory.
 */
const BESIDE_BUILD = ['/progress-worker.js', '/net-progress-worker.js'];

function respond(
  req: IncomingMessage,
  res: ServerResponse,
  root: string,
  browserBuild: string,
  job: ServedJobInfo | undefined,
): void {
  const fail = (status: number, why: string): void =>
    void res
      .writeHead(status, { ...ISOLATION_HEADERS, 'content-type': 'text/plain; charset=utf-8' })
      .end(`${status} ${why}\n`);
  if (req.method !== 'GET' && req.method !== 'HEAD')
    return void res.writeHead(405, { ...ISOLATION_HEADERS, allow: 'GET, HEAD' }).end();
  let path: string;
  try {
    path = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
  } catch {
    return fail(400, 'bad path');
  }
  if (path.includes('\0') || path.split('/').includes('..')) return fail(403, 'outside the served directory');
  if (path === JOB_INFO_PATH && job) {
    return void res
      .writeHead(200, { ...ISOLATION_HEADERS, 'content-type': 'application/json', 'cache-control': 'no-store' })
      .end(req.method === 'HEAD' ? undefined : JSON.stringify(job));
  }
  let file: string;
  if (path === '/webccl.js' || path === '/webccl.js.map')
    file = path.endsWith('.map') ? `${browserBuild}.map` : browserBuild;
  // The scripts /webccl.js starts as its progress threads, found beside it (import.meta.url).
  else if (BESIDE_BUILD.includes(path)) file = join(dirname(browserBuild), path);
  else {
    file = join(root, path);
    try {
      file = realpathSync(file);
      if (statSync(file).isDirectory()) {
        // The page's relative imports resolve against its address: a folder's must end in '/'.
        if (!path.endsWith('/'))
          return void res.writeHead(301, { ...ISOLATION_HEADERS, location: `${encodeURI(path)}/` }).end();
        file = realpathSync(join(file, 'index.html'));
      }
    } catch {
      return fail(404, 'not found');
    }
    // A symlink may point anywhere: only what resolves inside DIR is served.
    if (file !== root && !file.startsWith(root + sep)) return fail(403, 'outside the served directory');
  }
  let size: number;
  try {
    const s = statSync(file);
    if (!s.isFile()) return fail(404, 'not found');
    size = s.size;
  } catch {
    return fail(404, 'not found');
  }
  res.writeHead(200, {
    ...ISOLATION_HEADERS,
    'content-type': TYPES[extname(file).toLowerCase()] ?? 'application/octet-stream',
    'content-length': size,
    'cache-control': 'no-cache',
  });
  if (req.method === 'HEAD') return void res.end();
  createReadStream(file)
    .on('error', () => res.destroy())
    .pipe(res);
}
