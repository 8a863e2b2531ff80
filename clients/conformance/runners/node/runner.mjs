// The Node client's conformance runner: runs clients/conformance/scenarios.json
// through redlockd-client's public API (Client, Lease, the error classes), as
// exported by the package's entry point (clients/node/src/index.js).
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

async function runScenario(scenario) {
  const state = { locks: new Map(), leases: new Map(), pending: new Map(), fences: new Map() };
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
