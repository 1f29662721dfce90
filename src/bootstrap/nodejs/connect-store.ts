// connectStore in Node: the browser-safe WebSocket client on the `ws` package's WebSocket, since
// Node 20 has no global one (the bytes and the API are the same as in a page). `ws` is loaded
// on the first call, so that importing webccl does not load it.
import type { ConnectStoreOptions, WebSocketClass, WebSocketStore } from '../store-websocket-client.js';
import { connectStoreWith } from '../store-websocket-client.js';

/** Connects to a job's rendezvous store at ws://HOST:P/store (see store-websocket-client.ts). */
export async function connectStore(options: ConnectStoreOptions): Promise<WebSocketStore> {
  const { WebSocket } = await import('ws');
  return connectStoreWith(WebSocket as unknown as WebSocketClass, options);
}
