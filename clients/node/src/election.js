// Leader election (ElectionService): a leadership is a lock the daemon keeps
// alive for its leader through a `Campaign` session, exactly as a `Hold`
// session keeps a Lease's lock. This side turns every way it can end into
// one AbortSignal, as the Lease does:
//   - the daemon sends `lost` (an extension failed, Client.resign was called
//     with its token elsewhere, the daemon's shutdown grace ran out);
//   - the daemon sends `resigned` that nobody asked for;
//   - the stream ends or breaks (daemon gone, connection cut, client closed);
//   - no extension (`kept`) arrived before the last known validity ran out,
//     less a margin (the daemon or the network went quiet);
//   - `resign()` was called (the leadership is given up on purpose).

import { inspect } from 'node:util';
import grpc from '@grpc/grpc-js';
import { DeadlineExceededError, LockLostError, fromStatus, codeName } from './errors.js';
import { stopMargin } from './lease.js';
import { fromDuration, now } from './wire.js';

/**
 * An election's current leader as anyone may see it (no token): what
 * `Client.leader` and `Client.observe` give.
 */
export class Leader {
  /**
   * @param {object} wire the contract's Leader message
   * @param {number} since monotonic ms from which `remaining` counts
   */
  constructor(wire, since) {
    /** The election's name. */
    this.name = wire.name;
    /** What the leader campaigned with (an address, a pod name). */
    this.value = wire.value;
    /** The leadership's fence: strictly greater than every earlier leader's term. */
    this.term = BigInt(wire.term);
    /** When the leadership began, by the masters' clocks (null if not said). */
    this.since = wire.since ? new Date(Number(wire.since.seconds) * 1000 + Math.floor(wire.since.nanos / 1e6)) : null;
    /** How long the leadership stays held at least, as a majority saw it (the contract's `remaining`), in ms. */
    this.validityMs = fromDuration(wire.remaining);
    /** End of that on `performance.now()`'s clock. */
    this.validUntil = since + this.validityMs;
  }

  /** Milliseconds the leadership is still held at least, by the last reading (0 once run out). */
  remainingMs() {
    return Math.max(0, this.validUntil - now());
  }

  /** JSON with the term as a decimal string. */
  toJSON() {
    return {
      name: this.name,
      value: this.value,
      term: this.term.toString(),
      since: this.since?.toISOString() ?? null,
      validityMs: this.validityMs,
    };
  }

  [inspect.custom]() {
    return `Leader { name: ${JSON.stringify(this.name)}, value: ${JSON.stringify(this.value)}, term: ${this.term}n, validityMs: ${this.validityMs} }`;
  }
}

/**
 * Whether an Observe reading steps forward from what was last given
 * (`told`: null before the first, else `{ term, leader }`): a term above
 * every one given, or no leader after a leader. The daemon sends only
 * those; the client holds it to that.
 */
export function stepsForward(told, leader) {
  if (told === null) return true;
  if (leader !== null) return leader.term > told.term;
  return told.leader;
}

/** An election won by a Campaign session, kept by the daemon while it is open. */
export class Leadership {
  /** @internal Use `Client.campaign`. */
  constructor(call, wire, ttlMs, resignTimeoutMs) {
    this._call = call;
    this._ttlMs = ttlMs;
    this._resignTimeoutMs = resignTimeoutMs;
    this._controller = new AbortController();
    this._timer = null;
    this._resigning = null; // { resolve, reject } while resign() waits
    this._resigned = null; // the promise resign() returns, once called
    /** The election's name. */
    this.name = wire.name;
    /** What this leader campaigned with (what `leader()` and `observe()` show). */
    this.value = wire.value;
    /** The leadership's fencing token: pass it with every write the leader makes. */
    this.term = BigInt(wire.term);
    /** The secret proving this leadership (for `Client.resign`). Never log it. */
    this.token = wire.token;
    /** How many extensions (`kept`) the daemon has made. */
    this.extensions = 0;
    /**
     * True once the daemon said it is stopping: the leadership is still
     * kept until the drain ends, then lost. Resign before then and campaign
     * again on another replica.
     */
    this.draining = false;
    this._keep(wire);
  }

  /** Aborted as soon as this is no longer the leader; its reason is a LockLostError. */
  get signal() {
    return this._controller.signal;
  }

  /**
   * Throws the LockLostError once the leadership is gone; call it right
   * before each step only the leader may take. It reads the clock, as
   * `Lease.check` does: a leader resumed after a pause past its validity
   * stands down before its work's own timers run.
   */
  check() {
    if (!this.signal.aborted && now() >= this.validUntil - stopMargin(this._ttlMs)) {
      this._lapse();
    }
    this._controller.signal.throwIfAborted();
  }

  /** Milliseconds of guaranteed leadership left now (0 once it ran out). */
  remainingMs() {
    return Math.max(0, this.validUntil - now());
  }

  /**
   * Gives the leadership up: sends `resign` and waits for the daemon's
   * `resigned`; the next candidate may be elected at once. Resolves to
   * `was_leader` (false: it had expired or been taken first, or was already
   * gone). Past the client's deadline the stream is cancelled, which makes
   * the daemon resign too, and the promise rejects with
   * DeadlineExceededError. Calling it again returns the same promise.
   */
  resign() {
    if (this._resigned) return this._resigned;
    if (this.signal.aborted) {
      this._resigned = Promise.resolve(false);
      return this._resigned;
    }
    this._resigned = new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this._resigning = null;
        this._gone('resigned at the client\'s request (no answer)');
        this._call.cancel();
        const details = `no \`resigned\` within ${this._resignTimeoutMs} ms; the session was cancelled`;
        reject(new DeadlineExceededError(`resign: ${details}`, grpc.status.DEADLINE_EXCEEDED, details));
      }, this._resignTimeoutMs);
      const settle = (fn) => (value) => {
        clearTimeout(timer);
        this._resigning = null;
        fn(value);
      };
      this._resigning = { resolve: settle(resolve), reject: settle(reject) };
      this._call.write({ resign: {} });
    });
    return this._resigned;
  }

  /** The token is a secret: JSON without it, the term as a decimal string. */
  toJSON() {
    return { name: this.name, value: this.value, term: this.term.toString(), validityMs: this.validityMs };
  }

  /** console.log and util.inspect show the leadership without its token. */
  [inspect.custom]() {
    return `Leadership { name: ${JSON.stringify(this.name)}, value: ${JSON.stringify(this.value)}, term: ${this.term}n, validityMs: ${this.validityMs} }`;
  }

  /** @internal Routes one stream event after `elected` (see Client.campaign). */
  _event(event) {
    switch (event.event) {
      case 'kept':
        if (this.signal.aborted) break;
        // Read after the last validity lapsed: a lapse is final.
        if (now() >= this.validUntil - stopMargin(this._ttlMs)) {
          this._lapse();
          break;
        }
        this.extensions += 1;
        this._keep(event.kept);
        break;
      case 'draining':
        // Not an end: the daemon keeps the leadership until the drain ends.
        this.draining = true;
        break;
      case 'lost':
        this._gone(`lost: ${event.lost.reason}`);
        break;
      case 'resigned':
        if (this._resigning) {
          const { resolve } = this._resigning;
          this._gone('resigned at the client\'s request');
          this._call.end();
          resolve(event.resigned.was_leader);
        } else {
          this._gone('resigned by the daemon, unrequested');
        }
        break;
      default:
        this._gone(`unexpected event ${event.event} mid-session`);
        this._call.cancel();
    }
  }

  /** @internal The stream broke. */
  _error(error) {
    const reason = `the session broke: ${codeName(error.code)}: ${error.details}`;
    if (this._resigning) this._resigning.reject(fromStatus(error, 'resign'));
    this._gone(reason, error.code);
  }

  /** @internal The stream ended. */
  _end() {
    if (this._resigning) {
      const details = 'the session ended unanswered';
      this._resigning.reject(new LockLostError(`resign: ${details}`, grpc.status.UNAVAILABLE, details, details));
    }
    this._gone('the session ended');
  }

  /**
   * Aborts the signal once, with the first reason; `code` is the stream's
   * status when it broke, else FAILED_PRECONDITION (no longer the leader).
   */
  _gone(reason, code = grpc.status.FAILED_PRECONDITION) {
    clearTimeout(this._timer);
    if (this.signal.aborted) return;
    const details = `the leadership of ${this.name} is over: ${reason}`;
    this._controller.abort(new LockLostError(details, code, details, reason));
  }

  /**
   * Records a validity (of `elected` or `kept`), counted from its arrival,
   * and (re)starts the timer that aborts when it runs out unrenewed.
   */
  _keep(wire) {
    /** Guaranteed validity the daemon last reported, in milliseconds. */
    this.validityMs = fromDuration(wire.validity);
    /** End of it on `performance.now()`'s clock, counted from the event's arrival. */
    this.validUntil = now() + this.validityMs;
    clearTimeout(this._timer);
    const delay = this.validUntil - stopMargin(this._ttlMs) - now();
    this._timer = setTimeout(() => this._lapse(), Math.max(0, delay));
    this._timer.unref?.();
  }

  /** The validity ran out unrenewed: the leadership ends. */
  _lapse() {
    this._gone('no extension arrived before the validity ran out');
    // Cancelling makes a daemon that still hears us resign.
    this._call.cancel();
  }
}
