// Between this package's types (milliseconds, BigInt fences) and the
// contract's (google.protobuf.Duration, uint64 loaded as a decimal string).
// Bad input is refused here, with the field named, before any call.

import { inspect } from 'node:util';
import { invalidArgument } from './errors.js';

/** The monotonic clock every validity is measured on, in milliseconds. */
export const now = () => performance.now();

/** `ms` (a finite number >= 0) as a protobuf Duration; `field` names it in errors. */
export function toDuration(ms, field) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) {
    throw invalidArgument(field, `must be a finite number of milliseconds, got ${describe(ms)}`);
  }
  if (ms < 0) throw invalidArgument(field, `must not be negative, got ${ms}`);
  const whole = Math.floor(ms);
  return {
    seconds: String(Math.floor(whole / 1000)),
    nanos: (whole % 1000) * 1e6 + Math.round((ms - whole) * 1e6),
  };
}

/** A protobuf Duration (seconds as a string or number) in milliseconds. */
export function fromDuration(duration) {
  if (!duration) return 0;
  return Number(duration.seconds) * 1000 + duration.nanos / 1e6;
}

/** Checks that `value` is a non-empty string; `field` names it in errors. */
export function requireString(value, field) {
  if (typeof value !== 'string' || value.length === 0) {
    throw invalidArgument(field, `must be a non-empty string, got ${describe(value)}`);
  }
  return value;
}

/** Checks an optional string option (absent: ''). */
export function optionalString(value, field) {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') throw invalidArgument(field, `must be a string, got ${describe(value)}`);
  return value;
}

/**
 * A granted lock, as the daemon describes it, with the fence as a BigInt
 * and the validity placed on this process's monotonic clock.
 */
export class Lock {
  /**
   * @param {object} wire the contract's Lock message
   * @param {number} since monotonic ms from which the validity counts
   */
  constructor(wire, since) {
    /** The resource locked. */
    this.resource = wire.resource;
    /** Opaque proof of ownership; needed to extend, release, validate. Never log it. */
    this.token = wire.token;
    /** Fencing token, strictly greater than every earlier holder's (of the same permit). */
    this.fence = BigInt(wire.fence);
    /** A semaphore's permit (limit above 1): which one this grant holds; 0 for a plain lock. */
    this.permit = wire.permit ?? 0;
    /** Guaranteed validity the daemon reported, in milliseconds. */
    this.validityMs = fromDuration(wire.validity);
    /** End of the validity on `performance.now()`'s clock. */
    this.validUntil = since + this.validityMs;
  }

  /** Milliseconds of guaranteed validity left now (0 once it ran out). */
  remainingMs() {
    return Math.max(0, this.validUntil - now());
  }

  /** The token is a secret: keep it out of logs and JSON dumps by default. */
  toJSON() {
    return {
      resource: this.resource,
      fence: this.fence.toString(),
      validityMs: this.validityMs,
    };
  }

  /** console.log and util.inspect show the lock without its token. */
  [inspect.custom]() {
    return `Lock { resource: ${JSON.stringify(this.resource)}, fence: ${this.fence}n, validityMs: ${this.validityMs} }`;
  }
}

function describe(value) {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  return String(value);
}
