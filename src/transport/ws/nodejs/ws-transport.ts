// WsTransport (Node only): the mesh (transport/mesh) over WebSockets (WEBCCL_TRANSPORT=ws), the
// same frames, handshake, limits and errors as over TCP; the carrier browsers will dial.
import { Mesh, type MeshOptions } from '../../mesh/mesh.js';
import { WsCarrier } from './ws-carrier.js';

export type WsTransportOptions = MeshOptions;

export class WsTransport extends Mesh {
  /** Binds the rank's port (WebSocket upgrades on /webccl-link) and starts answering handshakes. */
  static async listen(o: WsTransportOptions): Promise<WsTransport> {
    const t = new WsTransport(o, new WsCarrier(o.rank));
    await t.bind();
    return t;
  }
}
