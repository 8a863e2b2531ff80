// The Node client's conformance runner: runs clients/conformance/scenarios.json
// through redlockd-client's public API (Client, Lease, campaign, Leadership,
// leader, observe, resign, the error classes), as exported by the package's
// entry point (clients/node/src/index.js).
//
// Usage: node runner.mjs SCENARIOS ENV (started by clients/conformance/harness.py,
// whose docstring describes ENV and the line protocol on stdout/stdin).

import fs from 'node:fs';
import readline from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  Client,
  DeadlineExceededError,
  InvalidArgumentError,
  LockHeldError,
  LockLostError,
  LockNotHeldError,
  PermissionDeniedError,
  RedlockdError,
  ResourceExhaustedError,
  UnauthenticatedError,
  UnavailableError,
} from '../../../node/src/index.js';

/** The scenario language's word for each error class of the package. */
const KINDS = [
  [LockHeldError, 'held_elsewhere'],
  [LockNotHeldError, 'not_held'],
  [UnavailableError, 'unavailable'],
  [DeadlineExceededError, 'deadline'],
  [InvalidArgumentError, 'invalid_argument'],
  [ResourceExhaustedError, 'resource_exhausted'],
  [UnauthenticatedError, 'unauthenticated'],
  [PermissionDeniedError, 'permission_denied'],
  [LockLostError, 'lost'],
];
/** Longest a step that waits for an outcome may take by default, in ms. */
const STEP_LIMIT_MS = 30_000;

class Failure extends Error {}

function kindOf(error) {
  for (const [cls, word] of KINDS) if (error instanceof cls) return word;
  return `other(${error?.constructor?.name}: ${error?.message})`;
}

const [scenariosFile, envFile] = process.argv.slice(2);
const scenarios = JSON.parse(fs.readFileSync(scenariosFile, 'utf8')).scenarios;
const env = JSON.parse(fs.readFileSync(envFile, 'utf8'));

// The harness's answers to FAULT lines, one per line of stdin.
const answers = [];
const waiting = [];
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  if (waiting.length > 0) waiting.shift()(line);
  else answers.push(line);
});
function nextAnswer() {
  if (answers.length > 0) return Promise.resolve(answers.shift());
  return new Promise((resolve) => waiting.push(resolve));
}

const clients = new Map();
function client(name) {
  if (!clients.has(name)) {
    const spec = env.clients[name];
    const options = {};
    if (spec.token) options.token = spec.token;
    if (spec.ca_file) options.rootCert = fs.readFileSync(spec.ca_file);
    const address = spec.tls && !spec.ca_file ? `https://${spec.address}` : spec.address;
    clients.set(name, new Client(address, options));
  }
  return clients.get(name);
}

const resourceOf = (step) => String(step.resource).replaceAll('{prefix}', env.prefix);
const electionOf = (step) => String(step.name).replaceAll('{prefix}', env.prefix);

/** Runs `call`; checks the error the step expects, or that there is none. */
async function outcome(step, call) {
  let value;
  try {
    value = await call();
  } catch (error) {
    if (!(error instanceof RedlockdError)) throw error;
    const got = kindOf(error);
    if (step.error === undefined) throw new Failure(`expected success, got ${got}: ${error.message}`);
    if (got !== step.error) throw new Failure(`expected ${step.error}, got ${got}: ${error.message}`);
    if (step.field !== undefined && error.field !== step.field) {
      throw new Failure(`expected field ${step.field}, got ${error.field} (${error.details})`);
    }
    return undefined;
  }
  if (step.error !== undefined && !step.may_succeed) throw new Failure(`expected ${step.error}, got success`);
  return value;
}

function fenceOf(state, name) {
  return typeof name === 'number' ? BigInt(name) : state.fences.get(name);
}

function checkLock(step, state, lock) {
  if (step.fence_above !== undefined) {
    const floor = fenceOf(state, step.fence_above);
    if (!(lock.fence > floor)) throw new Failure(`fence ${lock.fence} not above ${floor}`);
  }
  if (step.fence_equal !== undefined) {
    const other = fenceOf(state, step.fence_equal);
    if (lock.fence !== other) throw new Failure(`fence ${lock.fence} differs from ${other}`);
  }
  if (step.save !== undefined) {
    state.locks.set(step.save, lock);
    state.fences.set(step.save, lock.fence);
  }
  if (step.lease !== undefined) state.fences.set(step.lease, lock.fence);
}

function acquireCall(step) {
  const options = { ttlMs: step.ttl_ms };
  if (step.wait_ms !== undefined) options.waitMs = step.wait_ms;
  if (step.deadline_ms !== undefined) options.deadlineMs = step.deadline_ms;
  const c = client(step.client);
  const resource = resourceOf(step);
  return () => c.acquire(resource, options);
}

function holdCall(step) {
  const options = { ttlMs: step.ttl_ms, deadlineMs: step.deadline_ms ?? STEP_LIMIT_MS };
  if (step.wait_ms !== undefined) options.waitMs = step.wait_ms;
  const c = client(step.client);
  const resource = resourceOf(step);
  return () => c.hold(resource, options);
}

async function until(predicate, ms, what) {
  const limit = performance.now() + ms;
  while (!(await predicate())) {
    if (performance.now() > limit) throw new Failure(`${what} not within ${ms} ms`);
    await sleep(10);
  }
}

async function runStep(step, state) {
  switch (step.op) {
    case 'acquire': {
      const lock = await outcome(step, acquireCall(step));
      if (lock !== undefined && step.may_succeed) {
        // Granted after all (the race went the other way): released at
        // once, so that the step leaves nothing held either way.
        if (!(await client(step.client).release(lock))) {
          throw new Failure('the lock granted was no longer held when released');
        }
      } else if (lock !== undefined) checkLock(step, state, lock);
      break;
    }
    case 'acquire_async': {
      const promise = acquireCall(step)();
      promise.catch(() => {}); // handled by the await step
      state.pending.set(step.pending, promise);
      break;
    }
    case 'await': {
      const promise = state.pending.get(step.pending);
      const within = step.within_ms ?? STEP_LIMIT_MS;
      const timeout = sleep(within).then(() => {
        throw new Failure(`the pending call did not finish within ${within} ms`);
      });
      const lock = await outcome(step, () => Promise.race([promise, timeout]));
      if (lock !== undefined) checkLock(step, state, lock);
      break;
    }
    case 'extend': {
      const old = state.locks.get(step.lock);
      const lock = await outcome(step, () => client(step.client).extend(old, { ttlMs: step.ttl_ms }));
      if (lock !== undefined) checkLock(step, state, lock);
      break;
    }
    case 'release': {
      const lock = state.locks.get(step.lock);
      const wasHeld = await outcome(step, () => client(step.client).release(lock));
      if (wasHeld !== undefined && step.was_held !== undefined && wasHeld !== step.was_held) {
        throw new Failure(`was_held ${wasHeld}, expected ${step.was_held}`);
      }
      break;
    }
    case 'validate': {
      const lock = state.locks.get(step.lock);
      const validity = await outcome(step, () => client(step.client).validate(lock));
      if (validity !== undefined && step.held !== undefined && validity.held !== step.held) {
        throw new Failure(`held ${validity.held}, expected ${step.held}`);
      }
      break;
    }
    case 'wait_expired': {
      const lock = state.locks.get(step.lock);
      await until(async () => !(await client(step.client).validate(lock)).held, step.within_ms, 'expiry');
      break;
    }
    case 'hold': {
      const lease = await outcome(step, holdCall(step));
      if (lease !== undefined) {
        state.leases.set(step.lease, lease);
        checkLock(step, state, lease);
      }
      break;
    }
    case 'hold_async': {
      const promise = holdCall(step)();
      promise.catch(() => {}); // handled by the await_hold step
      state.pending.set(step.pending, promise);
      break;
    }
    case 'await_hold': {
      const promise = state.pending.get(step.pending);
      const within = step.within_ms ?? STEP_LIMIT_MS;
      const timeout = sleep(within).then(() => {
        throw new Failure(`the pending session was not granted or refused within ${within} ms`);
      });
      const lease = await outcome(step, () => Promise.race([promise, timeout]));
      if (lease !== undefined) {
        state.leases.set(step.lease, lease);
        checkLock(step, state, lease);
      }
      break;
    }
    case 'check': {
      const lease = state.leases.get(step.lease);
      await outcome(step, () => lease.check());
      break;
    }
    case 'release_lease': {
      const lease = state.leases.get(step.lease);
      state.leases.delete(step.lease);
      const wasHeld = await outcome(step, () => lease.release());
      if (step.was_held !== undefined && wasHeld !== step.was_held) {
        throw new Failure(`was_held ${wasHeld}, expected ${step.was_held}`);
      }
      break;
    }
    case 'await_lost': {
      const lease = state.leases.get(step.lease);
      await until(() => lease.signal.aborted, step.within_ms, 'lost');
      break;
    }
    case 'await_draining': {
      const lease = state.leases.get(step.lease);
      await until(() => lease.draining, step.within_ms, 'draining');
      break;
    }
    case 'campaign':
    case 'campaign_async':
    case 'expect_not_elected':
    case 'await_elected':
    case 'expect_term_above':
    case 'leader':
    case 'resign':
    case 'resign_token':
    case 'proclaim':
    case 'await_leadership_lost':
    case 'observe':
    case 'observe_next':
    case 'close_observation':
      await electionStep(step, state);
      break;
    case 'pause':
      await sleep(step.ms);
      break;
    case 'fault': {
      process.stdout.write(`FAULT ${step.name}\n`);
      const answer = (await nextAnswer()).trim();
      if (answer !== 'ok') throw new Failure(`the harness could not inject ${step.name}: ${answer}`);
      break;
    }
    default:
      throw new Failure(`unknown op ${step.op}`);
  }
}

// ---- Elections (the README's election steps).

/**
 * A campaign whose wait for the election is bounded by `limitMs`: past it
 * the candidacy is withdrawn (the client's `signal`) and the promise rejects
 * with a DeadlineExceededError. The bound ends with the election: it never
 * ends a leadership won. `withdraw()` withdraws it at once (harmless once
 * elected); `box` gets `value` (the Leadership) or `error` once settled.
 */
function campaignCall(step, limitMs) {
  const c = client(step.client);
  const name = electionOf(step);
  const controller = new AbortController();
  const timer = setTimeout(() => {
    const details = `not elected within ${limitMs} ms; the candidacy was withdrawn`;
    controller.abort(new DeadlineExceededError(`Campaign: ${details}`, 4, details));
  }, limitMs);
  const box = {};
  const options = { value: step.value ?? '', ttlMs: step.ttl_ms, signal: controller.signal };
  const promise = c.campaign(name, options).then(
    (leadership) => {
      clearTimeout(timer);
      box.value = leadership;
      return leadership;
    },
    (error) => {
      clearTimeout(timer);
      box.error = error;
      throw error;
    },
  );
  promise.catch(() => {}); // handled by the step that awaits it
  const withdraw = () => {
    clearTimeout(timer);
    controller.abort(new Error('withdrawn at the scenario\'s end'));
  };
  return { promise, box, withdraw };
}

/** Records a leadership under the step's `as` (its term too); checks `term_above`. */
function elected(step, state, leadership) {
  state.leaderships.set(step.as, leadership);
  state.fences.set(step.as, leadership.term);
  if (step.term_above !== undefined) {
    const floor = fenceOf(state, step.term_above);
    if (!(leadership.term > floor)) throw new Failure(`term ${leadership.term} not above ${floor}`);
  }
}

/** `none`, or `value` and `term` (a leadership's name or a number). */
function checkLeader(step, state, leader) {
  if (step.none) {
    if (leader !== null) throw new Failure(`expected no leader, got ${leader.value} (term ${leader.term})`);
    return;
  }
  if (leader === null) throw new Failure('expected a leader, got none');
  if (step.value !== undefined && leader.value !== step.value) {
    throw new Failure(`leader value ${JSON.stringify(leader.value)}, expected ${JSON.stringify(step.value)}`);
  }
  if (step.term !== undefined) {
    const term = fenceOf(state, step.term);
    if (leader.term !== term) throw new Failure(`leader term ${leader.term}, expected ${term}`);
  }
}

/** Resolves to true once `promise` settles, or to false after `ms`. */
async function settledWithin(promise, ms) {
  const controller = new AbortController();
  const settled = promise.then(() => true, () => true);
  const timeout = sleep(ms, false, { signal: controller.signal }).catch(() => false);
  const done = await Promise.race([settled, timeout]);
  controller.abort();
  return done;
}

/**
 * An observation: `client.observe`'s async generator read in the
 * background into a queue of `{ leader }`, `{ error }` or `{ ended }`;
 * `next(ms)` takes the next one (undefined if none came within ms).
 */
function observation(c, name) {
  const controller = new AbortController();
  const queue = [];
  let waiter = null;
  const push = (item) => {
    if (waiter) waiter(item);
    else queue.push(item);
  };
  (async () => {
    try {
      for await (const leader of c.observe(name, { signal: controller.signal })) push({ leader });
      if (!controller.signal.aborted) push({ ended: true });
    } catch (error) {
      push({ error });
    }
  })();
  return {
    last: null, // { term, valueVersion } of the last leader it yielded
    close: () => controller.abort(),
    next(ms) {
      if (queue.length > 0) return Promise.resolve(queue.shift());
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          waiter = null;
          resolve(undefined);
        }, Math.max(0, ms));
        waiter = (item) => {
          clearTimeout(timer);
          waiter = null;
          resolve(item);
        };
      });
    },
  };
}

async function electionStep(step, state) {
  switch (step.op) {
    case 'campaign': {
      const candidacy = campaignCall(step, step.deadline_ms ?? STEP_LIMIT_MS);
      const leadership = await outcome(step, async () => {
        const won = await candidacy.promise;
        // Resigned at the scenario's end even if the step expected an error.
        state.leaderships.set(step.as, won);
        return won;
      });
      if (leadership !== undefined) elected(step, state, leadership);
      break;
    }
    case 'campaign_async':
      state.candidates.set(step.pending, campaignCall(step, STEP_LIMIT_MS));
      break;
    case 'expect_not_elected': {
      const { promise, box } = state.candidates.get(step.pending);
      await settledWithin(promise, step.for_ms);
      if (box.value !== undefined) {
        throw new Failure(`elected while another leads: ${box.value.value} (term ${box.value.term})`);
      }
      if (box.error !== undefined) {
        throw new Failure(`the candidacy failed: ${kindOf(box.error)}: ${box.error.message}`);
      }
      break;
    }
    case 'await_elected': {
      const candidacy = state.candidates.get(step.pending);
      const within = step.within_ms ?? STEP_LIMIT_MS;
      if (!(await settledWithin(candidacy.promise, within))) {
        throw new Failure(`the pending candidate was not elected within ${within} ms`);
      }
      state.candidates.delete(step.pending);
      const { box } = candidacy;
      // Resigned at the scenario's end whatever the step expects.
      if (box.value !== undefined) state.leaderships.set(step.as, box.value);
      const leadership = await outcome(step, () => {
        if (box.error !== undefined) throw box.error;
        return box.value;
      });
      if (leadership !== undefined) elected(step, state, leadership);
      break;
    }
    case 'expect_term_above': {
      const term = fenceOf(state, step.leadership);
      const floor = fenceOf(state, step.than);
      if (!(term > floor)) throw new Failure(`term ${term} not above ${floor}`);
      break;
    }
    case 'leader': {
      const c = client(step.client);
      const name = electionOf(step);
      const box = {};
      const read = await outcome(step, async () => {
        box.leader = await c.leader(name);
        return true;
      });
      if (read !== undefined) checkLeader(step, state, box.leader);
      break;
    }
    case 'resign': {
      const leadership = state.leaderships.get(step.leadership);
      state.leaderships.delete(step.leadership);
      const wasLeader = await outcome(step, () => leadership.resign());
      if (wasLeader !== undefined && step.was_leader !== undefined && wasLeader !== step.was_leader) {
        throw new Failure(`was_leader ${wasLeader}, expected ${step.was_leader}`);
      }
      break;
    }
    case 'resign_token': {
      const c = client(step.client);
      const { token } = state.leaderships.get(step.leadership);
      const wasLeader = await outcome(step, () => c.resign(electionOf(step), token));
      if (wasLeader !== undefined && step.was_leader !== undefined && wasLeader !== step.was_leader) {
        throw new Failure(`was_leader ${wasLeader}, expected ${step.was_leader}`);
      }
      break;
    }
    case 'proclaim': {
      // The leadership's own Proclaim (its name, token and term); the refused kind is not_held.
      const leadership = state.leaderships.get(step.leadership);
      const version = await outcome(step, () => leadership.proclaim(step.value));
      if (version !== undefined && !(version > 0n)) {
        throw new Failure(`proclaimed with value_version ${version}, the campaign's own`);
      }
      break;
    }
    case 'await_leadership_lost': {
      const leadership = state.leaderships.get(step.leadership);
      await until(() => leadership.signal.aborted, step.within_ms, 'lost');
      const reason = leadership.signal.reason;
      if (!(reason instanceof LockLostError)) throw new Failure(`lost with ${kindOf(reason)}, expected lost`);
      break;
    }
    case 'observe':
      state.observations.set(step.as, observation(client(step.client), electionOf(step)));
      break;
    case 'observe_next': {
      const watched = state.observations.get(step.observation);
      const within = step.within_ms ?? STEP_LIMIT_MS;
      const limit = performance.now() + within;
      for (;;) {
        const item = await watched.next(limit - performance.now());
        if (item === undefined) throw new Failure(`no change observed within ${within} ms`);
        if (item.error !== undefined) {
          throw new Failure(`the observation ended: ${kindOf(item.error)}: ${item.error.message}`);
        }
        if (item.ended) throw new Failure('the observation ended');
        const { leader } = item;
        if (leader !== null) {
          // (term, valueVersion) only ever increases along one observation:
          // a new leader, or a value its leader proclaimed since.
          const { last } = watched;
          if (last !== null && !(leader.term > last.term || (leader.term === last.term && leader.valueVersion > last.valueVersion))) {
            throw new Failure(
              `observed term ${leader.term} value_version ${leader.valueVersion} after term ${last.term} value_version ${last.valueVersion}`,
            );
          }
          watched.last = { term: leader.term, valueVersion: leader.valueVersion };
        }
        if (leader === null && step.skip_none && !step.none) continue;
        checkLeader(step, state, leader);
        break;
      }
      break;
    }
    case 'close_observation': {
      state.observations.get(step.observation).close();
      state.observations.delete(step.observation);
      break;
    }
    default:
      throw new Failure(`unknown op ${step.op}`);
  }
}

async function runScenario(scenario) {
  const state = {
    locks: new Map(), leases: new Map(), pending: new Map(), fences: new Map(),
    // Elections, by the steps' names: the Leadership of a leader; a
    // candidacy under way; an observation (see observe).
    leaderships: new Map(), candidates: new Map(), observations: new Map(),
  };
  try {
    for (const [index, step] of scenario.steps.entries()) {
      try {
        await runStep(step, state);
      } catch (error) {
        throw new Error(`step ${index} (${step.op}): ${error.message}`);
      }
    }
  } finally {
    for (const lease of state.leases.values()) await lease.release().catch(() => {});
    for (const leadership of state.leaderships.values()) await leadership.resign().catch(() => {});
    for (const candidate of state.candidates.values()) {
      // A candidacy still waiting is withdrawn, one elected meanwhile resigns.
      candidate.withdraw();
      await candidate.promise.catch(() => {});
      if (candidate.box.value !== undefined) await candidate.box.value.resign().catch(() => {});
    }
    for (const observation of state.observations.values()) observation.close();
  }
}

let failed = 0;
for (const scenario of scenarios) {
  try {
    await runScenario(scenario);
    process.stdout.write(`PASS ${scenario.id}\n`);
  } catch (error) {
    failed += 1;
    process.stdout.write(`FAIL ${scenario.id} ${error.message}\n`);
  }
}
for (const c of clients.values()) c.close();
process.exit(failed ? 1 : 0);
