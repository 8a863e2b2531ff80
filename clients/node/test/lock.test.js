// The unary calls against a real daemon over five real valkey-server masters.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  Client,
  DeadlineExceededError,
  InvalidArgumentError,
  LockHeldError,
  LockNotHeldError,
  UnavailableError,
} from '../src/index.js';
import { freePort, startDaemon } from './daemon.js';
import { until } from './poll.js';

let daemon;
let client;

before(async () => {
  daemon = await startDaemon();
  client = new Client(daemon.address);
});

after(async () => {
  client?.close();
  await daemon?.stop();
});

test('a grant carries a BigInt fence, larger for each new holder, and a validity counted from the send', async () => {
  const sent = performance.now();
  const first = await client.acquire('unary/grant', { ttlMs: 10_000, owner: 'node-test' });
  assert.equal(typeof first.fence, 'bigint');
  assert.ok(first.fence > 0n);
  assert.equal(first.resource, 'unary/grant');
  assert.ok(first.token.length >= 16);
  assert.ok(first.validityMs > 0 && first.validityMs <= 10_000, `${first.validityMs}`);
  assert.ok(first.validUntil <= sent + 10_000 + 1);
  assert.ok(first.remainingMs() > 0);
  assert.equal(await client.release(first), true);
  const second = await client.acquire('unary/grant', { ttlMs: 10_000 });
  assert.ok(second.fence > first.fence, `${second.fence} > ${first.fence}`);
  await client.release(second);
});

test('a retry with the same requestId gets the same lock', async () => {
  const requestId = randomBytes(16).toString('base64url');
  const first = await client.acquire('node/idem', { ttlMs: 10_000, requestId });
  const again = await client.acquire('node/idem', { ttlMs: 10_000, requestId });
  assert.equal(again.token, first.token);
  assert.equal(again.fence, first.fence);
  await assert.rejects(client.acquire('node/idem', { ttlMs: 10_000 }), LockHeldError);
  assert.equal(await client.release(again), true);
});

test('a resource held elsewhere is LockHeldError (ABORTED)', async () => {
  const held = await client.acquire('unary/contended', { ttlMs: 10_000 });
  await assert.rejects(client.acquire('unary/contended', { ttlMs: 10_000 }), (error) => {
    assert.ok(error instanceof LockHeldError, String(error));
    assert.equal(error.code, 10);
    assert.equal(error.kind, 'held');
    assert.equal(typeof error.details, 'string');
    return true;
  });
  await assert.rejects(client.acquire('unary/contended', { ttlMs: 10_000, waitMs: 200 }), LockHeldError);
  await client.release(held);
});

test('shared locks coexist, exclude a writer, and the writer gets a higher fence', async () => {
  const a = await client.acquire('node/rw', { ttlMs: 10_000, shared: true });
  const b = await client.acquire('node/rw', { ttlMs: 10_000, shared: true });
  assert.notEqual(a.token, b.token);
  assert.ok(a.token.startsWith('s') && b.token.startsWith('s'));
  await assert.rejects(client.acquire('node/rw', { ttlMs: 10_000 }), LockHeldError);
  assert.equal(await client.release(a), true);
  assert.equal(await client.release(b), true);
  const writer = await client.acquire('node/rw', { ttlMs: 10_000, waitMs: 5_000 });
  assert.ok(writer.fence > a.fence && writer.fence > b.fence);
  await assert.rejects(client.acquire('node/rw', { ttlMs: 10_000, shared: true }), LockHeldError);
  assert.equal(await client.release(writer), true);
  await assert.rejects(client.acquire('node/rw', { ttlMs: 10_000, shared: 'yes' }), InvalidArgumentError);
});

test("a waiting acquire is woken by the holder's release, long before the holder's ttl", async () => {
  const holder = await client.acquire('unary/wait', { ttlMs: 60_000 });
  const started = performance.now();
  const waiter = client.acquire('unary/wait', { ttlMs: 10_000, waitMs: 30_000 });
  await sleep(200);
  assert.equal(await client.release(holder), true);
  const granted = await waiter;
  assert.ok(granted.fence > holder.fence);
  // Granted after the release and before the wait ran out: woken by it.
  assert.ok(performance.now() - started < 30_000);
  await client.release(granted);
});

test('extend keeps the fence and renews the validity while held; after expiry it is LockNotHeldError', async () => {
  const lock = await client.acquire('unary/extend', { ttlMs: 300 });
  const extended = await client.extend(lock, { ttlMs: 10_000 });
  assert.equal(extended.fence, lock.fence);
  assert.equal(extended.token, lock.token);
  assert.ok(extended.validityMs > 300);
  const short = await client.extend(lock, { ttlMs: 200 });
  await until(async () => !(await client.validate(short)).held, 'the lock expires');
  // Validate says not held once no validity is left (the drift allowance
  // and its own round counted), a few ms before the keys expire on the
  // masters; an Extend in that gap still finds them on a majority and
  // rightly succeeds (nobody else can hold the lock yet). A new holder
  // proves the keys are gone; once it has released, Extend finds nothing.
  const next = await client.acquire('unary/extend', { ttlMs: 10_000, waitMs: 5_000 });
  assert.equal(await client.release(next), true);
  await assert.rejects(client.extend(short, { ttlMs: 10_000 }), (error) => {
    assert.ok(error instanceof LockNotHeldError, String(error));
    assert.equal(error.kind, 'not_held');
    return true;
  });
});

test('release is idempotent: the second says wasHeld false', async () => {
  const lock = await client.acquire('unary/release', { ttlMs: 10_000 });
  assert.equal(await client.release(lock), true);
  assert.equal(await client.release(lock), false);
});

test('validate says held with a validity, and not held after release', async () => {
  const lock = await client.acquire('unary/validate', { ttlMs: 10_000 });
  const asked = performance.now();
  const valid = await client.validate(lock);
  assert.equal(valid.held, true);
  assert.ok(valid.validityMs > 0 && valid.validityMs <= 10_000);
  assert.ok(valid.validUntil <= asked + valid.validityMs + 50);
  const other = await client.validate({ resource: lock.resource, token: '0'.repeat(32) });
  assert.equal(other.held, false);
  assert.equal(other.validityMs, 0);
  await client.release(lock);
  assert.equal((await client.validate(lock)).held, false);
});

test('bad input is InvalidArgumentError naming the field, from the client or the daemon', async () => {
  const refused = async (promise, field) =>
    assert.rejects(promise, (error) => {
      assert.ok(error instanceof InvalidArgumentError, String(error));
      assert.equal(error.field, field, error.message);
      assert.ok(error.details.startsWith(`${field}: `), error.details);
      return true;
    });
  // Refused here, before any call.
  await refused(client.acquire('', { ttlMs: 1000 }), 'resource');
  await refused(client.acquire('unary/bad', { ttlMs: '10s' }), 'ttlMs');
  await refused(client.acquire('unary/bad', { ttlMs: 1000, waitMs: -1 }), 'waitMs');
  await refused(client.extend({ resource: 'unary/bad' }, { ttlMs: 1000 }), 'token');
  // Refused by the daemon (its limits: max_ttl 1h, max_resource_len 512).
  await refused(client.acquire('unary/bad', { ttlMs: 2 * 3600 * 1000 }), 'ttl');
  await refused(client.acquire('r'.repeat(600), { ttlMs: 1000 }), 'resource');
});

test('a deadline shorter than the wait is DeadlineExceededError, and leaves nothing locked', async () => {
  const holder = await client.acquire('unary/deadline', { ttlMs: 30_000 });
  await assert.rejects(
    client.acquire('unary/deadline', { ttlMs: 10_000, waitMs: 5000, deadlineMs: 300 }),
    (error) => error instanceof DeadlineExceededError && error.kind === 'deadline_exceeded',
  );
  assert.equal(await client.release(holder), true);
  const next = await client.acquire('unary/deadline', { ttlMs: 10_000 });
  await client.release(next);
});

test('no daemon at the address is UnavailableError, marked retryable', async () => {
  const nowhere = new Client(`127.0.0.1:${await freePort()}`, { deadlineMs: 5000 });
  try {
    await assert.rejects(nowhere.acquire('unary/nowhere', { ttlMs: 1000 }), (error) => {
      assert.ok(error instanceof UnavailableError, String(error));
      assert.equal(error.retryable, true);
      return true;
    });
  } finally {
    nowhere.close();
  }
});

test('several resources at once: all or none, one fence each, released through any name', async () => {
  const names = ['multi/a', 'multi/b', 'multi/c'];
  const held = await client.acquire(names[1], { ttlMs: 10_000 });
  await assert.rejects(client.acquire(names, { ttlMs: 10_000 }), LockHeldError);
  // All or none: the others were left free.
  assert.equal(await client.release(await client.acquire(names[0], { ttlMs: 10_000 })), true);
  assert.equal(await client.release(held), true);
  const lock = await client.acquire(names, { ttlMs: 10_000 });
  assert.deepEqual(lock.resources.map((r) => r.resource), names);
  assert.equal(lock.resource, names[0]);
  assert.equal(lock.fence, lock.resources[0].fence);
  assert.ok(lock.resources[1].fence > held.fence);
  assert.equal((await client.validate({ resource: names[2], token: lock.token })).held, true);
  assert.equal(await client.release({ resource: names[1], token: lock.token }), true);
  assert.equal((await client.validate({ resource: names[0], token: lock.token })).held, false);
  await assert.rejects(client.acquire([], { ttlMs: 1_000 }), (e) => e instanceof InvalidArgumentError && e.field === 'resources');
});
