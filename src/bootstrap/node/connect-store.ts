// connectStore in Node: the browser-safe WebSocket client on the `ws` package's WebSocket, since
// Node 20 has no global one (the bytes and the API are the same as in a page).
import { WebSocket } from 'ws';
import { type ConnectStoreOptions, type WebSocketClass, type WebSocketStore, connectStoreWith } from '../store-websocket-client.js';

/** Connects to a job's rendezvous store at ws://HOST:P/store (see store-websocket-client.ts). */
export function connectStore(options: ConnectStoreOptions): Promise<WebSocketStore> {
  return connectStoreWith(WebSocket as unknown as WebSocketClass, options);
}
