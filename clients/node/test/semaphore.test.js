// Semaphores (`limit`) against a real daemon over five real valkey-server masters.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Client, InvalidArgumentError, LockHeldError, LockNotHeldError } from '../src/index.js';
import { startDaemon } from './daemon.js';

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

test('limit 2 admits two permits, each its own token and permit; the limit is the identity', async () => {
  const first = await client.acquire('node/sem', { ttlMs: 10_000, limit: 2 });
  const second = await client.acquire('node/sem', { ttlMs: 10_000, limit: 2 });
  assert.deepEqual(new Set([first.permit, second.permit]), new Set([0, 1]));
  assert.ok(first.token.endsWith(`.${first.permit}`));
  await assert.rejects(client.acquire('node/sem', { ttlMs: 10_000, limit: 2 }), LockHeldError);
  await assert.rejects(client.acquire('node/sem', { ttlMs: 10_000 }), LockNotHeldError);
  assert.equal(await client.release(first), true);
  const again = await client.acquire('node/sem', { ttlMs: 10_000, limit: 2, waitMs: 5_000 });
  assert.equal(again.permit, first.permit);
  assert.ok(again.fence > first.fence);
  assert.equal(await client.release(again), true);
  assert.equal(await client.release(second), true);
});

test('bad limits and a requestId with a limit are refused before any call', async () => {
  await assert.rejects(client.acquire('node/sem2', { ttlMs: 1_000, limit: -1 }), InvalidArgumentError);
  await assert.rejects(client.acquire('node/sem2', { ttlMs: 1_000, limit: 1.5 }), InvalidArgumentError);
  await assert.rejects(
    client.acquire('node/sem2', { ttlMs: 1_000, limit: 2, requestId: 'A'.repeat(22) }),
    InvalidArgumentError,
  );
  // Over the daemon's maximum (64): the daemon names the field.
  await assert.rejects(client.acquire('node/sem2', { ttlMs: 1_000, limit: 65 }), (error) => {
    assert.ok(error instanceof InvalidArgumentError, String(error));
    assert.match(error.message, /limit/);
    return true;
  });
});
