// Bounded polling for a condition, instead of sleeping a fixed time.

import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';

/** Generous bound on any condition the tests wait for. */
export const LIMIT_MS = 15_000;

/** Resolves once `condition()` is truthy (checked every 20 ms); throws after `limitMs`. */
export async function until(condition, what, limitMs = LIMIT_MS) {
  const limit = performance.now() + limitMs;
  while (performance.now() < limit) {
    if (await condition()) return;
    await sleep(20);
  }
  throw new Error(`timed out after ${limitMs} ms waiting until ${what}`);
}

/** Resolves with `signal`'s reason once it aborts; throws after `limitMs`. */
export async function aborted(signal, limitMs = LIMIT_MS) {
  if (!signal.aborted) await once(signal, 'abort', { signal: AbortSignal.timeout(limitMs) });
  return signal.reason;
}
