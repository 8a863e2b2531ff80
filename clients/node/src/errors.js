// One error class per outcome the daemon reports as a gRPC status code, so
// that callers branch with `instanceof` (or on `.kind`, the same word in
// every redlockd client) instead of comparing numbers.

import grpc from '@grpc/grpc-js';

const { status } = grpc;

/** Base class of every error this package throws. */
export class RedlockdError extends Error {
  /**
   * @param {string} message
   * @param {number} code gRPC status code (`grpc.status`)
   * @param {string} details the daemon's message, or the client's own
   */
  constructor(message, code, details) {
    super(message);
    this.name = new.target.name;
    this.code = code;
    this.details = details;
  }

  /** A word for the outcome, shared with the other clients' conformance runs. */
  get kind() {
    return 'error';
  }

  /** Whether trying the same call again later may succeed. */
  get retryable() {
    return false;
  }
}

/** ABORTED: the resource stayed held by someone else for the whole wait. */
export class LockHeldError extends RedlockdError {
  get kind() {
    return 'held';
  }
}

/** FAILED_PRECONDITION: the token no longer holds the lock (expired, taken over, never held). */
export class LockNotHeldError extends RedlockdError {
  get kind() {
    return 'not_held';
  }
}

/** UNAVAILABLE: too few masters answered (or the daemon is unreachable); nothing is left locked; retry. */
export class UnavailableError extends RedlockdError {
  get kind() {
    return 'unavailable';
  }

  get retryable() {
    return true;
  }
}

/** DEADLINE_EXCEEDED: the call's deadline ran out first; nothing is left locked by it. */
export class DeadlineExceededError extends RedlockdError {
  get kind() {
    return 'deadline_exceeded';
  }
}

/** INVALID_ARGUMENT: a malformed request; `.field` names the offending field. */
export class InvalidArgumentError extends RedlockdError {
  constructor(message, code, details) {
    super(message, code, details);
    // The daemon writes "<field>: <reason>", and so does this client.
    const match = /^([A-Za-z_][\w.]*): /.exec(details);
    this.field = match ? match[1] : undefined;
  }

  get kind() {
    return 'invalid_argument';
  }
}

/** RESOURCE_EXHAUSTED: a configured limit (waiters, sessions, rate, calls) was hit. */
export class ResourceExhaustedError extends RedlockdError {
  get kind() {
    return 'resource_exhausted';
  }

  get retryable() {
    return true;
  }
}

/** UNAUTHENTICATED: no bearer token (or client certificate), or one no client has. */
export class UnauthenticatedError extends RedlockdError {
  get kind() {
    return 'unauthenticated';
  }
}

/** PERMISSION_DENIED: the resource is outside the caller's namespaces. */
export class PermissionDeniedError extends RedlockdError {
  get kind() {
    return 'permission_denied';
  }
}

/**
 * The lock of a Hold session is gone, or no longer guaranteed: the daemon
 * sent `lost` or an unrequested `released`, the stream ended or broke, or
 * the last known validity ran out. `.reason` says which. It is the reason
 * of the session's aborted AbortSignal.
 */
export class LockLostError extends RedlockdError {
  constructor(message, code, details, reason) {
    super(message, code, details);
    this.reason = reason;
  }

  get kind() {
    return 'lost';
  }
}

const CLASSES = new Map([
  [status.ABORTED, LockHeldError],
  [status.FAILED_PRECONDITION, LockNotHeldError],
  [status.UNAVAILABLE, UnavailableError],
  [status.DEADLINE_EXCEEDED, DeadlineExceededError],
  [status.INVALID_ARGUMENT, InvalidArgumentError],
  [status.RESOURCE_EXHAUSTED, ResourceExhaustedError],
  [status.UNAUTHENTICATED, UnauthenticatedError],
  [status.PERMISSION_DENIED, PermissionDeniedError],
]);

/** The status code's name, as gRPC spells it (`ABORTED`). */
export function codeName(code) {
  return status[code] ?? `code ${code}`;
}

/**
 * The error for a gRPC status (a grpc-js ServiceError, or any object with
 * `code` and `details`). Anything that is not a status is returned as is.
 */
export function fromStatus(error, what) {
  if (error instanceof RedlockdError || typeof error?.code !== 'number') return error;
  const Class = CLASSES.get(error.code) ?? RedlockdError;
  const details = error.details ?? error.message ?? '';
  const out = new Class(`${what}: ${codeName(error.code)}: ${details}`, error.code, details);
  out.cause = error;
  return out;
}

/** A request this client refuses before sending it; `field: reason`. */
export function invalidArgument(field, reason) {
  const details = `${field}: ${reason}`;
  return new InvalidArgumentError(details, status.INVALID_ARGUMENT, details);
}
