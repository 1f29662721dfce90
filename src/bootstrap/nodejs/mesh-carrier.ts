// Which carrier the mesh between nodes runs over (Node only): WEBCCL_TRANSPORT=tcp (default) or
// ws, checked here, and the listening mesh of that carrier. Every rank of a job must agree;
// rendezvous.ts checks that they do before any rank listens.
import { envString } from '../../core/config.js';
import { WebcclError } from '../../core/errors.js';
import type { Mesh } from '../../transport/mesh/mesh.js';
import { TcpTransport, type TcpTransportOptions } from '../../transport/tcp/nodejs/tcp-transport.js';
import { WsTransport } from '../../transport/ws/nodejs/ws-transport.js';
import type { WireTls } from '../../wire/nodejs/secure-socket.js';

export const CARRIERS = ['tcp', 'ws'] as const;
export type CarrierName = (typeof CARRIERS)[number];

/** WEBCCL_TRANSPORT, checked against the TLS setting (TLS runs over the TCP carrier only). */
export function carrierFromEnv(tls: WireTls | undefined): CarrierName {
  const v = envString('WEBCCL_TRANSPORT') ?? 'tcp';
  if (!(CARRIERS as readonly string[]).includes(v)) {
    throw new WebcclError(
      'INVALID_ARGUMENT',
      `WEBCCL_TRANSPORT=${JSON.stringify(v)}: expected ${CARRIERS.join(' or ')}`,
      { transport: v },
    );
  }
  if (v === 'ws' && tls) {
    throw new WebcclError(
      'UNSUPPORTED',
      'WEBCCL_TLS=1 with WEBCCL_TRANSPORT=ws: the WebSocket transport runs over plain ws:// (each link is still authenticated by the job token, but not encrypted); use WEBCCL_TRANSPORT=tcp for TLS',
      { transport: v },
    );
  }
  return v as CarrierName;
}

/** The mesh of `carrier`, listening. */
export function listenMesh(carrier: CarrierName, o: TcpTransportOptions): Promise<Mesh> {
  if (carrier === 'ws') {
    if (o.tls) throw new WebcclError('UNSUPPORTED', 'TLS runs over the TCP carrier only (WEBCCL_TRANSPORT=tcp)');
    return WsTransport.listen(o);
  }
  return TcpTransport.listen(o);
}
