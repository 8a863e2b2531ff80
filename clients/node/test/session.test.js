// Hold sessions through `using` and `hold` against a real daemon: the lock
// is kept while the work runs, released after it, and the signal stays
// quiet while nothing goes wrong.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client, DeadlineExceededError, InvalidArgumentError, LockHeldError, LockLostError } from '../src/index.js';
import { startDaemon } from './daemon.js';
import { aborted, until } from './poll.js';

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

test("using runs the callback under the lock, returns its value and releases", async () => {
  const value = await client.using('session/using', { ttlMs: 5000 }, async (signal, lock) => {
    assert.equal(signal.aborted, false);
    assert.equal(typeof lock.fence, 'bigint');
    // Held: nobody else gets it meanwhile.
    await assert.rejects(client.acquire('session/using', { ttlMs: 1000 }), LockHeldError);
    assert.equal((await client.validate(lock)).held, true);
    return 42;
  });
  assert.equal(value, 42);
  // Released (waited for), not left to expire: free at once.
  const next = await client.acquire('session/using', { ttlMs: 1000 });
  await client.release(next);
});

test("using rethrows the callback's error after releasing the lock", async () => {
  let held;
  await assert.rejects(
    client.using('session/throws', { ttlMs: 5000 }, async (signal, lock) => {
      held = lock;
      throw new Error('the work failed');
    }),
    /the work failed/,
  );
  assert.equal((await client.validate(held)).held, false);
  const next = await client.acquire('session/throws', { ttlMs: 1000 });
  await client.release(next);
});

test('a lease is extended by the daemon while it is open, then released with wasHeld true', async () => {
  const lease = await client.hold('session/lease', { ttlMs: 600 });
  const fence = lease.fence;
  await until(() => lease.extensions >= 3, 'three extensions');
  assert.equal(lease.signal.aborted, false, String(lease.signal.reason));
  assert.equal(lease.fence, fence);
  assert.ok(lease.lock.remainingMs() > 0);
  lease.check();
  assert.equal(await lease.release(), true);
  // Released: the signal says the lock is no longer held.
  assert.equal(lease.signal.aborted, true);
  assert.ok(lease.signal.reason instanceof LockLostError);
  assert.throws(() => lease.check(), LockLostError);
  assert.equal(await lease.release(), true, 'release() is idempotent');
});

test('a hold on a resource held elsewhere is LockHeldError; with a wait it is woken by the release', async () => {
  const holder = await client.acquire('session/contended', { ttlMs: 30_000 });
  await assert.rejects(client.hold('session/contended', { ttlMs: 5000 }), LockHeldError);
  const waiting = client.hold('session/contended', { ttlMs: 5000, waitMs: 20_000 });
  assert.equal(await client.release(holder), true);
  const lease = await waiting;
  assert.ok(lease.fence > holder.fence);
  assert.equal(await lease.release(), true);
});

test('a hold with bad input is refused naming the field', async () => {
  await assert.rejects(client.hold('session/bad', { ttlMs: 0 }), (e) => e instanceof InvalidArgumentError && e.field === 'ttl');
  await assert.rejects(client.using('session/bad', { ttlMs: 1000 }), (e) => e instanceof InvalidArgumentError && e.field === 'fn');
});

test("closing the client cancels its sessions: the signals abort and the daemon releases the locks", async () => {
  const other = new Client(daemon.address);
  const lease = await other.hold('session/closed', { ttlMs: 60_000 });
  other.close();
  assert.ok((await aborted(lease.signal)) instanceof LockLostError);
  // Free long before its 60 s ttl: released by the daemon.
  let next;
  await until(async () => {
    next = await client.acquire('session/closed', { ttlMs: 1000 }).catch(() => null);
    return next;
  }, 'the lock is free again');
  assert.ok(next.fence > lease.fence);
  await client.release(next);
});

test('hold refuses bad options by rejecting, not by throwing', async () => {
  const pending = client.hold('session/bad', {});
  assert.ok(pending instanceof Promise);
  await assert.rejects(pending, (e) => e instanceof InvalidArgumentError && e.field === 'ttlMs');
});

test('a hold whose deadline is shorter than its wait is DeadlineExceededError, and leaves nothing locked', async () => {
  const holder = await client.acquire('session/deadline', { ttlMs: 30_000 });
  await assert.rejects(
    client.hold('session/deadline', { ttlMs: 5000, waitMs: 10_000, deadlineMs: 300 }),
    (e) => e instanceof DeadlineExceededError && e.kind === 'deadline_exceeded',
  );
  assert.equal(await client.release(holder), true);
  // The abandoned session took nothing: free at once.
  const next = await client.acquire('session/deadline', { ttlMs: 1000, waitMs: 2000 });
  await client.release(next);
});
