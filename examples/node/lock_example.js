// redlockd from Node, on the redlockd-client package (clients/node): the
// three things a client has to get right.
//
// 1. Acquire with a wait, do the work, release in `finally`; tell the
//    outcomes apart (LockHeldError: busy; UnavailableError: retry later).
// 2. A fenced resource: pass the lock's fence with every write, and let the
//    resource refuse a fence smaller than the largest it has seen. A holder
//    that paused past its lock's validity is then harmless.
// 3. A session (`client.using`): the daemon keeps the lock while the work
//    runs; the work stops as soon as the signal says the lock is gone.
//
// Usage: node lock_example.js [ADDR] [--hold-seconds N]
// ADDR defaults to $REDLOCK_ADDR, else 127.0.0.1:50051. Exits 0 when all
// three went as expected, 3 if the session's lock was lost, 1 on any other
// unexpected outcome.

import { setTimeout as sleep } from 'node:timers/promises';
import { Client, LockHeldError, LockLostError, RedlockdError, UnavailableError } from 'redlockd-client';

const EXIT_LOST = 3;

class StaleFence extends Error {}

/**
 * A toy resource that checks fences, as a database row, a file store or a
 * queue consumer should: it keeps the largest fence seen and refuses any
 * smaller one (equal is the same holder writing again).
 */
class FencedStore {
  maxFence = 0n;
  data = new Map();

  write(key, value, fence) {
    if (fence < this.maxFence) throw new StaleFence(`fence ${fence} < ${this.maxFence}`);
    this.maxFence = fence;
    this.data.set(key, value);
  }
}

/** 1. Acquire with a wait; work; release in `finally`. */
async function acquireAndRelease(client, store) {
  let lock;
  try {
    lock = await client.acquire('examples/report', { ttlMs: 10_000, waitMs: 5_000, owner: 'node-example' });
  } catch (error) {
    if (error instanceof LockHeldError) console.log('busy: someone else held examples/report for the whole wait');
    if (error instanceof UnavailableError) console.log('not enough masters answered; nothing is locked; retry later');
    throw error;
  }
  console.log(`1. acquired ${lock.resource} fence=${lock.fence} valid for ${Math.floor(lock.validityMs / 1000)}s`);
  let wasHeld;
  try {
    store.write('report', 'generated', lock.fence); // the critical section
  } finally {
    wasHeld = await client.release(lock);
    // false: the lock expired before the release; another holder may have overlapped.
    if (!wasHeld) console.error('warning: the lock had expired before the release');
  }
  console.log(`   released (was_held=${wasHeld})`);
}

/** 2. A holder that pauses past its validity: its late write is refused. */
async function staleHolderIsRefused(client, store) {
  const slow = await client.acquire('examples/row', { ttlMs: 300 });
  // ... and `slow` pauses (GC, swap) for longer than 0.3 s, without knowing.
  // The next client waits; it is granted the lock when `slow`'s expires.
  const fast = await client.acquire('examples/row', { ttlMs: 10_000, waitMs: 5_000 });
  try {
    if (fast.fence <= slow.fence) throw new Error(`fences did not grow: ${slow.fence}, ${fast.fence}`);
    store.write('row', "fast's value", fast.fence);
    try {
      store.write('row', "slow's value", slow.fence); // `slow` wakes up and writes
      throw new Error('a stale fence was accepted');
    } catch (refused) {
      if (!(refused instanceof StaleFence)) throw refused;
      console.log(`2. the stale holder's write was refused: ${refused.message}`);
    }
  } finally {
    await client.release(fast);
  }
  if (store.data.get('row') !== "fast's value") throw new Error('the stale write landed');
}

/** 3. Work in small steps inside a session; stop the moment the lock is gone. */
async function holdSession(client, store, holdSeconds) {
  let steps = 0;
  try {
    await client.using('examples/session', { ttlMs: 1_000 }, async (signal, lock) => {
      console.log(`3. holding ${lock.resource} fence=${lock.fence}`);
      const end = performance.now() + holdSeconds * 1000;
      while (performance.now() < end) {
        signal.throwIfAborted(); // lost, ended by the daemon, or gone quiet: stop
        store.write('session', `step ${steps}`, lock.fence);
        steps += 1;
        await sleep(50);
      }
    });
  } catch (error) {
    if (!(error instanceof LockLostError)) throw error;
    console.log(`   lock lost after ${steps} steps (${error.reason}): work abandoned`);
    return EXIT_LOST;
  }
  console.log(`   ${steps} steps, released`);
  return 0;
}

function parseArgs(argv) {
  const args = { addr: process.env.REDLOCK_ADDR || '127.0.0.1:50051', holdSeconds: 1.5 };
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === '--hold-seconds') args.holdSeconds = Number(argv[++i]);
    else args.addr = argv[i];
  }
  return args;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const client = new Client(args.addr);
  const store = new FencedStore();
  try {
    await acquireAndRelease(client, store);
    await staleHolderIsRefused(client, store);
    const code = await holdSession(client, store, args.holdSeconds);
    if (code === 0) console.log('ok');
    return code;
  } catch (error) {
    console.error(`unexpected ${error instanceof RedlockdError ? error.message : error.stack}`);
    return 1;
  } finally {
    client.close();
  }
}

process.exitCode = await main();
