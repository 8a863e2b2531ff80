// A lock held through a `Hold` session. The daemon extends the lock while
// the stream is open; this side turns every way the lock can go away into
// one AbortSignal, so that work done under the lock can stop at once:
//   - the daemon sends `lost` (an extension failed);
//   - the daemon sends `released` that nobody asked for (it is stopping);
//   - the stream ends or breaks (daemon gone, connection cut);
//   - no extension arrived before the last known validity ran out, less a
//     margin (the daemon or the network went quiet);
//   - `release()` was called (the lock is given up on purpose).

import grpc from '@grpc/grpc-js';
import { DeadlineExceededError, LockLostError, fromStatus, codeName } from './errors.js';
import { Lock, now } from './wire.js';

/**
 * How long before the last known validity ends the signal aborts when no
 * extension arrived: a tenth of the ttl, from 50 ms to 2 s (as redlockctl
 * stops its command). It covers the time an event spends in transit.
 */
export function stopMargin(ttlMs) {
  return Math.min(2000, Math.max(50, ttlMs / 10));
}

/** A lock held by an open Hold session. */
export class Lease {
  /** @internal Use `Client.hold` or `Client.using`. */
  constructor(call, wire, ttlMs, releaseTimeoutMs) {
    this._call = call;
    this._ttlMs = ttlMs;
    this._releaseTimeoutMs = releaseTimeoutMs;
    this._controller = new AbortController();
    this._timer = null;
    this._releasing = null; // { resolve, reject } while release() waits
    this._released = null; // the promise release() returns, once called
    /** The lock as last granted or extended (validity counted from arrival). */
    this.lock = new Lock(wire, now());
    /** How many extensions the daemon has made. */
    this.extensions = 0;
    /**
     * True once the daemon said it is stopping: the lock is still held and
     * extended until the drain ends, then lost (no longer extended, it
     * expires with its ttl; the signal aborts).
     */
    this.draining = false;
    this._arm();
  }

  /** The lock's fencing token: pass it with every write made under the lock. */
  get fence() {
    return this.lock.fence;
  }

  /** The resource locked. */
  get resource() {
    return this.lock.resource;
  }

  /** Aborted as soon as the lock is no longer held; its reason is a LockLostError. */
  get signal() {
    return this._controller.signal;
  }

  /**
   * Throws the LockLostError if the lock is gone; call it right before each
   * step that must not overlap another holder's. It reads the clock: past
   * the last validity (less the stop margin) the lease ends now, even where
   * the timer that aborts the signal has not run yet (a process resumed
   * after a pause runs its own due timers in their order, and the work's
   * tick may come first).
   */
  check() {
    if (!this.signal.aborted && now() >= this.lock.validUntil - stopMargin(this._ttlMs)) {
      this._lapse();
    }
    this._controller.signal.throwIfAborted();
  }

  /**
   * Releases the lock: sends `release` and waits for the daemon's
   * `released`. Resolves to `was_held` (false: the lock had expired or was
   * already gone, and the work may have overlapped another holder's).
   * Past the client's deadline the stream is cancelled, which makes the
   * daemon release too, and the promise rejects with DeadlineExceededError.
   */
  release() {
    if (this._released) return this._released;
    if (this.signal.aborted) {
      this._released = Promise.resolve(false);
      return this._released;
    }
    this._released = new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this._releasing = null;
        this._gone('released at the client\'s request (no answer)');
        this._call.cancel();
        const details = `no \`released\` within ${this._releaseTimeoutMs} ms; the session was cancelled`;
        reject(new DeadlineExceededError(`release: ${details}`, grpc.status.DEADLINE_EXCEEDED, details));
      }, this._releaseTimeoutMs);
      const settle = (fn) => (value) => {
        clearTimeout(timer);
        this._releasing = null;
        fn(value);
      };
      this._releasing = { resolve: settle(resolve), reject: settle(reject) };
      this._call.write({ release: {} });
    });
    return this._released;
  }

  /** @internal Routes one stream event (see Client.hold). */
  _event(event) {
    switch (event.event) {
      case 'extended':
        if (this.signal.aborted) break;
        // Read after the last validity lapsed: a lapse is final.
        if (now() >= this.lock.validUntil - stopMargin(this._ttlMs)) {
          this._lapse();
          break;
        }
        this.lock = new Lock(event.extended, now());
        this.extensions += 1;
        this._arm();
        break;
      case 'draining':
        // Not an end: the daemon keeps the lock until the drain ends.
        this.draining = true;
        break;
      case 'lost':
        this._gone(`lost: ${event.lost.reason}`);
        break;
      case 'released':
        if (this._releasing) {
          const { resolve } = this._releasing;
          this._gone('released at the client\'s request');
          this._call.end();
          resolve(event.released.was_held);
        } else {
          this._gone('released by the daemon, unrequested');
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
    if (this._releasing) this._releasing.reject(fromStatus(error, 'release'));
    this._gone(reason, error.code);
  }

  /** @internal The stream ended. */
  _end() {
    if (this._releasing) {
      const details = 'the session ended unanswered';
      this._releasing.reject(new LockLostError(`release: ${details}`, grpc.status.UNAVAILABLE, details, details));
    }
    this._gone('the session ended');
  }

  /**
   * Aborts the signal once, with the first reason; `code` is the stream's
   * status when it broke, else FAILED_PRECONDITION (the lock is not held).
   */
  _gone(reason, code = grpc.status.FAILED_PRECONDITION) {
    clearTimeout(this._timer);
    if (this.signal.aborted) return;
    const details = `the lock on ${this.lock.resource} is no longer held: ${reason}`;
    this._controller.abort(new LockLostError(details, code, details, reason));
  }

  /** (Re)starts the timer that aborts when the validity runs out unrenewed. */
  _arm() {
    clearTimeout(this._timer);
    const delay = this.lock.validUntil - stopMargin(this._ttlMs) - now();
    this._timer = setTimeout(() => this._lapse(), Math.max(0, delay));
    this._timer.unref?.();
  }

  /** The validity ran out unrenewed: the lease ends. */
  _lapse() {
    this._gone('no extension arrived before the validity ran out');
    // Cancelling makes a daemon that still hears us release the lock.
    this._call.cancel();
  }
}
