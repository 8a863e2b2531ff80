// After a deadline nothing is left locked: an acquire that ends without the
// daemon's answer releases the token its request id derives, in the
// background; one the daemon answered releases nothing.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, DeadlineExceededError, LockHeldError } from '../src/index.js';
import { derivedToken } from '../src/client.js';
import { startDaemon } from './daemon.js';

/** A leak stays for the ttl: 30 s, far beyond the polls below. */
const TTL_MS = 30_000;
const CALLS = 50;

let daemon;
let client;

before(async () => {
  daemon = await startDaemon();
  client = new Client(daemon.address);
});

after(async () => {
  await client?.close();
  await daemon?.stop();
});

/** `resource` can be acquired at once (no wait) within `limitMs`: a lock left behind for its ttl fails it. */
async function acquirableWithin(other, resource, limitMs = 2000) {
  const limit = performance.now() + limitMs;
  for (;;) {
    try {
      await other.release(await other.acquire(resource, { ttlMs: 5000, deadlineMs: 2000 }));
      return;
    } catch (error) {
      if (!(error instanceof LockHeldError) || performance.now() > limit) {
        assert.fail(`${resource} still not acquirable after ${limitMs} ms: ${error}`);
      }
      await sleep(20);
    }
  }
}

/** Acquires `${resource}/i` CALLS times through `through` with `deadlineMs`; a lock granted is released. */
async function acquireAll(through, resource, deadlineMs) {
  const outcomes = { granted: 0, deadline: 0 };
  for (let i = 0; i < CALLS; i += 1) {
    try {
      await through.release(await through.acquire(`${resource}/${i}`, { ttlMs: TTL_MS, deadlineMs }));
      outcomes.granted += 1;
    } catch (error) {
      if (!(error instanceof DeadlineExceededError)) throw error;
      outcomes.deadline += 1;
    }
  }
  return outcomes;
}

test('the token derived from a request id is the daemon\'s', async () => {
  // lock.proto's recipe, and the daemon's own test vector.
  assert.equal(derivedToken('orders/42', 'A'.repeat(22)), 'df346cfde84a8078cf125d1c05366bf4');
  const requestId = 'B'.repeat(22);
  const lock = await client.acquire('unanswered/derived', { ttlMs: 5000, requestId });
  assert.equal(lock.token, derivedToken('unanswered/derived', requestId));
  await client.release(lock);
  const shared = await client.acquire('unanswered/derived', { ttlMs: 5000, requestId, shared: true });
  assert.equal(shared.token, derivedToken('unanswered/derived', requestId, true));
  await client.release(shared);
});

test('a 1 ms deadline, 50 times, leaves nothing locked', async () => {
  const outcomes = await acquireAll(client, 'unanswered/tiny', 1);
  console.log(outcomes, `${client._backgroundReleases} released in the background`);
  const other = new Client(daemon.address);
  try {
    for (let i = 0; i < CALLS; i += 1) await acquirableWithin(other, `unanswered/tiny/${i}`);
  } finally {
    await other.close();
  }
});

// The same made certain: every answer arrives 300 ms after the daemon sent
// it, so each grant (well within the daemon's cut-off of a 100 ms deadline)
// reaches the client after its deadline. Without the release, every one of
// these resources stays locked for 30 s.
test('a grant answered after the deadline leaves nothing locked', async () => {
  const slow = new Client(await daemon.slowAnswers(300));
  try {
    await slow.validate({ resource: 'unanswered/late', token: '0'.repeat(32) }); // connected first
    const outcomes = await acquireAll(slow, 'unanswered/late', 100);
    console.log(outcomes, `${slow._backgroundReleases} released in the background`);
    for (let i = 0; i < CALLS; i += 1) await acquirableWithin(client, `unanswered/late/${i}`);
  } finally {
    await slow.close();
  }
});

test('the daemon\'s own answer, DEADLINE_EXCEEDED included, starts no release', async () => {
  const resource = 'unanswered/answered';
  const holder = await client.acquire(resource, { ttlMs: TTL_MS });
  const slow = new Client(await daemon.slowAnswers(300));
  try {
    const before = client._backgroundReleases;
    await assert.rejects(client.acquire(resource, { ttlMs: 1000 }), LockHeldError);
    assert.equal(client._backgroundReleases, before);
    // DEADLINE_EXCEEDED answered at the daemon's cut-off, 20 ms before the
    // client's deadline. On a loaded machine the answer may come after the
    // deadline, and then cannot be told from a local expiry: a few tries.
    let answered = false;
    for (let i = 0; i < 3 && !answered; i += 1) {
      const count = client._backgroundReleases;
      await assert.rejects(
        client.acquire(resource, { ttlMs: 1000, waitMs: 20_000, deadlineMs: 300 }),
        DeadlineExceededError,
      );
      answered = client._backgroundReleases === count;
    }
    assert.ok(answered, 'every DEADLINE_EXCEEDED the daemon answered started a release');
    // A deadline that ran out in the client (the answer 300 ms late) does.
    await slow.validate({ resource, token: '0'.repeat(32) });
    await assert.rejects(slow.acquire(resource, { ttlMs: 1000, deadlineMs: 100 }), DeadlineExceededError);
    assert.equal(slow._backgroundReleases, 1);
  } finally {
    await client.release(holder);
    await slow.close();
  }
});

test('a retry with the same request id keeps the lock it gets', async () => {
  const resource = 'unanswered/retry';
  const slow = new Client(await daemon.slowAnswers(300));
  try {
    await slow.validate({ resource, token: '0'.repeat(32) });
    const requestId = 'C'.repeat(22);
    await assert.rejects(slow.acquire(resource, { ttlMs: TTL_MS, deadlineMs: 100, requestId }), DeadlineExceededError);
    const retried = await slow.acquire(resource, { ttlMs: TTL_MS, waitMs: 5000, deadlineMs: 10_000, requestId });
    await sleep(500);
    assert.ok((await client.validate(retried)).held, 'the retry\'s lock was released behind its back');
    await slow.release(retried);
  } finally {
    await slow.close();
  }
});
