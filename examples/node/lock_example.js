// redlockd from Node: the three things a client has to get right.
//
// 1. Acquire with a wait, do the work, release in `finally`; handle the
//    status codes (ABORTED: busy, UNAVAILABLE: retry later).
// 2. A fenced resource: pass the lock's fence with every write, and let the
//    resource refuse a fence smaller than the largest it has seen. A holder
//    that paused past its lock's validity is then harmless.
// 3. A `Hold` session: the daemon keeps the lock while the stream is open;
//    on `lost`, stop working at once.
//
// Usage: node lock_example.js [ADDR] [--hold-seconds N]
// ADDR defaults to $REDLOCK_ADDR, else 127.0.0.1:50051. Exits 0 when all
// three went as expected, 3 if the session's lock was lost, 1 on any other
// unexpected outcome.

'use strict';

const path = require('node:path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const EXIT_LOST = 3;

// The contract, loaded straight from the repository's proto/ directory.
const definition = protoLoader.loadSync('redlock/v1/lock.proto', {
  includeDirs: [path.join(__dirname, '..', '..', 'proto')],
  keepCase: true, // field names as in the .proto: was_held, not wasHeld
  longs: String, // uint64 fences arrive as decimal strings: compare as BigInt
  defaults: true,
  oneofs: true, // event.event names the field that is set
});
const { LockService } = grpc.loadPackageDefinition(definition).redlock.v1;

const seconds = (s) => ({ seconds: Math.floor(s), nanos: Math.round((s % 1) * 1e9) });
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A unary call as a promise, with a deadline. */
function call(client, method, request, timeoutMs) {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: Date.now() + timeoutMs }, (error, response) =>
      error ? reject(error) : resolve(response),
    );
  });
}

class StaleFence extends Error {}

/**
 * A toy resource that checks fences, as a database row, a file store or a
 * queue consumer should: it keeps the largest fence seen and refuses any
 * smaller one (equal is the same holder writing again).
 */
class FencedStore {
  constructor() {
    this.maxFence = 0n;
    this.data = new Map();
  }

  write(key, value, fence) {
    const f = BigInt(fence);
    if (f < this.maxFence) throw new StaleFence(`fence ${f} < ${this.maxFence}`);
    this.maxFence = f;
    this.data.set(key, value);
  }
}

/** 1. Acquire with a wait; work; release in `finally`. */
async function acquireAndRelease(client, store) {
  let lock;
  try {
    const request = { resource: 'examples/report', ttl: seconds(10), wait: seconds(5), owner: 'node-example' };
    ({ lock } = await call(client, 'Acquire', request, 15000));
  } catch (error) {
    if (error.code === grpc.status.ABORTED) {
      console.log('busy: someone else held examples/report for the whole wait');
    } else if (error.code === grpc.status.UNAVAILABLE) {
      console.log(`not enough masters answered; nothing is locked; retry later: ${error.details}`);
    }
    throw error;
  }
  console.log(`1. acquired ${lock.resource} fence=${lock.fence} valid for ${lock.validity.seconds}s`);
  let wasHeld;
  try {
    store.write('report', 'generated', lock.fence); // the critical section
  } finally {
    ({ was_held: wasHeld } = await call(client, 'Release', { resource: lock.resource, token: lock.token }, 5000));
    if (!wasHeld) {
      // The lock expired before the release: another holder may have overlapped.
      console.error('warning: the lock had expired before the release');
    }
  }
  console.log(`   released (was_held=${wasHeld})`);
}

/** 2. A holder that pauses past its validity: its late write is refused. */
async function staleHolderIsRefused(client, store) {
  const { lock: slow } = await call(client, 'Acquire', { resource: 'examples/row', ttl: seconds(0.3) }, 5000);
  // ... and `slow` pauses (GC, swap) for longer than 0.3 s, without knowing.
  // The next client waits; it is granted the lock when `slow`'s expires.
  const request = { resource: 'examples/row', ttl: seconds(10), wait: seconds(5) };
  const { lock: fast } = await call(client, 'Acquire', request, 10000);
  try {
    if (BigInt(fast.fence) <= BigInt(slow.fence)) throw new Error(`fences did not grow: ${slow.fence}, ${fast.fence}`);
    store.write('row', "fast's value", fast.fence);
    try {
      store.write('row', "slow's value", slow.fence); // `slow` wakes up and writes
      throw new Error('a stale fence was accepted');
    } catch (refused) {
      if (!(refused instanceof StaleFence)) throw refused;
      console.log(`2. the stale holder's write was refused: ${refused.message}`);
    }
  } finally {
    await call(client, 'Release', { resource: fast.resource, token: fast.token }, 5000);
  }
  if (store.data.get('row') !== "fast's value") throw new Error('the stale write landed');
}

/** A Hold session: write requests to the stream, read events as they come. */
class Session {
  static open(client, resource, ttl) {
    return new Promise((resolve, reject) => {
      const session = new Session(client.Hold());
      session.stream.on('data', (event) => {
        if (event.event === 'acquired') {
          session.lock = event.acquired;
          resolve(session);
        } else if (event.event === 'extended') {
          session.extensions += 1;
        } else if (event.event === 'lost') {
          session.lost = event.lost.reason; // the worker checks this before every step
        } else if (event.event === 'released') {
          session.released = event.released.was_held;
          session.done();
        }
      });
      session.stream.on('error', (error) => {
        if (!session.lock) return reject(error);
        // The stream broke: the lock is no longer guaranteed.
        session.lost = session.lost || `stream broke: ${grpc.status[error.code]}`;
      });
      session.stream.on('end', () => {
        if (session.released === null) session.lost = session.lost || 'the session ended';
        session.done();
      });
      session.stream.write({ acquire: { resource, ttl: seconds(ttl) } });
    });
  }

  constructor(stream) {
    this.stream = stream;
    this.lock = null;
    this.extensions = 0;
    this.lost = null;
    this.released = null;
    this.ended = new Promise((resolve) => (this.done = resolve));
  }

  /** Sends `release`, waits (5 s at most) for `released`, half-closes. */
  async release() {
    this.stream.write({ release: {} });
    let timer;
    await Promise.race([this.ended, new Promise((resolve) => (timer = setTimeout(resolve, 5000)))]);
    clearTimeout(timer);
    this.stream.end();
    return this.released;
  }

  close() {
    this.stream.cancel();
  }
}

/** 3. Work in small steps inside a session; stop the moment it is lost. */
async function holdSession(client, store, holdSeconds) {
  const session = await Session.open(client, 'examples/session', 1);
  console.log(`3. holding ${session.lock.resource} fence=${session.lock.fence}`);
  const deadline = Date.now() + holdSeconds * 1000;
  let step = 0;
  while (Date.now() < deadline) {
    if (session.lost) {
      console.log(`   lock lost after ${step} steps (${session.lost}): work abandoned`);
      session.close();
      return EXIT_LOST;
    }
    store.write('session', `step ${step}`, session.lock.fence);
    step += 1;
    await sleep(50);
  }
  const wasHeld = await session.release();
  console.log(`   ${step} steps, ${session.extensions} extensions, released (was_held=${wasHeld})`);
  if (!wasHeld || session.extensions < 1) throw new Error('the session should have been extended and still held');
  return 0;
}

function parseArgs(argv) {
  const args = { addr: process.env.REDLOCK_ADDR || '127.0.0.1:50051', holdSeconds: 1.5 };
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === '--hold-seconds') args.holdSeconds = Number(argv[++i]);
    else args.addr = argv[i];
  }
  args.addr = args.addr.replace(/^http:\/\//, '');
  return args;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const client = new LockService(args.addr, grpc.credentials.createInsecure());
  const store = new FencedStore();
  try {
    await acquireAndRelease(client, store);
    await staleHolderIsRefused(client, store);
    const code = await holdSession(client, store, args.holdSeconds);
    if (code === 0) console.log('ok');
    return code;
  } catch (error) {
    const what = error.code !== undefined ? `status ${grpc.status[error.code]}: ${error.details}` : error.message;
    console.error(`unexpected ${what}`);
    return 1;
  } finally {
    client.close();
  }
}

main().then((code) => {
  process.exitCode = code;
});
