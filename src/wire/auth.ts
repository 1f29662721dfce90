// The one challenge-response by which both ends of every webccl connection prove that they hold
// the job's token, without the token ever crossing the wire (browser-safe). Each end draws a
// fresh nonce and tells the other; each signs, with HMAC-SHA-256 keyed by the token,
//     "<label> <its role>" | the peer's nonce | the exchange's context | its own nonce
// where the context starts with the job id (u16 length, UTF-8) and may bind more (the TCP
// transport adds the two ranks and the channel). Fresh nonces on both sides make a recorded
// proof useless on another connection; the role in the signed bytes keeps an end from replaying
// the peer's own proof back at it.
//
// The protocols frame the exchange their own way (the store: HELLO, AUTH, AUTH_OK / AUTH_FAIL;
// the transport: HELLO both ways, then PROOF both ways), but both run it through Challenge: the
// job id check, the proofs, and the two reasons a refusal gives (AUTH_FAIL_REASONS).
import { concat, str, textBytes } from './bytes.js';
import { hmacSha256, randomBytes, sameBytes } from './hmac.js';
import { NONCE_BYTES } from './limits.js';

/** Why an end refused the other's proof; the same numbers on every protocol's wire. */
export const AuthFail = { jobId: 1, token: 2 } as const;
export type AuthFailReason = (typeof AuthFail)[keyof typeof AuthFail];

export const AUTH_FAIL_REASONS: Record<number, string> = {
  [AuthFail.jobId]: 'job id mismatch',
  [AuthFail.token]: 'token mismatch (the HMAC proof did not verify)',
};

/** A refusal of the peer, with the reason the protocol tells it (AUTH_FAIL_REASONS, or its own). */
export class Refused extends Error {
  constructor(
    readonly reason: number,
    readonly detail: string,
  ) {
    super(detail);
  }
}

/** What one end signs (see the header): `role` is the signing end's, `ownNonce` its own. */
export interface Signed {
  label: string;
  role: string;
  peerNonce: Uint8Array;
  context: Uint8Array;
  ownNonce: Uint8Array;
}

/** The bytes one end signs (see the header). */
export function signedBytes(s: Signed): Uint8Array {
  return concat([textBytes(`${s.label} ${s.role}`), s.peerNonce, s.context, s.ownNonce]);
}

/** This end's proof, and the proof the peer must send back. */
export interface Proofs {
  mine: Uint8Array;
  theirs: Uint8Array;
}

/** One end of one exchange: its nonce, and the proofs once the peer's nonce is known. */
export class Challenge {
  readonly nonce = randomBytes(NONCE_BYTES);

  /**
   * `label` names the protocol and its version ("webccl-store/1"); `roles` are this end's and
   * the peer's names in the signed bytes ("client", "server").
   */
  constructor(
    private readonly token: Uint8Array,
    readonly jobId: string,
    private readonly label: string,
    private readonly roles: readonly [string, string],
  ) {}

  /** Refuses a peer of another job (before any proof is computed). */
  checkJob(peerJobId: string): void {
    if (peerJobId !== this.jobId) throw new Refused(AuthFail.jobId, `job "${peerJobId}" is not the job here`);
  }

  /** The context every exchange binds: the job id, then whatever `more` the protocol adds. */
  context(more: Uint8Array[] = []): Uint8Array {
    return concat([...str(this.jobId), ...more]);
  }

  /**
   * Both proofs of the exchange, computed together as soon as the peer's nonce is known, so that
   * the proof that arrives last is checked the moment it arrives: nothing the peer sends after
   * it can reach the protocol while a check is still running.
   */
  async proofs(peerNonce: Uint8Array, more: Uint8Array[] = []): Promise<Proofs> {
    const ctx = this.context(more);
    const [mine, theirs] = await hmacSha256(this.token, [
      signedBytes({ label: this.label, role: this.roles[0], peerNonce, context: ctx, ownNonce: this.nonce }),
      signedBytes({ label: this.label, role: this.roles[1], peerNonce: this.nonce, context: ctx, ownNonce: peerNonce }),
    ]);
    return { mine, theirs };
  }

  /** Refuses a proof that is not the one expected (the peer does not hold the token). */
  static check(expected: Uint8Array, got: Uint8Array, who: string): void {
    if (!sameBytes(expected, got)) throw new Refused(AuthFail.token, `${who} did not prove the job's token`);
  }
}
