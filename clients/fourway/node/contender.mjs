// The Node contender of the four-runtime test (clients/fourway/harness.py).
//
//   node contender.mjs ADDRESS LOG ROUNDS
//
// Holds `fourway/shared` ROUNDS times through `client.using` (the package
// in clients/node, imported by path: its node_modules come from `npm ci`
// there). In each critical section it appends `node <fence> start <ns>` to
// LOG, sleeps a few random milliseconds, checks the lock's signal and
// appends `node <fence> end <ns>` (or `lost`). Each line is one O_APPEND
// write. Times are CLOCK_MONOTONIC nanoseconds (process.hrtime.bigint(),
// libuv's uv_hrtime), the clock the other three contenders read too.
// A retryable failure (UNAVAILABLE: masters slower than node_timeout on a
// starved machine) before the section is retried, up to ATTEMPTS times; a
// release that fails after it is reported on stderr and left to the ttl.
// Exits 1 if the lock was ever lost.

import fs from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client } from '../../node/src/index.js';

const RUNTIME = 'node';
const RESOURCE = 'fourway/shared';
/** Tries per section on retryable failures. */
const ATTEMPTS = 20;

const [address, log, rounds] = process.argv.slice(2);
const fd = fs.openSync(log, 'a');
const line = (fence, what) => fs.writeSync(fd, `${RUNTIME} ${fence} ${what} ${process.hrtime.bigint()}\n`);

line(0, 'clock');
const client = new Client(address, { deadlineMs: 90_000 });
let status = 0;
try {
  for (let i = 0; i < Number(rounds); i += 1) {
    let entered = false;
    for (let attempt = 1; ; attempt += 1) {
      try {
        await client.using(RESOURCE, { ttlMs: 5_000, waitMs: 60_000 }, async (signal, lock) => {
          entered = true;
          line(lock.fence, 'start');
          await sleep(5 + Math.random() * 20);
          if (signal.aborted) {
            line(lock.fence, 'lost');
            status = 1;
          } else {
            line(lock.fence, 'end');
          }
        });
      } catch (error) {
        if (!entered && error.retryable && attempt < ATTEMPTS) continue;
        if (!entered) throw error;
        console.error(`node contender: release: ${error.message}`);
      }
      break;
    }
    // Outside the lock: a pause that lets the other runtimes in.
    await sleep(10 + Math.random() * 20);
  }
} finally {
  client.close();
  fs.closeSync(fd);
}
process.exitCode = status;
