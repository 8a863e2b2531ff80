// Types of redlockd-client (hand-written beside the ESM sources; checked by
// `tsc` on types/usage.ts in scripts/check-node-client.sh).

import type { ChannelOptions } from '@grpc/grpc-js';

/** Default deadline of a call beyond the wait it asks for, in milliseconds. */
export declare const DEFAULT_DEADLINE_MS: number;

/** How to reach and authenticate to a daemon. */
export interface ClientOptions {
  /** Bearer token, sent as `authorization: Bearer <token>` on every call and session. */
  token?: string;
  /** PEM of the CA that signed the daemon's certificate; turns TLS on. */
  rootCert?: string | Buffer;
  /** PEM of the client key, for mutual TLS (with `certChain`). */
  privateKey?: string | Buffer;
  /** PEM of the client certificate chain, for mutual TLS (with `privateKey`). */
  certChain?: string | Buffer;
  /** Deadline of each call beyond the wait it asks for; default 10 000 ms. */
  deadlineMs?: number;
  /** Extra grpc-js channel options. */
  channelOptions?: ChannelOptions;
}

/** Options of a call that only needs a deadline. */
export interface CallOptions {
  /** This call's whole deadline in ms (default: the client's `deadlineMs`). */
  deadlineMs?: number;
}

/** Options of `acquire`, `hold` and `using`. */
export interface AcquireOptions extends CallOptions {
  /** Time to live of the lock, in milliseconds (required). */
  ttlMs: number;
  /** How long to keep trying while someone else holds it; 0 (default): once. */
  waitMs?: number;
  /** Free-form, low-cardinality identity of the caller, for the daemon's logs. */
  owner?: string;
  /**
   * Idempotency key, 22-64 chars of A-Z a-z 0-9 - _ with at least 128
   * random bits (default: a fresh one per call). Retried with the same
   * value, the call returns the lock that value holds instead of
   * LockHeldError. After a deadline, nothing is left locked: when `acquire`
   * ends without the daemon's answer (its deadline ran out in the client,
   * the connection broke), the client releases what its request id may have
   * got, in the background within a second; a retry with the same value
   * through the same client waits for that release, then acquires anew. A
   * secret, like a token.
   */
  requestId?: string;
  /**
   * Semaphore: at most `limit` holders of the resource at once, each with
   * its own token and fence (`Lock.permit`); 0 or 1 (default): a plain
   * lock. With a limit above 1 no requestId is sent (passing one is
   * InvalidArgumentError). Held under another limit: LockNotHeldError
   * (FAILED_PRECONDITION).
   */
  limit?: number;
  /**
   * A shared (read) lock: it coexists with other shared holders of the
   * resource, never with an exclusive one (the default, false). A waiting
   * exclusive caller stops new shared grants, so writers are not starved.
   */
  shared?: boolean;
  /**
   * This call's whole deadline in ms, wait included (default: `waitMs` plus
   * the client's `deadlineMs`). Shorter than the wait: DeadlineExceededError.
   */
  deadlineMs?: number;
}

/** Options of `extend`. */
export interface ExtendOptions extends CallOptions {
  /** The new time to live, in milliseconds (required). */
  ttlMs: number;
}

/** What `extend`, `release` and `validate` need of a lock. */
export interface LockRef {
  resource: string;
  token: string;
}

/** A granted lock. */
export declare class Lock implements LockRef {
  /** Locks come from the client's calls. */
  private constructor();
  /** The resource locked. */
  readonly resource: string;
  /** Opaque proof of ownership; never log it. */
  readonly token: string;
  /** Fencing token: strictly greater than every earlier holder's. */
  readonly fence: bigint;
  /** Guaranteed validity the daemon reported, in milliseconds. */
  readonly validityMs: number;
  /** A semaphore's permit (`limit` above 1); 0 for a plain lock. */
  readonly permit: number;
  /**
   * End of the guaranteed validity on `performance.now()`'s clock: counted
   * from when the request was sent (unary calls), or from when the event
   * arrived (Hold sessions, which keep a margin: see `stopMargin`).
   */
  readonly validUntil: number;
  /**
   * A lock on several resources at once (`acquire([...])`): every resource
   * with its own fence, in the order asked; `resource` and `fence` are the
   * first one's. Extend, release or validate it through any of them.
   * Empty for a lock on one resource.
   */
  readonly resources: ReadonlyArray<{ readonly resource: string; readonly fence: bigint }>;
  /** Milliseconds of guaranteed validity left now (0 once it ran out). */
  remainingMs(): number;
  /** JSON without the token, the fence as a decimal string. */
  toJSON(): { resource: string; fence: string; validityMs: number };
}

/** What `validate` answers. */
export interface Validity {
  /** Whether the token still holds the lock on a majority. */
  held: boolean;
  /** Remaining guaranteed validity in ms (0 when not held). */
  validityMs: number;
  /** End of it on `performance.now()`'s clock, counted from when it was asked. */
  validUntil: number;
}

/** A lock held by an open Hold session, extended by the daemon. */
export declare class Lease {
  private constructor();
  /** The lock as last granted or extended. */
  readonly lock: Lock;
  /** Its fencing token: pass it with every write made under the lock. */
  readonly fence: bigint;
  /** The resource locked. */
  readonly resource: string;
  /** How many extensions the daemon has made. */
  readonly extensions: number;
  /**
   * True once the daemon said it is stopping: the lock is still held and
   * extended until the drain ends, then lost (no longer extended, it
   * expires with its ttl; the signal aborts).
   */
  readonly draining: boolean;
  /**
   * Aborted as soon as the lock is no longer held (`lost`, an unrequested
   * `released`, the stream ending or breaking, no extension before the
   * validity ran out, or `release()`); its reason is a LockLostError.
   */
  readonly signal: AbortSignal;
  /** Throws the LockLostError once the lock is gone; reads the clock (a lapsed validity ends it now). */
  check(): void;
  /** Sends `release`, waits for `released`; resolves to `was_held` (false if already gone). */
  release(): Promise<boolean>;
}

/** Options of `campaign`. */
export interface CampaignOptions {
  /** What the leader publishes (an address, a pod name): what `leader()` and `observe()` show. Default ''. */
  value?: string;
  /**
   * The leadership's time to live, in milliseconds (required): how long a
   * frozen or killed leader keeps it, so about how long a standby waits to
   * take over. The daemon extends it while the session is open.
   */
  ttlMs: number;
  /**
   * Withdraws the candidacy when it aborts before the election: `campaign`
   * rejects with its reason. It does not end a leadership won (`resign()` does).
   */
  signal?: AbortSignal;
}

/** Options of `observe`. */
export interface ObserveOptions {
  /** Ends the iteration (quietly) when it aborts. */
  signal?: AbortSignal;
}

/** An election's current leader as anyone may see it (no token). */
export declare class Leader {
  private constructor();
  /** The election's name. */
  readonly name: string;
  /** The leader's value: what it campaigned with, or last proclaimed. */
  readonly value: string;
  /** The leadership's fence: strictly greater than every earlier leader's term. */
  readonly term: bigint;
  /**
   * Which of this term's values `value` is: 0n for the campaign's, higher
   * after each Proclaim (not a count). With `term`, orders what observers are told.
   */
  readonly valueVersion: bigint;
  /** When the leadership began, by the masters' clocks (null if the daemon did not say). */
  readonly since: Date | null;
  /** How long the leadership stays held at least, as a majority saw it when read (ms). */
  readonly validityMs: number;
  /** End of that on `performance.now()`'s clock (from the send for `leader()`, the arrival for `observe()`). */
  readonly validUntil: number;
  /** Milliseconds left of it now (0 once run out). */
  remainingMs(): number;
  /** JSON with the term as a decimal string. */
  toJSON(): { name: string; value: string; term: string; valueVersion: string; since: string | null; validityMs: number };
}

/** An election won by a Campaign session, kept by the daemon while it is open. */
export declare class Leadership {
  private constructor();
  /** The election's name. */
  readonly name: string;
  /** What this leader publishes: its campaign's value, or the last one `proclaim()` set. */
  readonly value: string;
  /** The leadership's fencing token: strictly greater than every earlier leader's. Pass it with every write. */
  readonly term: bigint;
  /** The version of `value`: 0n for the campaign's, then what the last successful `proclaim()` resolved to. */
  readonly valueVersion: bigint;
  /** The secret proving this leadership (for `Client.resign`); never log it. */
  readonly token: string;
  /** Guaranteed validity the daemon last reported (`elected` or `kept`), in ms. */
  readonly validityMs: number;
  /** End of it on `performance.now()`'s clock, counted from the event's arrival. */
  readonly validUntil: number;
  /** How many extensions (`kept`) the daemon has made. */
  readonly extensions: number;
  /** True once the daemon said it is stopping: kept until the drain ends, then lost. */
  readonly draining: boolean;
  /**
   * Aborted as soon as this is no longer the leader (`lost`, an unrequested
   * `resigned`, the stream ending or breaking, no extension before the
   * validity ran out, or `resign()`); its reason is a LockLostError.
   */
  readonly signal: AbortSignal;
  /** Throws the LockLostError once the leadership is gone; reads the clock (a lapsed validity ends it now). */
  check(): void;
  /** Milliseconds of guaranteed leadership left now (0 once it ran out). */
  remainingMs(): number;
  /** Sends `resign`, waits for `resigned`; resolves to `was_leader` (false if already gone). */
  resign(): Promise<boolean>;
  /**
   * Changes the published value without giving up the term (Proclaim by
   * name, token and term); resolves to the new `valueVersion`.
   * LockNotHeldError when this term no longer leads (at once, with no call,
   * once the leadership is known over; a refusal aborts the signal);
   * UnavailableError when too few masters answered (proclaiming again is safe).
   */
  proclaim(value: string, options?: CallOptions): Promise<bigint>;
  /** JSON without the token, the term and value version as decimal strings. */
  toJSON(): { name: string; value: string; term: string; valueVersion: string; validityMs: number };
}

/** A connection to one redlockd daemon. */
export declare class Client {
  /** `host:port`, `http://host:port`, or `https://host:port` (TLS with the system's roots unless `rootCert`). */
  constructor(address: string, options?: ClientOptions);
  /** Default deadline of each call beyond its wait, in ms. */
  readonly deadlineMs: number;
  /**
   * Takes the lock; LockHeldError if it stayed held elsewhere for the whole
   * wait. After a deadline, nothing is left locked: the client releases what
   * its request id may have got.
   */
  acquire(resource: string | readonly string[], options: AcquireOptions): Promise<Lock>;
  /** Resets the lock's ttl if still held; LockNotHeldError if not. */
  extend(lock: LockRef, options: ExtendOptions): Promise<Lock>;
  /** Gives the lock up; resolves to whether it was still held. */
  release(lock: LockRef, options?: CallOptions): Promise<boolean>;
  /** Whether the token still holds the lock, and for how long at least. */
  validate(lock: LockRef, options?: CallOptions): Promise<Validity>;
  /** Opens a Hold session and waits for the lock. */
  hold(resource: string | readonly string[], options: AcquireOptions): Promise<Lease>;
  /**
   * Runs `fn` while holding the lock; `signal` aborts once the lock is gone.
   * Releases after `fn` settles; returns its value or rethrows its error.
   */
  using<T>(resource: string | readonly string[], options: AcquireOptions, fn: (signal: AbortSignal, lock: Lock) => Promise<T> | T): Promise<T>;
  /**
   * Stands as a candidate in the election and waits (first come, first
   * served, as long as it takes) until elected.
   */
  campaign(name: string, options: CampaignOptions): Promise<Leadership>;
  /** The election's current leader, read from a majority; null when it has none. */
  leader(name: string, options?: CallOptions): Promise<Leader | null>;
  /**
   * The election's leader changes: the current leader first (null: none),
   * then each change (a new term, a proclaimed value, no leader), in
   * (term, valueVersion) order. Ends when the loop breaks, the signal
   * aborts or the client closes; UnavailableError when the daemon ends it.
   */
  observe(name: string, options?: ObserveOptions): AsyncGenerator<Leader | null, void, undefined>;
  /** Ends the leadership `token` proves from outside its session; resolves to `was_leader`. */
  resign(name: string, token: string, options?: CallOptions): Promise<boolean>;
  /**
   * Closes the channel (open sessions end, their locks are released) once
   * the background releases of unanswered acquires are done (a second at
   * most); resolves then.
   */
  close(): Promise<void>;
}

/** How long before the last known validity a quiet session counts as lost: ttl/10, 50 ms to 2 s. */
export declare function stopMargin(ttlMs: number): number;

/** A word for each outcome, shared with redlockd's other clients. */
export type ErrorKind =
  | 'error'
  | 'held'
  | 'not_held'
  | 'unavailable'
  | 'deadline_exceeded'
  | 'invalid_argument'
  | 'resource_exhausted'
  | 'unauthenticated'
  | 'permission_denied'
  | 'lost';

/** Base class of every error of this package. */
export declare class RedlockdError extends Error {
  constructor(message: string, code: number, details: string);
  /** The gRPC status code (`grpc.status`). */
  readonly code: number;
  /** The daemon's message (or the client's own). */
  readonly details: string;
  /** The outcome as a word. */
  readonly kind: ErrorKind;
  /** Whether the same call may succeed if tried again later. */
  readonly retryable: boolean;
}
/** ABORTED: held by someone else for the whole wait. */
export declare class LockHeldError extends RedlockdError {}
/** FAILED_PRECONDITION: the token no longer holds the lock. */
export declare class LockNotHeldError extends RedlockdError {}
/** UNAVAILABLE: too few masters answered, or no daemon; nothing locked; retry. */
export declare class UnavailableError extends RedlockdError {}
/** DEADLINE_EXCEEDED: the deadline ran out first; nothing locked by the call. */
export declare class DeadlineExceededError extends RedlockdError {}
/** INVALID_ARGUMENT: a malformed request. */
export declare class InvalidArgumentError extends RedlockdError {
  /** The field the message names (`ttl`, `resource`, `ttlMs`, ...). */
  readonly field: string | undefined;
}
/** RESOURCE_EXHAUSTED: a configured limit was hit. */
export declare class ResourceExhaustedError extends RedlockdError {}
/** UNAUTHENTICATED: missing or unknown bearer token / client certificate. */
export declare class UnauthenticatedError extends RedlockdError {}
/** PERMISSION_DENIED: resource outside the caller's namespaces. */
export declare class PermissionDeniedError extends RedlockdError {}
/** The lock of a session is gone or no longer guaranteed. */
export declare class LockLostError extends RedlockdError {
  constructor(message: string, code: number, details: string, reason: string);
  /** How it went: `lost: ...`, `released by the daemon, unrequested`, `the session ended`, ... */
  readonly reason: string;
}
