//! What `redlockd-bench --workloads script` needs to run the batch script
//! on a master by itself and take its cost apart (docs/benchmarks.md,
//! "What a master spends per cycle"): the script a daemon at the default
//! settings sends, the same without the fence's record (and without its
//! reads), the headers of a plain acquire and release, and how many calls
//! a daemon keeps out per master. Not an API: the bench is its only user,
//! and a change of the script's layout shows there as replies that no
//! longer read as grants and releases.

use super::pack::Pack;
use super::{assemble, batch_script, header, Constants, Op, ACQUIRE, RELEASE};
use crate::config::Counterfactuals;

/// The lines of [`ACQUIRE`] that write the fence's record where a proposal
/// is taken: the record's fields, and the fence hash's expiry.
const FENCE_RECORD_LINES: [&str; 2] = [
    "  redis.call('HSET', KEYS[2], 'max', ARGV[3], 'holder', ARGV[1], 'fence', ARGV[3], 'owner', ARGV[4], 'kind', ARGV[5], 'at', now, 'ep', OPT[10], 'ft', 'FENCE_TTL_MS')\n",
    "  if f[9] ~= 'FENCE_TTL_MS' or math.floor(p / FENCE_REFRESH_US) ~= math.floor(m / FENCE_REFRESH_US) then redis.call('PEXPIRE', KEYS[2], 'FENCE_TTL_MS') end\n",
];

/// The reads of the fence hash, in [`ACQUIRE`] and in [`RELEASE`], and what
/// replaces them when removed: nothing found.
const FENCE_READS: [(Op, &str, &str); 2] = [
    (
        Op::Acquire,
        "local f = redis.call('HMGET', KEYS[2], 'max', 'nb', 'delay', 'lu', 'lim', 'wm', 'ww', 'holder', 'ft')",
        "local f = {}",
    ),
    (
        Op::Release,
        "local h = redis.call('HMGET', KEYS[2], 'holder', 'lu', 'nb', 'wm', 'ep')",
        "local h = {}",
    ),
];

/// Script calls a daemon keeps out at one master at once.
pub const CALLS_IN_FLIGHT: usize = crate::valkey::batch::MAX_IN_FLIGHT;

/// The batch script of a daemon at the default settings, as it is sent.
pub fn daemon_script() -> String {
    batch_script(Counterfactuals::default(), Constants::defaults())
}

/// [`daemon_script`] with a plain acquire that writes no fence record (it
/// still takes the `SET NX`, reads the hash and raises the horizon): the
/// difference between the two is what the fence's own writes cost. `None`
/// if the record's lines are no longer in the acquire's body.
pub fn script_without_fence_record() -> Option<String> {
    ablated(false)
}

/// [`script_without_fence_record`] whose plain acquire and release do not
/// read the fence hash either (a release then finds no waiter to announce
/// to and no terms to honour): what is left is the script's own machinery
/// around `SET NX` and `DELIFEQ`. `None` if a read is no longer there.
pub fn script_without_fence_record_or_reads() -> Option<String> {
    ablated(true)
}

fn ablated(without_reads: bool) -> Option<String> {
    let mut acquire = ACQUIRE.to_owned();
    for line in FENCE_RECORD_LINES {
        if !acquire.contains(line) {
            return None;
        }
        acquire = acquire.replace(line, "");
    }
    let mut release = RELEASE.to_owned();
    if without_reads {
        for (op, read, none) in FENCE_READS {
            let body = if op == Op::Acquire {
                &mut acquire
            } else {
                &mut release
            };
            if !body.contains(read) {
                return None;
            }
            *body = body.replace(read, none);
        }
    }
    Some(assemble(Constants::defaults(), |op| match op {
        Op::Acquire => acquire.clone(),
        Op::Release => release.clone(),
        other => other.lua().to_owned(),
    }))
}

/// Batches of at least this many operations carry their arguments packed
/// ([`packed_args`]); smaller ones as one value each.
pub const PACKED_FROM: usize = crate::valkey::batch::PACK_FROM;

/// A batch's arguments (the operations' count, then each one's header and
/// arguments) as the one value the batch script takes them in
/// ([`super::pack`]).
pub fn packed_args<'a>(args: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut packed = Pack::default();
    for arg in args {
        packed.push(arg);
    }
    packed.finish()
}

/// The header of a plain acquire with `args` arguments (keys: the lock and
/// its fence hash), as `super::super::ops` sends it.
pub fn acquire_header(args: usize) -> Option<i64> {
    header(Op::Acquire, 2, args)
}

/// The header of a plain release with `args` arguments (keys: the lock, its
/// fence hash and the resource's own fence hash).
pub fn release_header(args: usize) -> Option<i64> {
    header(Op::Release, 3, args)
}
