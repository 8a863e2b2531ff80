// Pure parts, no daemon: durations, the status-to-error table, the stop margin.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import grpc from '@grpc/grpc-js';
import { fromStatus } from '../src/errors.js';
import { toDuration, fromDuration, Lock } from '../src/wire.js';
import { Leader, Leadership, stepsForward } from '../src/election.js';
import { Lease } from '../src/lease.js';
import * as api from '../src/index.js';

test('milliseconds become protobuf durations and back, fractions included', () => {
  assert.deepEqual(toDuration(0, 'ttlMs'), { seconds: '0', nanos: 0 });
  assert.deepEqual(toDuration(1500, 'ttlMs'), { seconds: '1', nanos: 500_000_000 });
  assert.deepEqual(toDuration(0.25, 'ttlMs'), { seconds: '0', nanos: 250_000 });
  assert.equal(fromDuration({ seconds: '3', nanos: 1_000_000 }), 3001);
  assert.equal(fromDuration(null), 0);
});

test('bad durations are refused with the option named', () => {
  for (const bad of [undefined, '10s', -1, Number.NaN, Infinity, 10n]) {
    assert.throws(() => toDuration(bad, 'ttlMs'), (e) => e instanceof api.InvalidArgumentError && e.field === 'ttlMs');
  }
});

test('each status code maps to its error class, keeping code and details', () => {
  const table = [
    [grpc.status.ABORTED, api.LockHeldError, 'held'],
    [grpc.status.FAILED_PRECONDITION, api.LockNotHeldError, 'not_held'],
    [grpc.status.UNAVAILABLE, api.UnavailableError, 'unavailable'],
    [grpc.status.DEADLINE_EXCEEDED, api.DeadlineExceededError, 'deadline_exceeded'],
    [grpc.status.INVALID_ARGUMENT, api.InvalidArgumentError, 'invalid_argument'],
    [grpc.status.RESOURCE_EXHAUSTED, api.ResourceExhaustedError, 'resource_exhausted'],
    [grpc.status.UNAUTHENTICATED, api.UnauthenticatedError, 'unauthenticated'],
    [grpc.status.PERMISSION_DENIED, api.PermissionDeniedError, 'permission_denied'],
    [grpc.status.INTERNAL, api.RedlockdError, 'error'],
  ];
  for (const [code, Class, kind] of table) {
    const error = fromStatus({ code, details: 'ttl: too long' }, 'Acquire');
    assert.ok(error instanceof Class, `${code} -> ${error.name}`);
    assert.ok(error instanceof api.RedlockdError);
    assert.equal(error.code, code);
    assert.equal(error.details, 'ttl: too long');
    assert.equal(error.kind, kind);
    assert.equal(error.retryable, Class === api.UnavailableError || Class === api.ResourceExhaustedError);
  }
  assert.equal(fromStatus({ code: grpc.status.INVALID_ARGUMENT, details: 'resource: empty' }, 'x').field, 'resource');
  const plain = new TypeError('not a status');
  assert.equal(fromStatus(plain, 'x'), plain);
});

test('a lock turns the fence into a BigInt and keeps its token out of JSON', () => {
  const wire = { resource: 'r', token: 'secret', fence: '18446744073709551615', validity: { seconds: '2', nanos: 0 } };
  const lock = new Lock(wire, 1000);
  assert.equal(lock.fence, 18446744073709551615n);
  assert.equal(lock.validityMs, 2000);
  assert.equal(lock.validUntil, 3000);
  assert.equal(JSON.stringify(lock).includes('secret'), false);
  assert.equal(JSON.parse(JSON.stringify(lock)).fence, '18446744073709551615');
});

test('the stop margin is a tenth of the ttl, between 50 ms and 2 s', () => {
  assert.equal(api.stopMargin(100), 50);
  assert.equal(api.stopMargin(3000), 300);
  assert.equal(api.stopMargin(60_000), 2000);
});

test('index.d.ts declares exactly what index.js exports', async () => {
  const { readFile } = await import('node:fs/promises');
  const dts = await readFile(new URL('../src/index.d.ts', import.meta.url), 'utf8');
  const declared = [...dts.matchAll(/^export declare (?:class|const|function) (\w+)/gm)].map((m) => m[1]);
  assert.deepEqual(declared.sort(), Object.keys(api).sort());
});

test('a Leader keeps its uint64 term exact as a BigInt, and its since as a Date', () => {
  const leader = new Leader(
    { name: 'e', value: 'pod', term: '18446744073709551615', since: { seconds: '1700000000', nanos: 250_000_000 }, remaining: { seconds: '2', nanos: 0 } },
    0,
  );
  assert.equal(leader.term, 18446744073709551615n);
  assert.equal(leader.since.getTime(), 1_700_000_000_250);
  assert.equal(leader.validityMs, 2000);
  assert.equal(JSON.parse(JSON.stringify(leader)).term, '18446744073709551615');
  assert.equal(new Leader({ name: 'e', value: '', term: '1', since: null, remaining: null }, 0).since, null);
});

test('an observation only steps forward: a higher term, or no leader after a leader', () => {
  const at = (term) => ({ term });
  assert.equal(stepsForward(null, null), true);
  assert.equal(stepsForward(null, at(4n)), true);
  assert.equal(stepsForward({ term: 4n, leader: true }, at(4n)), false);
  assert.equal(stepsForward({ term: 4n, leader: true }, at(3n)), false);
  assert.equal(stepsForward({ term: 4n, leader: true }, at(6n)), true);
  assert.equal(stepsForward({ term: 4n, leader: true }, null), true);
  assert.equal(stepsForward({ term: 4n, leader: false }, null), false);
  assert.equal(stepsForward({ term: 4n, leader: false }, at(4n)), false);
  assert.equal(stepsForward({ term: 4n, leader: false }, at(5n)), true);
});

test("an observation orders one term's proclaimed values by valueVersion", () => {
  const at = (term, valueVersion) => ({ term, valueVersion });
  const told = { term: 4n, valueVersion: 2n, leader: true };
  assert.equal(stepsForward(told, at(4n, 3n)), true, 'a newer value of the term');
  assert.equal(stepsForward(told, at(4n, 2n)), false, 'the same value again');
  assert.equal(stepsForward(told, at(4n, 1n)), false, 'an older value of the term');
  assert.equal(stepsForward(told, at(3n, 9n)), false, 'an older term, whatever its version');
  assert.equal(stepsForward(told, at(5n, 0n)), true, 'a new term starts at 0');
  assert.equal(stepsForward({ ...told, leader: false }, at(4n, 2n)), false, 'after no leader, not the last leader again');
});

test('a Leader without value_version is the campaign value (0n); JSON gives it as a string', () => {
  const leader = new Leader({ name: 'e', value: 'v', term: '2', value_version: '18446744073709551615', since: null, remaining: null }, 0);
  assert.equal(leader.valueVersion, 18446744073709551615n);
  assert.equal(JSON.parse(JSON.stringify(leader)).valueVersion, '18446744073709551615');
  assert.equal(new Leader({ name: 'e', value: 'v', term: '2', since: null, remaining: null }, 0).valueVersion, 0n);
});

// A session whose validity has already run out, as a process finds it on
// resuming from a pause: the timer that aborts the signal has not run yet
// (it cannot before this synchronous code ends), yet check() must throw.
const fakeCall = () => ({ cancelled: 0, cancel() { this.cancelled += 1; }, write() {} });

test('a lapsed lease fails check() before its timer runs, and a late extension does not revive it', () => {
  const call = fakeCall();
  const lease = new Lease(call, { resource: 'r', token: 't', fence: '1', validity: { seconds: '0', nanos: 0 } }, 1000, 1000);
  assert.equal(lease.signal.aborted, false, 'the timer has not run');
  assert.throws(() => lease.check(), (e) => e instanceof api.LockLostError);
  assert.equal(lease.signal.aborted, true);
  assert.equal(call.cancelled, 1, 'the session is cancelled (the daemon releases)');
  lease._event({ event: 'extended', extended: { resource: 'r', token: 't', fence: '1', validity: { seconds: '60', nanos: 0 } } });
  assert.equal(lease.extensions, 0, 'a late extension is not counted');
  assert.throws(() => lease.check(), (e) => e instanceof api.LockLostError);
});

test('a late extension of a lapsed lease ends it', () => {
  const lease = new Lease(fakeCall(), { resource: 'r', token: 't', fence: '1', validity: { seconds: '0', nanos: 0 } }, 1000, 1000);
  lease._event({ event: 'extended', extended: { resource: 'r', token: 't', fence: '1', validity: { seconds: '60', nanos: 0 } } });
  assert.equal(lease.signal.aborted, true, 'revived by a late extension');
});

test('a lapsed leadership fails check() before its timer runs; a late kept ends it', () => {
  const elected = { name: 'e', value: 'v', term: '3', token: 't', validity: { seconds: '0', nanos: 0 } };
  const first = new Leadership(fakeCall(), elected, 1000, 1000);
  assert.equal(first.signal.aborted, false, 'the timer has not run');
  assert.throws(() => first.check(), (e) => e instanceof api.LockLostError);
  const second = new Leadership(fakeCall(), elected, 1000, 1000);
  second._event({ event: 'kept', kept: { ...elected, validity: { seconds: '60', nanos: 0 } } });
  assert.equal(second.signal.aborted, true, 'revived by a late kept');
  assert.equal(second.extensions, 0);
});

test('proclaim by a lapsed leadership is refused at once, without a call, as LockNotHeldError', async () => {
  const elected = { name: 'e', value: 'v', term: '3', token: 't', validity: { seconds: '0', nanos: 0 } };
  const leadership = new Leadership(fakeCall(), elected, 1000, 1000, () => assert.fail('Proclaim was sent'));
  await assert.rejects(leadership.proclaim('moved'), (e) =>
    e instanceof api.LockNotHeldError && e.kind === 'not_held' && e.cause instanceof api.LockLostError);
  assert.equal(leadership.signal.aborted, true);
  assert.equal(leadership.value, 'v');
  assert.equal(leadership.valueVersion, 0n);
  await assert.rejects(leadership.proclaim(42), (e) => e instanceof api.InvalidArgumentError && e.field === 'value');
});

test('a valid lease passes check()', () => {
  const lease = new Lease(fakeCall(), { resource: 'r', token: 't', fence: '1', validity: { seconds: '60', nanos: 0 } }, 1000, 1000);
  lease.check();
  assert.equal(lease.signal.aborted, false);
  lease._gone('test over');
});
