//! The master's side of a lock on several resources at once
//! (`crate::redlock::multi`): one script call takes every key of the lock
//! on this master, or none.

use super::scripts::Op;
use super::{array, integer, key, millis, unsigned, FredNode};
use crate::redlock::fence::FenceRead;
use crate::redlock::{AcquireAllVote, LockKeys, NodeError, Token};
use futures::future::BoxFuture;
use futures::FutureExt;
use std::time::Duration;

/// KEYS: lock 1, fence 1, lock 2, fence 2, ... ARGV:
/// token, ttl ms, the number of resources n, waiter marker ttl ms ('0':
/// the caller will not wait). Refused because some are held, a caller
/// that will wait marks each held resource's fence hash (`mark`,
/// `super::scripts::batch_script`: it waits in every resource's queue),
/// so that their releases announce
/// themselves. The grant keeps the commit round (no proposal). All or
/// none, atomically (one script): first every resource is read (the fence
/// hash's `max`, lock-delay `nb`, semaphore limit `lim` and waiter marker
/// `wm` in one `HMGET`, the lock key's PTTL, and whether a
/// semaphore's permit of it is held here: `lim` names a limit
/// and one of its permit keys exists, as `ACQUIRE` checks, answered as
/// held with no known expiry, so a plain or multi-resource lock never
/// stands beside a semaphore's permits); if any lock key exists, or any
/// free key's lock-delay
/// still runs (as in `ACQUIRE`), nothing is written and the answer is
/// `{0, wait}` (held: `wait` the longest PTTL among the held keys, -1 if
/// one has no expiry) or `{0, wait, 'delay'}` (only delays: the longest
/// one left). Else every key is `SET NX PX` (they are all free, the script
/// runs alone) and the answer is `{1, now_micros, max 1, ..., max n}`.
/// Reads before it writes, as `ACQUIRE`: an operation that raises (a key
/// of another type) leaves nothing behind. The body indexes `KEYS` and
/// `ARGV` from its offsets `k` and `a` itself (its key count varies), so
/// it uses no `KEYS[n]` that `at_offsets` would rewrite.
pub(crate) const ACQUIRE_ALL: &str = r#"
local n = tonumber(ARGV[a + 2])
local maxes, wait, held, delayed, marks = {}, 0, false, false, {}
for i = 0, n - 1 do
  local lock, fence = KEYS[k + 2 * i], KEYS[k + 2 * i + 1]
  local f = redis.call('HMGET', fence, 'max', 'nb', 'lim', 'wm')
  maxes[i + 1] = f[1] or '0'
  local lim = f[3]
  if lim then
    local ks = {}
    for j = 0, tonumber(lim) - 1 do ks[j + 1] = lock .. '\31' .. j end
    if redis.call('EXISTS', unpack(ks)) > 0 then
      held = true
      wait = -1
      marks[#marks + 1] = {fence, f[4]}
    end
  end
  local pttl = redis.call('PTTL', lock)
  if pttl ~= -2 then
    held = true
    marks[#marks + 1] = {fence, f[4]}
    if pttl == -1 or wait == -1 then wait = -1 elseif pttl > wait then wait = pttl end
  elseif f[2] and not held then
    local left = tonumber(f[2]) - now_ms()
    if left > 0 then
      delayed = true
      if left > wait then wait = left end
    end
  end
end
if held then
  if ARGV[a + 3] ~= '0' then
    local done = {}
    for _, m in ipairs(marks) do
      if not done[m[1]] then
        done[m[1]] = true
        mark(m[1], ARGV[a + 3], m[2])
      end
    end
  end
  return {0, tostring(wait)}
end
if delayed then return {0, string.format('%d', wait), 'delay'} end
for i = 0, n - 1 do
  redis.call('SET', KEYS[k + 2 * i], ARGV[a], 'PX', ARGV[a + 1])
end
local out = {1, now_micros()}
for i = 1, n do out[i + 2] = maxes[i] end
return out
"#;

impl FredNode {
    /// [`crate::redlock::Node::acquire_all`] on this master: one
    /// [`ACQUIRE_ALL`] operation in the next batch.
    pub(super) fn run_acquire_all(
        &self,
        keys: &[LockKeys],
        token: &Token,
        ttl: Duration,
        waiter_marker: Duration,
    ) -> BoxFuture<'static, Result<AcquireAllVote, NodeError>> {
        let names = keys
            .iter()
            .flat_map(|k| [key(&k.lock), key(&k.fence)])
            .collect();
        let count = keys.len();
        let reply = self.run(
            Op::AcquireAll,
            names,
            vec![
                token.expose().into(),
                millis(ttl),
                count.to_string().into(),
                millis(waiter_marker),
            ],
        );
        async move {
            let fields = array(reply.await?)?;
            match fields.as_slice() {
                [flag, now, maxes @ ..] if integer(flag)? == 1 && maxes.len() == count => {
                    let now_micros = unsigned(now)?;
                    let reads = maxes
                        .iter()
                        .map(|max| {
                            Ok(FenceRead {
                                max: unsigned(max)?,
                                now_micros,
                                took: false,
                            })
                        })
                        .collect::<Result<Vec<_>, NodeError>>()?;
                    Ok(AcquireAllVote::Granted(reads))
                }
                [_, wait] => Ok(AcquireAllVote::Refused {
                    holder_ttl: u64::try_from(integer(wait)?)
                        .ok()
                        .map(Duration::from_millis),
                    delayed: false,
                }),
                [_, left, _delay] => Ok(AcquireAllVote::Refused {
                    holder_ttl: Some(Duration::from_millis(unsigned(left)?)),
                    delayed: true,
                }),
                other => Err(NodeError::Protocol(format!("acquire_all: {other:?}"))),
            }
        }
        .boxed()
    }
}
