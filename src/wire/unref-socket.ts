// Letting a Node process exit while a WebSocket is open (browser-safe): a rank that only dials
// runs on the browser's WebSocket interface, which in Node is the `ws` package's; `ws` keeps its
// TCP socket private, and an idle job's connections must not keep a finished script alive (as a
// Node rank's unref'd sockets do not). A page's WebSocket has no such socket, and a page no event
// loop to keep alive: there this does nothing.
export function unrefSocket(ws: object): void {
  (ws as { _socket?: { unref?: () => void } })._socket?.unref?.();
}
