// What the store's client and server both need of a TCP (or TLS) socket as their byte pipe:
// writes of several parts that report backpressure, 'drain', and flow control.
import type * as net from 'node:net';

export interface SocketFlow {
  /** Writes every part; false when the socket's buffer is full (wait for onceDrain). */
  write(parts: Uint8Array[]): boolean;
  onceDrain(f: () => void): void;
  pause(): void;
  resume(): void;
  destroy(): void;
}

export function socketFlow(socket: net.Socket): SocketFlow {
  return {
    write: (parts) => {
      let ok = true;
      for (const part of parts) ok = socket.write(part);
      return ok;
    },
    onceDrain: (f) => void socket.once('drain', f),
    pause: () => void socket.pause(),
    resume: () => void socket.resume(),
    destroy: () => void socket.destroy(),
  };
}
