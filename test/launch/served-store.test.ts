// Finding webccl serve's store from its HTTP port (src/bootstrap/nodejs/served-store.ts): serve
// answers /webccl-job; a store, which speaks first, and a port where nothing listens are not
// taken for it; an answer that is not serve's is not trusted.
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { askServedJob, parseAnswer } from '../../src/bootstrap/nodejs/served-store.js';
import { startStoreServer } from '../../src/bootstrap/nodejs/store-server.js';
import { startServe } from '../../src/launch/serve/serve-job.js';
import { freePort } from '../helpers/net.js';
import { root } from '../helpers/procs.js';

const closers: (() => unknown)[] = [];
afterAll(async () => {
  for (const c of closers) await c();
});

describe('askServedJob', () => {
  it("serve's HTTP port names its job and store port", async () => {
    const served = await startServe({
      dir: root,
      port: 0,
      browserBuild: join(root, 'dist', 'browser', 'index.js'),
      store: { token: 't0k3n', jobId: 'probe-job', port: 0, onReject: () => {} },
    });
    closers.push(() => served.close());
    expect(await askServedJob('127.0.0.1', served.http.port)).toEqual({
      jobId: 'probe-job',
      storePort: served.store!.port,
    });
    // Its store's own port speaks first: not serve's HTTP port.
    expect(await askServedJob('127.0.0.1', served.store!.port)).toBeUndefined();
  });

  it('serve without a token hosts no store: nothing found; nor at a rendezvous store, nor where nothing listens', async () => {
    const pagesOnly = await startServe({
      dir: root,
      port: 0,
      browserBuild: join(root, 'dist', 'browser', 'index.js'),
    });
    closers.push(() => pagesOnly.close());
    expect(await askServedJob('127.0.0.1', pagesOnly.http.port)).toBeUndefined();
    const store = await startStoreServer({ host: '127.0.0.1', port: 0, token: 't0k3n', jobId: 'j' });
    closers.push(() => store.close());
    expect(await askServedJob('127.0.0.1', store.port)).toBeUndefined();
    // the probe's connection is no refused peer
    expect(store.stats()).toMatchObject({ authFailures: 0, protocolErrors: 0 });
    expect(await askServedJob('127.0.0.1', await freePort())).toBeUndefined();
  });

  it("a store asked over HTTP (a rank's probe that met the store's port before the store greeted) lets it go quietly", async () => {
    const store = await startStoreServer({ host: '127.0.0.1', port: 0, token: 't0k3n', jobId: 'j' });
    closers.push(() => store.close());
    const { connect } = await import('node:net');
    const socket = connect({ host: '127.0.0.1', port: store.port });
    const ended = new Promise<void>((r) => socket.on('close', () => r()));
    socket.on('error', () => {});
    socket.resume(); // (its HELLO is read and dropped: the end comes after it)
    socket.write('GET /webccl-job HTTP/1.0\r\nHost: x\r\n\r\n');
    await ended;
    expect(store.stats()).toMatchObject({ authFailures: 0, protocolErrors: 0 });
  });

  it('a silent program that never answers, or answers something else, is not taken for serve', async () => {
    const held = new Set<import('node:net').Socket>();
    const silent = createServer((s) => held.add(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', () => r()));
    closers.push(
      () =>
        new Promise((r) => {
          for (const s of held) s.destroy();
          silent.close(r);
        }),
    );
    expect(await askServedJob('127.0.0.1', (silent.address() as { port: number }).port)).toBeUndefined();
    expect(
      parseAnswer('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n{"jobId":"j","storePort":8081}'),
    ).toEqual({ jobId: 'j', storePort: 8081 });
    expect(parseAnswer('HTTP/1.1 404 Not Found\r\n\r\n{"jobId":"j","storePort":8081}')).toBeUndefined();
    expect(parseAnswer('HTTP/1.1 200 OK\r\n\r\n{"jobId":"","storePort":8081}')).toBeUndefined();
    expect(parseAnswer('HTTP/1.1 200 OK\r\n\r\n{"jobId":"j","storePort":70000}')).toBeUndefined();
    expect(parseAnswer('HTTP/1.1 200 OK\r\n\r\n<html>')).toBeUndefined();
  });
});
