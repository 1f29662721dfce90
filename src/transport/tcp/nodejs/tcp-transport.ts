// TcpTransport (Node only): the mesh (transport/mesh) over TCP connections. A dialled socket
// reads straight into the posted receive (see dialDirect), so a payload is copied once, by the
// kernel; with WEBCCL_TLS every connection runs TLS 1.3.
import type { WebcclError } from '../../../core/errors.js';
import type { WireTls } from '../../../wire/nodejs/secure-socket.js';
import { Mesh, type MeshOptions } from '../../mesh/mesh.js';
import { TcpCarrier } from './tcp-carrier.js';

export type { Address } from '../../mesh/carrier.js';
export { DEFAULT_HANDSHAKE_TIMEOUT_MS } from '../../mesh/mesh.js';

export interface TcpTransportOptions extends MeshOptions {
  /** Run every connection over TLS (WEBCCL_TLS); plain when absent. */
  tls?: WireTls;
  /** Called for each refused incoming connection; without it, refusals are logged at WARN (a few per interval). */
  onReject?: (e: WebcclError, remote: string) => void;
}

export class TcpTransport extends Mesh {
  /** Binds the listener and starts answering handshakes. */
  static async listen(o: TcpTransportOptions): Promise<TcpTransport> {
    const t = new TcpTransport(o, new TcpCarrier(o.rank, o.tls));
    await t.bind();
    return t;
  }

  /** Every socket of the mesh (tests watch what they write). */
  get sockets(): Set<import('node:net').Socket> {
    return (this.carrier as TcpCarrier).sockets;
  }
}
