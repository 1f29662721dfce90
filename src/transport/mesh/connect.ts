// Building the mesh (browser-safe): dial every rank that listens, or meet a dial-only one at the
// carrier's relay, retrying until the connect deadline, and wait for the others to dial in. It
// remembers why dials failed and which peers were refused, so that a failed connect names the
// cause rather than its consequence.
import { WebcclError } from '../../core/errors.js';
import { RateLimitedLog } from '../../core/rate-log.js';
import { hostPort } from '../../wire/secrets.js';
import type { Address, Carrier, Link, MeshSide } from './carrier.js';

/** What connecting needs of its mesh. */
export interface ConnectingMesh {
  readonly rank: number;
  readonly size: number;
  readonly nchannels: number;
  readonly carrier: Carrier;
  side(): MeshSide;
  /** Why the mesh failed, if it has. */
  failure(): WebcclError | undefined;
  /** The ranks whose links are not all up yet. */
  missing(): number[];
  attach(link: Link): void;
  fail(e: WebcclError): void;
}

export class MeshConnect {
  private readonly rejections: WebcclError[] = [];
  /** The last reason a dial to each peer failed, for the connect deadline's message. */
  private readonly dialFailures = new Map<number, string>();
  private readonly refusals: RateLimitedLog;
  private waitIncoming?: () => void;

  constructor(
    private readonly m: ConnectingMesh,
    private readonly timeoutMs: number,
    private readonly onReject?: (e: WebcclError, remote: string) => void,
  ) {
    this.refusals = new RateLimitedLog(`rank ${m.rank}: refused connections`);
  }

  /** A link came up or the mesh failed: connect's wait for the ranks that dial in looks again. */
  changed(): void {
    this.waitIncoming?.();
  }

  /**
   * Dials (or meets) every peer on every channel and waits until every link is up, by `deadline`.
   * `peerDialOnly[p]`: rank p cannot listen; `selfDialOnly`: nor can this rank.
   */
  async run(addresses: Address[], peerDialOnly: boolean[], selfDialOnly: boolean, deadline: number): Promise<void> {
    const { m } = this;
    const dials: Promise<void>[] = [];
    for (let p = 0; p < m.size; p++) {
      if (p === m.rank) continue;
      for (let c = 0; c < m.nchannels; c++) {
        // Dial every rank that listens; a dial-only peer dials this one; two dial-only ranks meet at the relay.
        if (!peerDialOnly[p]) dials.push(this.dial(p, c, addresses[p], deadline));
        else if (selfDialOnly) dials.push(this.meet(p, c, deadline));
      }
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const incoming = new Promise<void>((resolve, reject) => {
      const check = () => {
        const failure = m.failure();
        if (failure) return reject(failure);
        if (m.missing().length === 0) return resolve();
      };
      this.waitIncoming = check;
      timer = setTimeout(() => reject(this.late(m.missing())), Math.max(1, deadline - Date.now()));
      check();
    });
    try {
      await Promise.all([...dials, incoming]);
    } catch (e) {
      const err = this.rootCause(e as WebcclError);
      m.fail(err);
      throw err;
    } finally {
      clearTimeout(timer);
      this.waitIncoming = undefined;
    }
  }

  /** An incoming connection was refused: kept for the deadline's message, and reported. */
  refused(e: WebcclError, remote: string): void {
    if (this.rejections.length < 16) this.rejections.push(e);
    else this.rejections[this.rejections.length - 1] = e; // the last one is what the deadline reports
    if (this.onReject) this.onReject(e, remote);
    else this.refusals.warn(`rank ${this.m.rank}: refused ${remote}: ${e.message}`);
  }

  /** The connect deadline passed with `missing` ranks not linked: what failed for them, and the last refusal. */
  private late(missing: number[]): WebcclError {
    const last = this.rejections.at(-1);
    const dials = missing.flatMap((p) => (this.dialFailures.has(p) ? [this.dialFailures.get(p)!] : []));
    const why = [...dials, ...(last ? [`last refusal: ${last.message}`] : [])];
    return new WebcclError(
      'CONNECT_FAILED',
      `rank ${this.m.rank}: rank${missing.length > 1 ? 's' : ''} ${missing.join(', ')} did not connect within ${this.timeoutMs} ms${why.length ? ` (${why.join('; ')})` : ''}`,
      { missing },
    );
  }

  private dial(peer: number, channel: number, a: Address, deadline: number): Promise<void> {
    return this.retry(peer, deadline, `could not reach rank ${peer} at ${hostPort(a.host, a.port)}`, () =>
      this.m.carrier.dial(a, { peer, channel }, deadline, this.m.side()),
    );
  }

  /**
   * One link with a dial-only `peer` while this rank is dial-only too: both dial the relay, the lower rank says HELLO.
   */
  private async meet(peer: number, channel: number, deadline: number): Promise<void> {
    const { carrier, rank } = this.m;
    const relay = carrier.relay?.bind(carrier);
    if (!relay)
      throw new WebcclError(
        'UNSUPPORTED',
        `rank ${rank} and rank ${peer} both cannot listen, and the ${carrier.name} carrier has no relay to meet through`,
        { peer },
      );
    return this.retry(peer, deadline, `could not meet rank ${peer} at the relay`, () =>
      relay({ peer, channel }, rank < peer, deadline, this.m.side()),
    );
  }

  /**
   * Calls `attempt` until it yields a link (attached) or the deadline passes, backing off from
   * 20 ms to 500 ms: a peer's listener may not be up yet. Each failure is remembered for the
   * connect deadline's message; the last one, past the deadline, is CONNECT_FAILED.
   */
  private async retry(
    peer: number,
    deadline: number,
    what: string,
    attempt: () => Promise<Link | string>,
  ): Promise<void> {
    for (let delay = 20; ; delay = Math.min(delay * 2, 500)) {
      const failure = this.m.failure();
      if (failure) throw failure;
      const up = await attempt();
      if (typeof up !== 'string') return this.m.attach(up);
      const why = `${what}: ${up}`;
      this.dialFailures.set(peer, why);
      const left = deadline - Date.now();
      if (left <= 0) throw new WebcclError('CONNECT_FAILED', `rank ${this.m.rank} ${why}`, { peer });
      await new Promise((r) => setTimeout(r, Math.min(delay, left)));
    }
  }

  /**
   * A peer that failed the token proof here has usually also been refused by us on its own
   * dial, and may close every connection before its refusal of ours arrives: our dial then
   * sees a close during the handshake. The refusal is the cause; the close, its consequence.
   */
  private rootCause(e: WebcclError): WebcclError {
    if (e.code !== 'CONNECTION_CLOSED' || e.details.peer === undefined) return e;
    const cause = this.rejections.find((r) => r.code === 'AUTH_FAILED' && r.details.peer === e.details.peer);
    return cause ? new WebcclError('AUTH_FAILED', `rank ${this.m.rank}: ${cause.reason}`, { ...cause.details }) : e;
  }
}
