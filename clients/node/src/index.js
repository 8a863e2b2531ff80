// redlockd-client: the Node client of redlockd (see README.md).

export { Client, DEFAULT_DEADLINE_MS } from './client.js';
export { Lease, stopMargin } from './lease.js';
export { Leader, Leadership } from './election.js';
export { Lock } from './wire.js';
export {
  RedlockdError,
  LockHeldError,
  LockNotHeldError,
  UnavailableError,
  DeadlineExceededError,
  InvalidArgumentError,
  ResourceExhaustedError,
  UnauthenticatedError,
  PermissionDeniedError,
  LockLostError,
} from './errors.js';
