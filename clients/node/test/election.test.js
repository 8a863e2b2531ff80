// Leader election against a real daemon: one leader and a standby, the
// standby elected with a higher term once the leader resigns; leader() and
// observe() see the changes in term order; a leader proclaims new values
// under its term; an AbortSignal withdraws a candidacy; Client.resign by
// token; bad input named.

import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { after, before, test } from 'node:test';
import { Client, InvalidArgumentError, Leader, Leadership, LockLostError, LockNotHeldError } from '../src/index.js';
import { startDaemon } from './daemon.js';
import { LIMIT_MS, aborted, until } from './poll.js';

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

/** The next value of an async iterator, bounded. */
async function next(iterator, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${LIMIT_MS} ms waiting for ${what}`)), LIMIT_MS);
  });
  try {
    const step = await Promise.race([iterator.next(), limit]);
    assert.equal(step.done, false, `the observation ended before ${what}`);
    return step.value;
  } finally {
    clearTimeout(timer);
  }
}

/** Whether `promise` is still pending now (after the events already queued). */
async function pending(promise) {
  const marker = Symbol('pending');
  return (await Promise.race([promise.then(() => 'settled', () => 'settled'), new Promise((r) => setImmediate(() => r(marker)))])) === marker;
}

test('one leader and a standby: the standby is elected with a higher term once the leader resigns', async () => {
  const first = await client.campaign('election/standby', { value: 'node-a', ttlMs: 2000 });
  assert.ok(first instanceof Leadership);
  assert.equal(first.name, 'election/standby');
  assert.equal(first.value, 'node-a');
  assert.equal(typeof first.term, 'bigint');
  assert.ok(first.term > 0n);
  assert.ok(first.validityMs > 0 && first.validityMs <= 2000, `${first.validityMs}`);
  assert.ok(first.remainingMs() > 0);
  first.check();

  const standby = client.campaign('election/standby', { value: 'node-b', ttlMs: 2000 });
  // While the first leads (three extensions, each renewing a 2 s ttl, so
  // well past it), the standby is not elected.
  await until(() => first.extensions >= 3, 'three extensions of the leadership');
  assert.equal(await pending(standby), true, 'the standby was elected while the first led');
  assert.equal(first.signal.aborted, false, String(first.signal.reason));
  const current = await client.leader('election/standby');
  assert.equal(current.term, first.term);
  assert.equal(current.value, 'node-a');

  assert.equal(await first.resign(), true);
  assert.ok(first.signal.reason instanceof LockLostError);
  assert.match(first.signal.reason.reason, /resigned at the client's request/);
  assert.throws(() => first.check(), LockLostError);
  assert.equal(await first.resign(), true, 'resign() is idempotent');

  const second = await standby;
  assert.equal(second.value, 'node-b');
  assert.ok(second.term > first.term, `${second.term} > ${first.term}`);
  assert.equal((await client.leader('election/standby')).term, second.term);
  assert.equal(await second.resign(), true);
  await until(async () => (await client.leader('election/standby')) === null, 'no leader after both resigned');
});

test('leader() and observe() see the changes in term order', async () => {
  const name = 'election/observed';
  assert.equal(await client.leader(name), null);
  const controller = new AbortController();
  const changes = client.observe(name, { signal: controller.signal });
  assert.equal(await next(changes, 'the current state (no leader)'), null);

  const terms = [];
  for (const value of ['one', 'two', 'three']) {
    const leadership = await client.campaign(name, { value, ttlMs: 5000 });
    const read = await client.leader(name);
    assert.ok(read instanceof Leader);
    assert.equal(read.term, leadership.term);
    assert.equal(read.value, value);
    assert.ok(read.since instanceof Date);
    assert.ok(read.validityMs > 0);
    // The observer sees this leader (perhaps after a `null` for the gap).
    let seen = await next(changes, `the leader ${value}`);
    if (seen === null) seen = await next(changes, `the leader ${value} after the gap`);
    assert.equal(seen.term, leadership.term);
    assert.equal(seen.value, value);
    terms.push(seen.term);
    assert.equal(await leadership.resign(), true);
  }
  assert.ok(terms[0] < terms[1] && terms[1] < terms[2], terms.join(' < '));
  assert.equal(await next(changes, 'no leader after the last resigned'), null);

  // Aborting ends the iteration quietly, also while a next() waits.
  controller.abort();
  assert.equal((await changes.next()).done, true);
  const waiting = new AbortController();
  const quiet = client.observe(name, { signal: waiting.signal });
  assert.equal(await next(quiet, 'the current state again'), null);
  const step = quiet.next();
  waiting.abort();
  assert.equal((await step).done, true);
});

test('proclaim changes the value under the same term; once the term is resigned it is refused, LockNotHeldError', async () => {
  const name = 'election/proclaimed';
  const controller = new AbortController();
  const changes = client.observe(name, { signal: controller.signal });
  assert.equal(await next(changes, 'the current state (no leader)'), null);
  const leadership = await client.campaign(name, { value: 'first', ttlMs: 2000 });
  assert.equal(leadership.valueVersion, 0n);
  const campaigned = await next(changes, 'the leader');
  assert.equal(campaigned.value, 'first');
  assert.equal(campaigned.valueVersion, 0n);

  const moved = await leadership.proclaim('moved');
  assert.equal(typeof moved, 'bigint');
  assert.ok(moved > 0n, `${moved}`);
  assert.equal(leadership.value, 'moved');
  assert.equal(leadership.valueVersion, moved);
  const read = await client.leader(name);
  assert.equal(read.value, 'moved');
  assert.equal(read.term, leadership.term);
  assert.equal(read.valueVersion, moved);
  let seen = await next(changes, 'the proclaimed value');
  assert.equal(seen.value, 'moved');
  assert.equal(seen.term, leadership.term, 'the same term, not a new leader');
  assert.equal(seen.valueVersion, moved);

  const again = await leadership.proclaim('moved again');
  assert.ok(again > moved, `${again} > ${moved}`);
  seen = await next(changes, 'the value proclaimed again');
  assert.equal(seen.value, 'moved again');
  assert.equal(seen.term, leadership.term);
  assert.equal(seen.valueVersion, again);
  assert.equal(leadership.signal.aborted, false, 'proclaiming keeps the leadership');

  assert.equal(await client.resign(name, leadership.token), true);
  await assert.rejects(leadership.proclaim('too late'), (e) => e instanceof LockNotHeldError && e.kind === 'not_held');
  assert.ok(leadership.signal.reason instanceof LockLostError, 'a refused Proclaim ends the leadership here too');
  // Known over now: refused without a call, the same class, the lost reason as cause.
  await assert.rejects(leadership.proclaim('later still'), (e) => e instanceof LockNotHeldError && e.cause instanceof LockLostError);
  assert.equal(leadership.value, 'moved again', 'a refused value is not taken');
  assert.equal(await client.leader(name), null);
  assert.equal(await next(changes, 'no leader after the resignation'), null);
  controller.abort();
});

test("Client.resign by token ends the leadership from outside; its session's signal aborts", async () => {
  const leadership = await client.campaign('election/resign', { ttlMs: 2000 });
  assert.equal(await client.resign(leadership.name, leadership.token), true);
  const reason = await aborted(leadership.signal);
  assert.ok(reason instanceof LockLostError, String(reason));
  assert.equal(await client.resign(leadership.name, leadership.token), false, 'already over');
  assert.equal(await leadership.resign(), false);
  // Free at once: the next candidate is elected with a higher term.
  const next = await client.campaign('election/resign', { ttlMs: 2000 });
  assert.ok(next.term > leadership.term);
  assert.equal(await next.resign(), true);
});

test('an AbortSignal withdraws a waiting candidacy; the leader stays', async () => {
  const leader = await client.campaign('election/withdrawn', { value: 'leader', ttlMs: 5000 });
  const controller = new AbortController();
  const waiting = client.campaign('election/withdrawn', { value: 'withdrawn', ttlMs: 5000, signal: controller.signal });
  assert.equal(await pending(waiting), true);
  const why = new Error('not needed any more');
  controller.abort(why);
  await assert.rejects(waiting, (e) => e === why);
  // An already aborted signal never opens a session.
  await assert.rejects(client.campaign('election/withdrawn', { ttlMs: 5000, signal: AbortSignal.abort() }), (e) => e.name === 'AbortError');
  assert.equal(await leader.resign(), true);
  // The withdrawn candidate is not elected: the next one is.
  const next = await client.campaign('election/withdrawn', { value: 'next', ttlMs: 5000 });
  assert.equal((await client.leader('election/withdrawn')).value, 'next');
  assert.equal(await next.resign(), true);
});

test('the token is kept out of logs and JSON; the term is exact', async () => {
  const leadership = await client.campaign('election/secret', { value: 'v', ttlMs: 2000 });
  const json = JSON.stringify(leadership);
  assert.ok(!json.includes(leadership.token));
  assert.equal(JSON.parse(json).term, leadership.term.toString());
  assert.ok(!inspect(leadership).includes(leadership.token));
  assert.equal(await leadership.resign(), true);
});

test('closing the client ends its leadership (the signal aborts, the standby is elected) and its observations', async () => {
  const other = new Client(daemon.address);
  const leadership = await other.campaign('election/closed', { ttlMs: 60_000 });
  const changes = other.observe('election/closed');
  assert.equal((await next(changes, 'the current leader')).term, leadership.term);
  const step = changes.next();
  const standby = client.campaign('election/closed', { ttlMs: 5000 });
  other.close();
  assert.ok((await aborted(leadership.signal)) instanceof LockLostError);
  assert.equal((await step).done, true, 'the observation ends quietly');
  // Elected long before the 60 s ttl: the daemon resigned the cancelled session.
  const next_ = await standby;
  assert.ok(next_.term > leadership.term);
  assert.equal(await next_.resign(), true);
});

test('bad input is refused naming the field', async () => {
  await assert.rejects(client.campaign('', { ttlMs: 1000 }), (e) => e instanceof InvalidArgumentError && e.field === 'name');
  await assert.rejects(client.campaign('election/bad', {}), (e) => e instanceof InvalidArgumentError && e.field === 'ttlMs');
  await assert.rejects(client.campaign('election/bad', { ttlMs: 0 }), (e) => e instanceof InvalidArgumentError && e.field === 'ttl');
  await assert.rejects(client.leader(''), (e) => e instanceof InvalidArgumentError && e.field === 'name');
  await assert.rejects(client.resign('election/bad', ''), (e) => e instanceof InvalidArgumentError && e.field === 'token');
  await assert.rejects(client.observe('').next(), (e) => e instanceof InvalidArgumentError && e.field === 'name');
  const leadership = await client.campaign('election/bad', { ttlMs: 2000 });
  await assert.rejects(leadership.proclaim(undefined), (e) => e instanceof InvalidArgumentError && e.field === 'value');
  assert.equal(leadership.signal.aborted, false, 'a refused argument does not end the leadership');
  assert.equal(await leadership.resign(), true);
});

test('a frozen daemon sends no `kept`, and the leadership ends before its validity does', async () => {
  const own = await startDaemon();
  const other = new Client(own.address);
  try {
    const leadership = await other.campaign('election/frozen', { ttlMs: 3000 });
    await own.signal('SIGSTOP');
    try {
      const reason = await aborted(leadership.signal);
      const at = performance.now();
      assert.ok(reason instanceof LockLostError, String(reason));
      assert.match(reason.reason, /no extension arrived/);
      assert.ok(at < leadership.validUntil, `${at} < ${leadership.validUntil}`);
    } finally {
      await own.signal('SIGCONT');
    }
  } finally {
    other.close();
    await own.stop();
  }
});

test('observe ends with UnavailableError when the daemon stops; a waiting candidate is refused', async () => {
  const own = await startDaemon();
  const other = new Client(own.address);
  try {
    const leader = await other.campaign('election/stopping', { ttlMs: 5000 });
    const waiting = other.campaign('election/stopping', { ttlMs: 5000 });
    const changes = other.observe('election/stopping');
    assert.equal((await next(changes, 'the current leader')).term, leader.term);
    assert.equal(await pending(waiting), true);
    await own.signal('SIGTERM');
    await assert.rejects(changes.next(), (e) => e.kind === 'unavailable');
    await assert.rejects(waiting, (e) => e.kind === 'unavailable');
    await until(() => leader.draining, 'the leader is told the daemon drains');
    assert.equal(leader.signal.aborted, false, 'still kept while the daemon drains');
    assert.equal(await leader.resign(), true);
    await own.exited;
  } finally {
    other.close();
    await own.stop();
  }
});
