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
//   - the daemon refused a `proclaim()`: the term no longer leads;
//   - `resign()` was called (the leadership is given up on purpose).

import { inspect } from 'node:util';
import grpc from '@grpc/grpc-js';
import { DeadlineExceededError, LockLostError, LockNotHeldError, fromStatus, codeName, invalidArgument } from './errors.js';
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
    /** The leader's value (an address, a pod name): what it campaigned with, or last proclaimed. */
    this.value = wire.value;
    /** The leadership's fence: strictly greater than every earlier leader's term. */
    this.term = BigInt(wire.term);
    /**
     * Which of this term's values `value` is: 0n for the campaign's, higher
     * after each Proclaim (not a count: a retried Proclaim may skip numbers).
     * With `term` it orders the values observers are told.
     */
    this.valueVersion = BigInt(wire.value_version ?? 0);
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
      valueVersion: this.valueVersion.toString(),
      since: this.since?.toISOString() ?? null,
      validityMs: this.validityMs,
    };
  }

  [inspect.custom]() {
    return `Leader { name: ${JSON.stringify(this.name)}, value: ${JSON.stringify(this.value)}, term: ${this.term}n, valueVersion: ${this.valueVersion}n, validityMs: ${this.validityMs} }`;
  }
}

/**
 * Whether an Observe reading steps forward from what was last given
 * (`told`: null before the first, else `{ term, valueVersion, leader }`, of
 * the last leader given): a leader after it, by a higher term or by a higher
 * `valueVersion` of the same term (a Proclaim), or no leader after a leader.
 * The daemon sends only those; the client holds it to that. A value is
 * ordered by its version, not by differing: a reading of an older value,
 * from masters a failed Proclaim did not reach, must not undo a newer one.
 */
export function stepsForward(told, leader) {
  if (told === null) return true;
  if (leader !== null) {
    return leader.term > told.term || (leader.term === told.term && leader.valueVersion > (told.valueVersion ?? 0n));
  }
  return told.leader;
}

/** An election won by a Campaign session, kept by the daemon while it is open. */
export class Leadership {
  /**
   * @internal Use `Client.campaign`. `proclaim(request, options)` is the
   * client's Proclaim call (its channel, credentials and deadline).
   */
  constructor(call, wire, ttlMs, resignTimeoutMs, proclaim) {
    this._call = call;
    this._proclaim = proclaim;
    this._ttlMs = ttlMs;
    this._resignTimeoutMs = resignTimeoutMs;
    this._controller = new AbortController();
    this._timer = null;
    this._resigning = null; // { resolve, reject } while resign() waits
    this._resigned = null; // the promise resign() returns, once called
    /** The election's name. */
    this.name = wire.name;
    /** What this leader publishes (what `leader()` and `observe()` show): its campaign's value, or the last proclaimed. */
    this.value = wire.value;
    /** The leadership's fencing token: pass it with every write the leader makes. */
    this.term = BigInt(wire.term);
    /** The version of `value`: 0n for the campaign's, then what the last successful `proclaim()` resolved to. */
    this.valueVersion = 0n;
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
    this._lapseIfDue();
    this._controller.signal.throwIfAborted();
  }

  /**
   * Changes the value this leader publishes (a new address, what it serves)
   * without giving up the leadership: a Proclaim by its name, token and
   * term, on a majority of masters. From then on `leader()` and observers
   * show `value` under the same term with a higher `valueVersion`; resolves
   * to that version (a BigInt). `options.deadlineMs` bounds the call (else
   * the client's deadline).
   *
   * Rejects with LockNotHeldError (kind `not_held`, as any call by a token
   * that no longer holds) when this term no longer leads: the value was not
   * changed. Being an act of the leader, it is refused at once, with no
   * call, when the leadership is already known over (as `check()` would
   * throw, the clock included; the LockLostError is the error's `cause`).
   * When the daemon refuses it, the leadership ends here too (the signal
   * aborts) rather than at the session's next extension: stop acting as
   * leader now. UnavailableError when too few masters answered: some reads
   * may show the new value and others the old until a Proclaim succeeds;
   * proclaiming again is safe.
   */
  async proclaim(value, options = {}) {
    if (typeof value !== 'string') throw invalidArgument('value', 'must be a string');
    this._lapseIfDue();
    if (this.signal.aborted) {
      const over = this.signal.reason;
      const refused = new LockNotHeldError(`Proclaim: FAILED_PRECONDITION: ${over.details}`, grpc.status.FAILED_PRECONDITION, over.details);
      refused.cause = over;
      throw refused;
    }
    const request = { name: this.name, token: this.token, term: this.term.toString(), value };
    let answer;
    try {
      answer = await this._proclaim(request, options);
    } catch (error) {
      if (error instanceof LockNotHeldError) {
        this._gone('Proclaim: the term no longer leads');
        this._call.cancel();
      }
      throw error;
    }
    const version = BigInt(answer.value_version);
    // Of two Proclaims answered out of order, the newer value stays.
    if (version > this.valueVersion) {
      this.value = value;
      this.valueVersion = version;
    }
    return version;
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
    return { name: this.name, value: this.value, term: this.term.toString(), valueVersion: this.valueVersion.toString(), validityMs: this.validityMs };
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

  /** Ends the leadership now if its validity, less the margin, ran out (the timer may be late). */
  _lapseIfDue() {
    if (!this.signal.aborted && now() >= this.validUntil - stopMargin(this._ttlMs)) {
      this._lapse();
    }
  }

  /** The validity ran out unrenewed: the leadership ends. */
  _lapse() {
    this._gone('no extension arrived before the validity ran out');
    // Cancelling makes a daemon that still hears us resign.
    this._call.cancel();
  }
}
