// Every way a Hold session's lock goes away aborts the signal: the daemon's
// `lost` (three of five masters stopped, or a stopping daemon's grace
// ran out), and silence (a frozen daemon sends no extension before
// the validity runs out). Each case has a daemon of its own.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Client, LockLostError } from '../src/index.js';
import { startDaemon } from './daemon.js';
import { aborted } from './poll.js';

async function withDaemon(fn) {
  const daemon = await startDaemon();
  const client = new Client(daemon.address);
  try {
    await fn(daemon, client);
  } finally {
    client.close();
    await daemon.stop();
  }
}

test('using: the signal aborts when three of five masters stop, before the validity ends; the value is returned', () =>
  withDaemon(async (daemon, client) => {
    let reason;
    let at;
    let lastLock;
    const value = await client.using('lost/masters', { ttlMs: 3000 }, async (signal, lock) => {
      assert.ok(lock.fence > 0n);
      await Promise.all(daemon.masters.slice(2).map((m) => m.stop()));
      reason = await aborted(signal);
      at = performance.now();
      lastLock = lock;
      return 'stopped';
    });
    assert.equal(value, 'stopped');
    assert.ok(reason instanceof LockLostError, String(reason));
    assert.equal(reason.kind, 'lost');
    // The daemon retries the extension until its validity is nearly out;
    // the client's margin is wider, so its own timer usually fires first.
    assert.match(reason.reason, /^lost: |no extension arrived/);
    assert.ok(at < lastLock.validUntil, 'told before the first grant\'s validity ended');
  }));

test('hold: the daemon\'s `lost` aborts the signal at once when the lock vanished from a majority', () =>
  withDaemon(async (daemon, client) => {
    const lease = await client.hold('lost/flushed', { ttlMs: 3000 });
    for (const master of daemon.masters.slice(2)) assert.equal(await master.command('FLUSHALL'), '+OK');
    const reason = await aborted(lease.signal);
    assert.ok(reason instanceof LockLostError, String(reason));
    assert.match(reason.reason, /^lost: .*no longer held/);
    assert.equal(await lease.release(), false);
  }));

test('hold: the signal aborts when the daemon stops and its grace ends (`lost`)', () =>
  withDaemon(async (daemon, client) => {
    const lease = await client.hold('lost/stopping', { ttlMs: 5000 });
    await daemon.signal('SIGTERM');
    const reason = await aborted(lease.signal);
    assert.ok(reason instanceof LockLostError, String(reason));
    assert.match(reason.reason, /^lost: .*shutdown grace/);
    assert.ok(lease.draining, 'told `draining` before the end');
    assert.equal(await lease.release(), false, 'nothing left to release');
    await daemon.exited;
  }));

test('hold: a frozen daemon sends no extension, and the signal aborts before the validity ends', () =>
  withDaemon(async (daemon, client) => {
    const lease = await client.hold('lost/frozen', { ttlMs: 3000 });
    await daemon.signal('SIGSTOP');
    try {
      const reason = await aborted(lease.signal);
      const at = performance.now();
      assert.ok(reason instanceof LockLostError, String(reason));
      assert.match(reason.reason, /no extension arrived/);
      // Safe: the work was told to stop while the lock was still valid.
      assert.ok(at < lease.lock.validUntil, `${at} < ${lease.lock.validUntil}`);
    } finally {
      await daemon.signal('SIGCONT');
    }
  }));
