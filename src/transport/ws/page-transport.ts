// PageTransport (browser-safe): the mesh (transport/mesh) of a rank in a page, over the page's
// own WebSocket (page-carrier.ts). It never listens: its address is DIAL_ONLY, and every link it
// has is one it opened, carrying both directions.
import { Mesh, type MeshOptions } from '../mesh/mesh.js';
import { PageCarrier, type PageCarrierOptions } from './page-carrier.js';

export type PageTransportOptions = MeshOptions & PageCarrierOptions;

export class PageTransport extends Mesh {
  static create(o: PageTransportOptions): PageTransport {
    return new PageTransport(
      o,
      new PageCarrier(o.rank, o.jobId, { relay: o.relay, WebSocket: o.WebSocket, mesh: o.mesh }),
    );
  }
}
