// What `webccl serve` runs: the static server (static-server.ts) and, given a job token, the
// job's rendezvous store, one table with two kinds of connections: WebSocket upgrades on
// /store of the HTTP port (pages), and plain TCP on the store port (Node ranks, which join with
// MASTER_ADDR/MASTER_PORT as from any store); and the relay (relay.ts) on /webccl-relay of the
// HTTP port, through which pages' ranks, which cannot listen, reach each other. One router owns
// the HTTP server's upgrades (upgrade-routes.ts). Without a token every upgrade gets a 404.
//
// The store outlives the job's runs here, so it empties its table when its last client leaves
// (resetWhenIdle): a rerun against the same serve reads none of the previous run's keys.
//
// Why two ports, where the issue asks for one: in the store protocol the server speaks first
// (HELLO, with its nonce), while an HTTP client speaks first. One listener could tell them apart
// only by waiting for a first byte and taking silence for a store client, and Chromium opens
// speculative connections that stay silent until a page needs them: such a socket would get the
// store's HELLO and then answer it with a GET. Making store clients speak first would change the
// TCP store's bytes for every other server. So the store's TCP face gets its own port.
import { type StoreServer, startStoreServer } from '../../bootstrap/nodejs/store-server.js';
import { storeUpgrades } from '../../bootstrap/nodejs/store-websocket.js';
import { RELAY_PATH } from '../../transport/ws/page-carrier.js';
import { routeUpgrades, type UpgradeHandler } from '../../wire/nodejs/upgrade-routes.js';
import { type Relay, type RelayOptions, startRelay } from './relay.js';
import { type StaticServer, type StaticServerOptions, startStaticServer } from './static-server.js';

export { STORE_PATH } from '../../bootstrap/page-rendezvous.js';

import { STORE_PATH } from '../../bootstrap/page-rendezvous.js';

export interface ServeOptions extends StaticServerOptions {
  /** Host the job's rendezvous store; absent: pages only. */
  store?: {
    token: string;
    jobId: string;
    /** The store's TCP port (0: a free one). */
    port: number;
    /** Called for each refused peer (both carriers); without it, the store logs them at WARN. */
    onReject?: (info: { remote: string; kind: 'auth' | 'protocol'; reason: string }) => void;
    /** The relay's limits (tests shorten them). */
    relay?: Omit<RelayOptions, 'jobId'>;
  };
}

export interface Served {
  http: StaticServer;
  store?: {
    server: StoreServer;
    /** ws://host:port/store, for pages (connectStore). */
    url: string;
    /** The TCP face, for Node ranks (MASTER_ADDR, MASTER_PORT). */
    host: string;
    port: number;
    /** The relay of pages' links, at ws://host:port/webccl-relay. */
    relay: Relay;
    /** ws://host:port/webccl-relay (with ?job=&from=&to=&channel=). */
    relayUrl: string;
  };
  close(): Promise<void>;
}

/** Starts the static server and, with `store`, the job's store on both carriers. */
export async function startServe(o: ServeOptions): Promise<Served> {
  const host = o.host ?? '127.0.0.1';
  let store: StoreServer | undefined;
  if (o.store) {
    store = await startStoreServer({
      host,
      port: o.store.port,
      token: o.store.token,
      jobId: o.store.jobId,
      onReject: o.store.onReject,
      resetWhenIdle: true,
      publishTokenRefusals: true,
    });
  }
  let http: StaticServer;
  try {
    // (its /webccl-job names the store, so that Node ranks given serve's own port find it)
    http = await startStaticServer({ ...o, ...(store && { job: { jobId: o.store!.jobId, storePort: store.port } }) });
  } catch (e) {
    await store?.close();
    throw e;
  }
  const storeWs = store && storeUpgrades(store);
  const relay = o.store && startRelay({ ...o.store.relay, jobId: o.store.jobId });
  const routes = new Map<string, UpgradeHandler>();
  if (storeWs) routes.set(STORE_PATH, storeWs.handle);
  if (relay) routes.set(RELAY_PATH, relay.handle);
  const upgrades = routeUpgrades(http.http, routes);
  const ws = http.url.replace(/^http/, 'ws');
  return {
    http,
    store: store &&
      relay && {
        server: store,
        url: `${ws}${STORE_PATH}`,
        host,
        port: store.port,
        relay,
        relayUrl: `${ws}${RELAY_PATH}`,
      },
    close: async () => {
      upgrades.close();
      storeWs?.close();
      relay?.close();
      await Promise.all([http.close(), store?.close()]);
    },
  };
}
