// The Node candidate of the take-over run (clients/takeover/harness.py):
//
//     node candidate.mjs ADDRESS LOG TTL_MS
//
// It campaigns for the election "takeover" with the value "node-<pid>"
// through client.campaign (the package in clients/node, imported from its
// source, with its node_modules); elected, it acts every ACT_EVERY_MS while
// leadership.check() passes, then, once it throws, records the loss and
// campaigns again, until killed. Every event is one JSON line, one
// O_APPEND write to LOG, as the Python candidate writes them
// (clients/takeover/python/candidate.py): campaign, elected (term, t,
// wall), act (term, t, rem_ms), lost (term, t, reason), error. Times are
// process.hrtime.bigint(), which libuv reads from CLOCK_MONOTONIC, the clock
// the other candidates and the harness read too; an act's t is read before
// the check that lets it happen. check(), not the signal: it reads the
// clock, so a leader resumed after a pause past its validity stands down
// before acting, whichever of its timers the event loop runs first.
// SIGTERM resigns a leadership held (for a second at most), closes the
// client and exits 143.

import { openSync, writeSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Client, LockLostError, RedlockdError } from '../../node/src/index.js';

const LANG = 'node';
const ELECTION = 'takeover';
/** Time between two acts of a leader. */
const ACT_EVERY_MS = 50;

/** One JSON line; BigInts (term, t) as JSON numbers, exactly. */
function line(fields) {
  const parts = Object.entries(fields).map(
    ([key, value]) => `${JSON.stringify(key)}:${typeof value === 'bigint' ? value.toString() : JSON.stringify(value)}`,
  );
  return `{${parts.join(',')}}\n`;
}

function writer(path) {
  const fd = openSync(path, 'a');
  // One line, one write(2) on a file opened for appending.
  return (event) => writeSync(fd, line({ t: process.hrtime.bigint(), ...event, lang: LANG, pid: process.pid }));
}

async function campaign(address, log, ttlMs) {
  const write = writer(log);
  const client = new Client(address, { deadlineMs: 30_000 });
  let lead = null;
  process.once('SIGTERM', () => {
    const exit = () => process.exit(143);
    setTimeout(exit, 1000).unref();
    Promise.resolve(lead?.resign())
      .catch(() => {})
      .then(() => client.close())
      .then(exit, exit);
  });
  for (;;) {
    write({ ev: 'campaign' });
    try {
      lead = await client.campaign(ELECTION, { value: `${LANG}-${process.pid}`, ttlMs });
    } catch (error) {
      if (!(error instanceof RedlockdError)) throw error;
      // Not elected (the daemon refused, or the stream broke while
      // waiting): say so and stand again.
      write({ ev: 'error', error: error.message });
      await sleep(100);
      continue;
    }
    const term = lead.term;
    write({ ev: 'elected', term, wall: Date.now() / 1000 });
    for (;;) {
      const t = process.hrtime.bigint();
      try {
        lead.check();
      } catch (lost) {
        if (!(lost instanceof LockLostError)) throw lost;
        write({ ev: 'lost', term, reason: lost.message });
        break;
      }
      write({ ev: 'act', term, t, rem_ms: Math.round(lead.remainingMs()) });
      await sleep(ACT_EVERY_MS);
    }
    // Over already: resolves false at once, with no call.
    await lead.resign();
    lead = null;
  }
}

const args = process.argv.slice(2);
if (args.length !== 3) {
  process.stderr.write('usage: node candidate.mjs ADDRESS LOG TTL_MS\n');
  process.exit(2);
}
await campaign(args[0], args[1], Number.parseInt(args[2], 10));
