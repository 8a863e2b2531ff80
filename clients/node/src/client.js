// The client: one gRPC channel to a daemon, the four unary calls, Hold
// sessions (`hold` for a lease, `using` for a callback), and leader election
// (`campaign`, `leader`, `observe`, `resign`; `proclaim` on a Leadership).

import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import { DeadlineExceededError, LockLostError, UnavailableError, fromStatus, invalidArgument } from './errors.js';
import { Leader, Leadership, stepsForward } from './election.js';
import { Lease } from './lease.js';
import { Lock, fromDuration, now, optionalString, requireString, toDuration } from './wire.js';

/** `limit` as the contract takes it: a whole number, 0 (default) to 2^32 - 1. */
function semaphoreLimit(limit) {
  if (limit === undefined) return 0;
  if (!Number.isInteger(limit) || limit < 0 || limit > 0xffffffff) {
    throw invalidArgument('limit', `must be a whole number from 0, got ${String(limit)}`);
  }
  return limit;
}

/** With a limit above 1, a requestId is refused before any call. */
function noRequestId(requestId) {
  if (requestId !== undefined) throw invalidArgument('requestId', 'not supported with a limit above 1');
  return '';
}

/** A fresh request_id: 128 random bits, URL-safe base64 (22 characters). */
export function newRequestId() {
  return randomBytes(16).toString('base64url');
}

/** How long the background release of an unanswered acquire may take, in ms. */
export const RELEASE_TIMEOUT_MS = 1000;

/**
 * The token the daemon gives the lock of `requestId` on `resource`: the
 * first 128 bits, in lowercase hex, of SHA-256("redlockd/v1/token" 0x00
 * resource 0x00 request_id); a shared (read) lock's starts with `s`.
 */
export function derivedToken(resource, requestId, shared = false) {
  const digest = createHash('sha256')
    .update('redlockd/v1/token\0')
    .update(resource)
    .update('\0')
    .update(requestId)
    .digest('hex')
    .slice(0, 32);
  return shared ? `s${digest}` : digest;
}

/**
 * The token an acquisition will have, known before any answer: derived from
 * its request id. Null without one (a semaphore's permit, several resources).
 */
function tokenOfRequest(request) {
  if (!request.request_id || !request.resource || request.resources) return null;
  return derivedToken(request.resource, request.request_id, request.mode === 1);
}

/**
 * Whether a failed call's status is the daemon's own answer rather than one
 * grpc-js made itself (the deadline fired first, the connection failed).
 * The daemon's status arrives in trailers, whose metadata grpc-js keeps on
 * the error (a trailers-only answer carries at least its content-type); a
 * status grpc-js makes has empty metadata. When unsure, false: a release of
 * a token that holds nothing is harmless.
 */
function answeredByDaemon(error) {
  const metadata = (error?.cause ?? error)?.metadata;
  return metadata instanceof grpc.Metadata && Object.keys(metadata.getMap()).length > 0;
}

/** The contract, shipped inside the package (a copy of proto/redlock/v1/). */
const PROTO_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'proto');

const definition = protoLoader.loadSync(['redlock/v1/lock.proto', 'redlock/v1/election.proto'], {
  includeDirs: [PROTO_DIR],
  keepCase: true, // field names as in the contract: was_held
  longs: String, // uint64 fences as decimal strings, turned into BigInt
  defaults: true,
  oneofs: true, // event.event names the field that is set
});
const { LockService, ElectionService } = grpc.loadPackageDefinition(definition).redlock.v1;

/** Checks an optional AbortSignal option. */
function optionalSignal(signal) {
  if (signal === undefined || signal === null) return null;
  if (!(signal instanceof AbortSignal)) throw invalidArgument('signal', 'must be an AbortSignal');
  return signal;
}

/** `AcquireRequest.mode` for the `shared` option (absent: exclusive). */
function lockMode(shared) {
  if (shared === undefined || shared === false) return 0;
  if (shared === true) return 1;
  throw invalidArgument('shared', 'must be a boolean');
}

/** Default deadline of a call, beyond the wait it asks for. */
export const DEFAULT_DEADLINE_MS = 10_000;

function readPem(value, field) {
  if (value === undefined || value === null) return null;
  if (Buffer.isBuffer(value)) return value;
  if (typeof value === 'string') return Buffer.from(value);
  throw invalidArgument(field, 'must be PEM text (a string or a Buffer); read the file yourself');
}

/** The address without a scheme, and whether TLS was asked for by it. */
function target(address) {
  requireString(address, 'address');
  const match = /^(https?):\/\/(.+?)\/?$/.exec(address);
  if (!match) return { host: address, https: false };
  return { host: match[2], https: match[1] === 'https' };
}

/** A connection to one redlockd daemon (any replica of a deployment). */
export class Client {
  /**
   * @param {string} address `host:port`, `http://host:port`, or `https://host:port` (TLS)
   * @param {object} [options] see index.d.ts (ClientOptions)
   */
  constructor(address, options = {}) {
    const { host, https } = target(address);
    const rootCert = readPem(options.rootCert, 'rootCert');
    const privateKey = readPem(options.privateKey, 'privateKey');
    const certChain = readPem(options.certChain, 'certChain');
    if (Boolean(privateKey) !== Boolean(certChain)) {
      throw invalidArgument(privateKey ? 'certChain' : 'privateKey', 'a client certificate needs both privateKey and certChain');
    }
    const tls = https || Boolean(rootCert || privateKey);
    const credentials = tls
      ? grpc.credentials.createSsl(rootCert, privateKey, certChain)
      : grpc.credentials.createInsecure();
    if (options.token !== undefined) requireString(options.token, 'token');
    this._authorization = options.token ? `Bearer ${options.token}` : null;
    this.deadlineMs = options.deadlineMs ?? DEFAULT_DEADLINE_MS;
    toDuration(this.deadlineMs, 'deadlineMs');
    this._stub = new LockService(host, credentials, options.channelOptions ?? {});
    // The same channel (one connection) for the elections.
    this._elections = new ElectionService(host, credentials, { channelOverride: this._stub.getChannel() });
    /** Open Hold, Campaign and Observe calls, cancelled by close() so that their locks are released. */
    this._sessions = new Set();
    /** Background releases of unanswered acquires: token -> a promise that never rejects. */
    this._releases = new Map();
    this._backgroundReleases = 0;
    this._closed = false;
  }

  /**
   * Takes the lock on `resource` for `ttlMs`, waiting up to `waitMs` while
   * someone else holds it. The Lock's validity counts from when the request
   * was sent. LockHeldError when it stayed held for the whole wait.
   *
   * After a deadline, nothing is left locked: when the call ends without the
   * daemon's answer (its deadline ran out in the client, the connection
   * broke), the client releases what its request id may have got (the token
   * is derived from it), in the background within a second. When the daemon
   * answered, DEADLINE_EXCEEDED included, it released any late grant itself.
   */
  async acquire(resource, options = {}) {
    const request = this._acquireRequest(resource, options);
    const token = tokenOfRequest(request);
    // A retry with the same request id gets the same token: it must not be
    // released by the background release of the unanswered call before it.
    if (token !== null && this._releases.has(token)) await this._releases.get(token);
    const sent = now();
    let answer;
    try {
      answer = await this._unary('Acquire', request, this._deadline(options));
    } catch (error) {
      if (token !== null && !answeredByDaemon(error)) this._releaseInBackground(request.resource, token);
      throw error;
    }
    return new Lock(answer.lock, sent);
  }

  /**
   * Releases what an unanswered acquire may have got, without waiting:
   * bounded by RELEASE_TIMEOUT_MS, its outcome ignored (and never logged:
   * the token is a secret).
   */
  _releaseInBackground(resource, token) {
    if (this._closed) return;
    this._backgroundReleases += 1;
    const done = this._unary('Release', { resource, token }, RELEASE_TIMEOUT_MS).then(
      () => {},
      () => {},
    );
    this._releases.set(token, done);
    done.then(() => {
      if (this._releases.get(token) === done) this._releases.delete(token);
    });
  }

  /**
   * Resets the lock's time to live to `ttlMs`, if its token still holds it;
   * a new Lock (same token and fence). LockNotHeldError if it does not.
   */
  async extend(lock, options = {}) {
    const request = { ...this._identity(lock), ttl: toDuration(options.ttlMs, 'ttlMs') };
    const sent = now();
    const answer = await this._unary('Extend', request, this._deadline(options, 0));
    return new Lock(answer.lock, sent);
  }

  /**
   * Gives the lock up. Resolves to `wasHeld`: false means it had expired
   * or been taken over first (work done under it may have overlapped).
   */
  async release(lock, options = {}) {
    const answer = await this._unary('Release', this._identity(lock), this._deadline(options, 0));
    return answer.was_held;
  }

  /**
   * Whether `lock` (resource and token) is still the current holder, and
   * for how long at least (`validUntil` counted from when it was asked).
   */
  async validate(lock, options = {}) {
    const sent = now();
    const answer = await this._unary('Validate', this._identity(lock), this._deadline(options, 0));
    const validityMs = answer.held ? fromDuration(answer.validity) : 0;
    return { held: answer.held, validityMs, validUntil: sent + validityMs };
  }

  /**
   * Opens a Hold session and waits for the lock: a Lease whose `signal`
   * aborts once the lock is gone. Release it with `lease.release()`.
   */
  async hold(resource, options = {}) {
    const request = this._acquireRequest(resource, options);
    const ttlMs = options.ttlMs;
    const deadline = this._deadline(options);
    const call = this._stub.Hold(this._metadata());
    this._sessions.add(call);
    call.once('status', () => this._sessions.delete(call));
    return new Promise((resolve, reject) => {
      let lease = null;
      let failed = false;
      const fail = (error) => {
        clearTimeout(timer);
        failed = true;
        reject(error);
      };
      const timer = setTimeout(() => {
        call.cancel();
        const details = `no lock within ${Math.round(deadline)} ms`;
        fail(new DeadlineExceededError(`Hold: ${details}`, grpc.status.DEADLINE_EXCEEDED, details));
      }, deadline);
      call.on('data', (event) => {
        if (lease) return lease._event(event);
        if (failed) return undefined;
        if (event.event === 'acquired') {
          clearTimeout(timer);
          lease = new Lease(call, event.acquired, ttlMs, this.deadlineMs);
          return resolve(lease);
        }
        call.cancel();
        const details = `\`${event.event}\` before \`acquired\``;
        fail(new LockLostError(`Hold: ${details}`, grpc.status.INTERNAL, details, details));
      });
      call.on('error', (error) => {
        if (lease) lease._error(error);
        // Before the grant, the call's final status (below) says why.
      });
      call.on('end', () => {
        if (lease) lease._end();
      });
      call.on('status', (status) => {
        if (lease || failed) return;
        if (status.code !== grpc.status.OK) return fail(fromStatus(status, 'Hold'));
        const details = 'the session ended before the lock was acquired';
        return fail(new LockLostError(`Hold: ${details}`, grpc.status.UNAVAILABLE, details, details));
      });
      call.write({ acquire: request });
    });
  }

  /**
   * Runs `fn(signal, lock)` while holding the lock through a Hold session.
   * `signal` aborts as soon as the lock is gone: stop the work then. After
   * `fn` settles the lock is released (and `released` awaited); returns
   * what `fn` returned, or rethrows what it threw.
   */
  async using(resource, options, fn) {
    if (typeof fn !== 'function') throw invalidArgument('fn', 'must be a function (signal, lock) => ...');
    const lease = await this.hold(resource, options);
    let value;
    try {
      value = await fn(lease.signal, lease.lock);
    } catch (error) {
      // The callback's error matters more than a failed release: the lock
      // then ends with the cancelled session or its ttl.
      await lease.release().catch(() => {});
      throw error;
    }
    await lease.release();
    return value;
  }

  /**
   * Stands as a candidate in the election `name` through a Campaign
   * session and waits until elected (candidates are served first come,
   * first served, for as long as it takes): resolves to a Leadership the
   * daemon keeps while the session is open, whose `signal` aborts once it
   * is gone. `options.value` is what the leader publishes (an address, a
   * pod name); `options.ttlMs` (required) how long a frozen or killed
   * leader keeps the leadership, so about how long a standby waits to take
   * over. `options.signal` withdraws the candidacy when it aborts before
   * the election (the promise rejects with its reason); it does not end a
   * leadership won: `resign()` does.
   */
  async campaign(name, options = {}) {
    const start = {
      name: requireString(name, 'name'),
      value: optionalString(options.value, 'value'),
      ttl: toDuration(options.ttlMs, 'ttlMs'),
    };
    const ttlMs = options.ttlMs;
    const signal = optionalSignal(options.signal);
    signal?.throwIfAborted();
    const call = this._elections.Campaign(this._metadata());
    this._sessions.add(call);
    call.once('status', () => this._sessions.delete(call));
    return new Promise((resolve, reject) => {
      let leadership = null;
      let failed = false;
      const withdraw = () => {
        if (leadership || failed) return;
        // Cancelled before `elected`: the daemon withdraws the candidate
        // (and resigns a leadership granted an instant before).
        call.cancel();
        fail(signal.reason);
      };
      const fail = (error) => {
        failed = true;
        signal?.removeEventListener('abort', withdraw);
        reject(error);
      };
      signal?.addEventListener('abort', withdraw, { once: true });
      call.on('data', (event) => {
        if (leadership) return leadership._event(event);
        if (failed) return undefined;
        if (event.event === 'elected') {
          signal?.removeEventListener('abort', withdraw);
          leadership = new Leadership(call, event.elected, ttlMs, this.deadlineMs, (request, callOptions) =>
            this._unary('Proclaim', request, this._deadline(callOptions, 0), this._elections));
          return resolve(leadership);
        }
        call.cancel();
        const details = `\`${event.event}\` before \`elected\``;
        return fail(new LockLostError(`Campaign: ${details}`, grpc.status.INTERNAL, details, details));
      });
      call.on('error', (error) => {
        if (leadership) leadership._error(error);
        // Before the election, the call's final status (below) says why.
      });
      call.on('end', () => {
        if (leadership) leadership._end();
      });
      call.on('status', (status) => {
        if (leadership || failed) return;
        if (status.code !== grpc.status.OK) return fail(fromStatus(status, 'Campaign'));
        const details = 'the session ended before the election';
        return fail(new UnavailableError(`Campaign: ${details}`, grpc.status.UNAVAILABLE, details));
      });
      call.write({ campaign: start });
    });
  }

  /**
   * The election's current leader, read from a majority of masters: a
   * Leader (its `validUntil` counted from when it was asked), or null when
   * it has none.
   */
  async leader(name, options = {}) {
    const request = { name: requireString(name, 'name') };
    const sent = now();
    const answer = await this._unary('Leader', request, this._deadline(options, 0), this._elections);
    return answer.has_leader ? new Leader(answer.leader, sent) : null;
  }

  /**
   * The election's leader changes, for `for await`: the current leader
   * first (null: none), then each change, a new leader (a term above every
   * one given before), a new value of the same term (its leader's
   * `proclaim()`, a higher `valueVersion`) or null (no leader now). It ends quietly when the
   * loop breaks, `options.signal` aborts or the client is closed; otherwise
   * it throws: UnavailableError when too few masters answered or the
   * daemon ended the stream (it is stopping): observe again, perhaps on
   * another replica, and ignore (term, valueVersion) not above the last seen.
   */
  async *observe(name, options = {}) {
    const request = { name: requireString(name, 'name') };
    const signal = optionalSignal(options.signal);
    if (signal?.aborted || this._closed) return;
    const call = this._elections.Observe(request, this._metadata());
    this._sessions.add(call);
    let stopped = false;
    const stop = () => {
      stopped = true;
      call.cancel();
    };
    signal?.addEventListener('abort', stop, { once: true });
    let told = null;
    try {
      for await (const response of call) {
        if (stopped) return;
        const leader = response.has_leader ? new Leader(response.leader, now()) : null;
        if (!stepsForward(told, leader)) continue;
        told = leader
          ? { term: leader.term, valueVersion: leader.valueVersion, leader: true }
          : { term: told?.term ?? 0n, valueVersion: told?.valueVersion ?? 0n, leader: false };
        yield leader;
      }
    } catch (error) {
      if (stopped || this._closed) return;
      throw fromStatus(error, 'Observe');
    } finally {
      signal?.removeEventListener('abort', stop);
      this._sessions.delete(call);
      call.cancel();
    }
    if (stopped || this._closed) return;
    const details = 'the daemon ended the stream (it is stopping)';
    throw new UnavailableError(`Observe: ${details}`, grpc.status.UNAVAILABLE, details);
  }

  /**
   * Ends the leadership of the election `name` that `token` proves (a
   * Leadership's token), from outside its Campaign session: the next
   * candidate may be elected at once, and that session learns it at its
   * next extension (its signal aborts, `lost`). Resolves to `was_leader`:
   * false when the leadership was already over.
   */
  async resign(name, token, options = {}) {
    const request = { name: requireString(name, 'name'), token: requireString(token, 'token') };
    const answer = await this._unary('Resign', request, this._deadline(options, 0), this._elections);
    return answer.was_leader;
  }

  /**
   * Closes the channel. Open sessions are cancelled: the daemon releases
   * their locks and their signals abort. The background releases of
   * unanswered acquires finish first (a second at most): the returned
   * promise resolves once the channel is closed.
   */
  close() {
    this._closed = true;
    for (const call of this._sessions) call.cancel();
    const pending = [...this._releases.values()];
    if (pending.length === 0) {
      this._stub.close();
      return Promise.resolve();
    }
    return Promise.all(pending).then(() => this._stub.close());
  }

  _acquireRequest(resource, options) {
    if (Array.isArray(resource)) {
      // Several resources at once, all or none: the daemon offers no
      // requestId for them, so none is drawn (one given is passed on, and refused).
      if (resource.length === 0) throw invalidArgument('resources', 'must not be empty');
      return {
        resources: resource.map((name) => requireString(name, 'resources')),
        ttl: toDuration(options.ttlMs, 'ttlMs'),
        wait: toDuration(options.waitMs ?? 0, 'waitMs'),
        owner: optionalString(options.owner, 'owner'),
        request_id: options.requestId === undefined ? '' : requireString(options.requestId, 'requestId'),
      };
    }
    return {
      resource: requireString(resource, 'resource'),
      ttl: toDuration(options.ttlMs, 'ttlMs'),
      wait: toDuration(options.waitMs ?? 0, 'waitMs'),
      owner: optionalString(options.owner, 'owner'),
      // Every acquisition is idempotent: a caller that retries after an
      // error passes the same requestId again and gets the lock it holds.
      // Except a semaphore's permit (limit above 1), which the daemon does
      // not make idempotent: no request id is sent then.
      request_id: semaphoreLimit(options.limit) > 1
        ? noRequestId(options.requestId)
        : options.requestId === undefined ? newRequestId() : requireString(options.requestId, 'requestId'),
      limit: semaphoreLimit(options.limit),
      // LockMode: 0 LOCK_MODE_EXCLUSIVE (the default), 1 LOCK_MODE_SHARED.
      mode: lockMode(options.shared),
    };
  }

  _identity(lock) {
    if (!lock || typeof lock !== 'object') throw invalidArgument('lock', 'must be a Lock (or { resource, token })');
    return { resource: requireString(lock.resource, 'resource'), token: requireString(lock.token, 'token') };
  }

  /** The call's own `deadlineMs` (total), else the client's beyond the wait. */
  _deadline(options, fallbackWait) {
    if (options.deadlineMs !== undefined) {
      toDuration(options.deadlineMs, 'deadlineMs');
      return options.deadlineMs;
    }
    return (fallbackWait ?? options.waitMs ?? 0) + this.deadlineMs;
  }

  _metadata() {
    const metadata = new grpc.Metadata();
    if (this._authorization) metadata.set('authorization', this._authorization);
    return metadata;
  }

  _unary(method, request, deadlineMs, stub = this._stub) {
    return new Promise((resolve, reject) => {
      stub[method](request, this._metadata(), { deadline: Date.now() + deadlineMs }, (error, answer) =>
        error ? reject(fromStatus(error, method)) : resolve(answer),
      );
    });
  }
}
