//! The master's side of a lock on several resources at once
//! (`crate::redlock::multi`): one script call takes every key of the lock
//! on this master, or none.

use super::scripts::Op;
use super::{array, integer, key, millis, unsigned, ValkeyMaster};
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
pub(crate) const ACQUIRE_ALL: &str = include_str!("lua/acquire_all.lua");

impl ValkeyMaster {
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
