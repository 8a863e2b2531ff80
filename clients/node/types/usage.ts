// A typed use of the package, checked by `tsc -p types/tsconfig.json`: the
// hand-written src/index.d.ts must describe what the README shows, and
// refuse what is wrong (each @ts-expect-error must be an error).

import {
  Client,
  Lease,
  Lock,
  LockHeldError,
  LockLostError,
  RedlockdError,
  InvalidArgumentError,
  Leader,
  Leadership,
  type ErrorKind,
  type Validity,
} from 'redlockd-client';

async function usage(): Promise<bigint> {
  const client = new Client('https://locks.internal:50051', {
    token: 'secret',
    rootCert: '-----BEGIN CERTIFICATE-----',
    deadlineMs: 5000,
  });
  const lock: Lock = await client.acquire('orders/42', { ttlMs: 10_000, waitMs: 5000, owner: 'billing' });
  const fence: bigint = lock.fence;
  const permit: number = (await client.acquire('exports', { ttlMs: 10_000, limit: 4 })).permit;
  const left: number = lock.remainingMs() + lock.validUntil + lock.validityMs;
  const extended: Lock = await client.extend(lock, { ttlMs: 10_000 });
  const validity: Validity = await client.validate(extended, { deadlineMs: 1000 });
  const wasHeld: boolean = await client.release({ resource: lock.resource, token: lock.token });
  const reader: Lock = await client.acquire('config/app', { ttlMs: 10_000, shared: true });

  const total: number = await client.using('orders/42', { ttlMs: 10_000 }, async (signal: AbortSignal, held: Lock) => {
    signal.throwIfAborted();
    return Number(held.fence) + left;
  });

  const lease: Lease = await client.hold('orders/43', { ttlMs: 10_000 });
  lease.signal.addEventListener('abort', () => {
    const reason = lease.signal.reason as LockLostError;
    console.error(reason.reason, reason.code, reason.details);
  });
  lease.check();
  const released: boolean = await lease.release();

  const leadership: Leadership = await client.campaign('scheduler', {
    value: 'pod-a',
    ttlMs: 10_000,
    signal: AbortSignal.timeout(60_000),
  });
  const term: bigint = leadership.term;
  leadership.signal.addEventListener('abort', () => console.error((leadership.signal.reason as LockLostError).reason));
  leadership.check();
  const leftToLead: number = leadership.remainingMs() + leadership.validUntil + leadership.validityMs + leadership.extensions;
  const current: Leader | null = await client.leader('scheduler', { deadlineMs: 1000 });
  const since: Date | null = current?.since ?? null;
  const proclaimed: bigint = await leadership.proclaim('pod-a:9090', { deadlineMs: 1000 });
  const published: bigint = leadership.valueVersion + (current?.valueVersion ?? 0n) + proclaimed;
  for await (const change of client.observe('scheduler', { signal: leadership.signal })) {
    if (change !== null && change.term > term) break;
  }
  const wasLeader: boolean = (await leadership.resign()) || (await client.resign(leadership.name, leadership.token));

  try {
    await client.acquire('orders/42', { ttlMs: 1000 });
  } catch (error) {
    if (error instanceof LockHeldError) console.log(error.code, error.details, error.retryable);
    if (error instanceof InvalidArgumentError) console.log(error.field);
    if (error instanceof RedlockdError) {
      const kind: ErrorKind = error.kind;
      console.log(kind);
    }
  }

  // @ts-expect-error the ttl is required
  await client.acquire('orders/42', {});
  // @ts-expect-error fences are BigInt, not number
  const wrong: number = lock.fence;
  // @ts-expect-error durations are milliseconds, not strings
  await client.acquire('orders/42', { ttlMs: '10s' });
  // @ts-expect-error shared is a boolean, not a mode name
  await client.acquire('config/app', { ttlMs: 10_000, shared: 'SHARED' });
  // @ts-expect-error a Lease is made by hold(), not constructed
  new Lease();
  // @ts-expect-error a campaign's ttl is required
  await client.campaign('scheduler', { value: 'pod-a' });
  // @ts-expect-error terms are BigInt, not number
  const wrongTerm: number = leadership.term;
  // @ts-expect-error a proclaimed value is a string
  await leadership.proclaim(8080);

  client.close();
  return fence + term + published + BigInt(total + Number(wasHeld) + Number(released) + validity.validityMs + wrong + leftToLead + wrongTerm + Number(wasLeader) + Number(since));
}

export { usage };
