/**
 * What the temporary-token workload records (token-workload.ts) for the credentials checker
 * (checkers/credentials.ts): the tokens it minted, every request it made with one, and every
 * rotation of the bucket's signing key. Times are on the history's clock (history.ts).
 */

/** A minted token, as its claims say (decoded from the JWT's payload: kvb signs, it does not hide). */
export interface MintedToken {
  /** The signing-key generation it was minted under (its `gen` claim): a rotation past it revokes it. */
  generation: number;
  /** Its `exp` claim, on the history's clock: the server refuses it from this instant on. */
  expiresAt: number;
  /** When its mint was answered: every use is sent after. */
  minted: number;
}

/** One request made with a token. */
export interface TokenUse {
  /** Index into `tokens`. */
  token: number;
  client: number;
  instance: string;
  call: number;
  /** Infinity when there was no answer. */
  ret: number;
  /** The answer's status; absent when there was none (then the use says nothing about the token). */
  status?: number;
}

/** A rotation of the signing key (`PATCH {"signing_key": …}`), which revokes every earlier token. */
export interface Rotation {
  /** The generation it made. */
  generation: number;
  instance: string;
  /** It took effect between `call` and `ret`: `ret` is its answer, or the first read of the policy that showed it. */
  call: number;
  ret: number;
}

export interface CredentialHistory {
  tokens: MintedToken[];
  uses: TokenUse[];
  rotations: Rotation[];
  /**
   * How long another instance may still accept a revoked token after its rotation was answered
   * (docs/scale-out.md: each instance caches policies and checked tokens for at most 1 s, plus the
   * time a request takes). The instance that rotated refuses it at once.
   */
  propagationMs: number;
}
