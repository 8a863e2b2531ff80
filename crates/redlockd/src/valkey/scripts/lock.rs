//! The plain lock's operations on one master: acquire (with its one-round
//! fence proposal), commit, extend, release, re-create, check and inspect.
//! Each is a Lua body in `lua/`, run inside the batch script
//! ([`batch_script`](super::batch_script)).

/// KEYS: lock, fence. ARGV: token, ttl ms,
/// proposed fence (0: none), then the holder as [`COMMIT_FENCE`] takes
/// it: owner, kind. Then the optional ones (`OPT[n]`, '0' where not sent,
/// see [`batch_script`](super::batch_script)): 6, the waiter marker ttl ms
/// ('0': the caller will not wait in the queue); 7 and 8, the grant's
/// terms: lock_delay ms, hold_at_least ms; 9, the writer mark ms; 10, the
/// acquisition's epoch ('0': none; `crate::redlock::claim`), recorded
/// with the holder where the proposal is taken. Where the SET NX succeeds
/// and the record still names the token (left by an earlier acquisition of
/// the request id that ended: the key was free), the record takes this
/// epoch at once, so that the earlier one's stale epoch does not refuse
/// this acquisition's commit, while a take-over arriving after this SET
/// still does.
///
/// Everything the acquire needs to know before its `SET NX` is in the one
/// `HMGET` of the fence hash (no other key read in the common
/// cycle): `max`, the terms (`nb`, `delay`, `lu`), the semaphore limit
/// field `lim`, the waiter marker `wm` and `ft`, the `fence_ttl` the hash
/// was last renewed to. First, before anything is
/// written: returns `{0, '0', 'limit', limit}` when a semaphore's permit of
/// the resource is held here (`lim` names its limit, and one of its permit
/// keys exists: `crate::redlock::semaphore`); a `lim` whose permits are all
/// gone is stale, and a grant here deletes it.
/// Returns `{1, old max, now_micros, took}` when the SET NX succeeded, else
/// `{0, pttl}`, or `{0, left, 'delay'}` when the key is free but a
/// lock-delay still runs (`left` ms until the master's clock reaches the
/// fence hash's `nb`, see [`COMMIT_FENCE`]), or `{0, pttl, 'own'}` when an
/// acquisition with a request id (an epoch) finds the key held by its own
/// token: an earlier acquisition of the request id holds it, and the
/// engine resumes that lock instead of cleaning up
/// (`crate::redlock::attempt`).
/// Where refused because the key is held, a caller that will wait marks
/// the resource as waited for (`mark`, see [`batch_script`](super::batch_script): the fence
/// hash's `wm`), so that the holder's release announces itself (see
/// [`RELEASE`] and `super::rw::RELEASE_SHARED`: the key may hold
/// shared holders' sentinel). Refused because shared holders hold here
/// (the lock key holds the sentinel, `crate::redlock::rw`), it also sets
/// the writer-waiting marker: the fence hash's `ww` = now + writer mark ms
/// (0: none), which refuses new shared grants until then.
/// `took` is 1 where the
/// proposal was taken: old max below it and `now <= F <= now + window`
/// (the window and the fence hash's ttl are the daemon's constants,
/// `PROPOSAL_WINDOW_US` and `FENCE_TTL_MS`);
/// then the script writes what the commit would ([`COMMIT_FENCE`], with
/// `F` as the fence and the acquire's instant as `at`): `max`, `holder`,
/// `fence`, `owner`, `kind`, `at`, the lock-delay (`delay`, `nb`) and the
/// hold-at-least (`lu`), clears the writer-waiting marker (`ww`: the writer
/// it was set for is in, as the commit clears it), renews the hash's
/// expiry where `F` is the first fence of a new period of
/// `FENCE_REFRESH_US` (`crate::redlock::refresh_period`: once per period,
/// not per grant) or where `ft` names another `fence_ttl` than this
/// daemon's (another replica's shorter setting renewed it last, and the
/// period's reckoning assumes this daemon's), records `ft`, and raises the horizon to the lock's ttl (the one-round
/// grant, see `crate::redlock::fence`).
/// `nb` counts from now, the key's own start, so it is the key's expiry +
/// delay as with the commit. An earlier grant's terms are deleted only
/// where the first read found them (the script runs atomically, so that
/// read is current): in the common case, no terms then or now, the grant
/// costs `HMGET`, `SET` and `HSET` (and a `PEXPIRE` once per period), with
/// no `HDEL`. The proposal block is the part after the
/// SET, kept apart so that other changes to the script merge easily.
/// Reads before it writes: the fence hash is read first and the `SET NX`
/// comes last, so an operation that raises (a fence key of another type:
/// WRONGTYPE) leaves nothing behind.
/// Numbers travel as strings: a Lua number would lose nothing below 2^53,
/// but strings keep the conversion in one obvious place (Rust). The
/// master's clock is read once per batch (`now_micros`, defined by
/// [`batch_script`](super::batch_script)): the batch runs atomically, so every operation in it
/// happens at that instant.
pub(crate) const ACQUIRE: &str = include_str!("lua/acquire.lua");

/// KEYS: lock, fence, the resource's own fence hash (a permit's: its
/// resource's; else the same as fence). ARGV: token, fence, fence ttl ms,
/// lock ttl ms, owner, kind, lock_delay ms, hold_at_least ms, the
/// acquisition's epoch ('0': none). Refused (0) where the token's record
/// names another epoch: another acquisition of the same request id took
/// the lock over (`crate::redlock::claim`); else the epoch is recorded
/// with the holder.
/// Only where the token still holds the lock: raise the resource's `max`
/// to the fence (one fence sequence per resource, whatever the kind: a
/// permit's grant raises the same counter a plain grant reads, see
/// `crate::redlock::fence`), record the holder's fence, owner, session kind
/// and the master's time of
/// the commit (`at`, microseconds: when it was acquired, for `Inspect`),
/// refresh the expiry and record the `fence_ttl` it was renewed to (`ft`,
/// which [`ACQUIRE`] reads before skipping a renewal), raise the horizon to the
/// lock's ttl (a grant stands once a majority committed: see
/// `super::super::horizon`). Returns 1 if done. The owner rides on the commit
/// that every grant sends anyway: no extra command, one HSET as before.
///
/// The lock's terms, by the master's own clock (`TIME`, read
/// once per batch; scripts replicate their effects, the default since
/// Redis 5, so replicas get the values, not the call):
/// - a lock-delay records `delay` and `nb` (not before) = now + ttl +
///   delay, at or after the key's own expiry + delay (the key was set
///   earlier, by the acquire). [`EXTEND`] moves `nb` with the expiry, a
///   release clears it ([`RELEASE`]), and [`ACQUIRE`] refuses a free key
///   until the clock passes `nb`. So only a lock that ends by expiry keeps
///   the resource for the delay;
/// - a hold-at-least records `lu` (least until) = now + hold_at_least,
///   which a holder's release honours.
///
/// A commit also clears the writer-waiting marker (`ww`, see [`ACQUIRE`]):
/// the writer it was set for is in, and other writers still waiting set it
/// again when shared holders next refuse them (`crate::redlock::rw`). In
/// the same `HDEL` as the delay's fields: no extra command.
///
/// Clock jumps: a master whose clock jumps ahead ends a delay early, one
/// that jumps back keeps it longer (at most until the fence hash expires,
/// `fence_ttl`, which config validation keeps above every delay). Either
/// way only availability is at stake, never mutual exclusion: the delay
/// only ever *refuses* grants, and fences still order writers. One master
/// alone cannot hold a resource back: a grant needs a majority, and each
/// master judges by its own clock, so the delay a quorum enforces is the
/// quorum-th earliest. A record a failed attempt left on a minority is
/// cleared by its clean-up release.
pub(crate) const COMMIT_FENCE: &str = include_str!("lua/commit_fence.lua");

/// KEYS: lock, fence, the resource's own fence hash (a permit's: its
/// resource's; else the same as fence). ARGV: token, ttl ms, fence ttl ms,
/// the semaphore's limit ('0': not a permit), the claim (`0`, `o<epoch>`,
/// `t<epoch>`: `crate::redlock::claim::Claim`). An own claim is refused
/// (`{3}`) where the token's record names another epoch (another
/// acquisition of the request id took the lock over); a take records its
/// epoch with the holder (where the record was another token's or gone,
/// the record becomes the token's without a fence: the grant's fence is
/// on the other masters).
/// Compare-and-PEXPIRE; where extended, raises the horizon to the ttl,
/// renews the fence hash to the fence ttl and records that value (`ft`,
/// only where it was another: see [`ACQUIRE`]). A permit's extension also refreshes its resource's fence hash to the
/// fence ttl (above any lock's ttl), so that the semaphore's limit field
/// there (`lim`, see `semaphore::ACQUIRE_PERMIT`) lives at
/// least as long as the permit key: a permit kept for days by extensions
/// alone keeps refusing other limits and plain locks. Where the permit's
/// key stands but `lim` is gone (a key put back by an older daemon, or a
/// hash lost on its own), it writes `lim` back (`HSETNX`: a record naming
/// another limit is left as it is). Returns `{0}` when someone else holds the key, `{2}`
/// when the key is gone (this master restarted and lost it, or it expired),
/// else `{1, fence}` where fence is '0' if this master did not take part in
/// the grant's commit. Where the grant has a lock-delay, its end (`nb`)
/// moves with the new expiry (see [`COMMIT_FENCE`]).
pub(crate) const EXTEND: &str = include_str!("lua/extend.lua");

/// KEYS: lock, fence, the resource's own fence hash (a permit's: its
/// resource's, which holds the waiters' marker; else the same as fence).
/// ARGV: token, release channel, release
/// notice, '1' if the master has DELIFEQ (Valkey 9); optional (`OPT[n]`):
/// 5, '1' if the grant's hold-at-least is honoured (a holder's release;
/// not a failed attempt's clean-up nor an operator's force-release); 6,
/// the releasing acquisition's epoch ('0': a client's own Release,
/// whatever the epoch). Deletes
/// nothing (0) where the token's record names another epoch: another
/// acquisition of the request id took the lock over
/// (`crate::redlock::claim`). Compare-and-delete; when it
/// deleted and a replica has waiters for the resource (the waiter marker
/// `wm` is in the resource's fence hash and its instant has not passed,
/// see [`ACQUIRE`] and `mark` in [`batch_script`](super::batch_script)), announces the release on the channel. Returns 1 if it deleted, or if it
/// honoured a hold-at-least: then, where the token holds the key and the
/// master's clock is before `lu` ([`COMMIT_FENCE`]), the key is set to
/// expire at `lu` instead (a compare-and-PEXPIRE; longer than the key's
/// remaining time, too, if the holder asked for a minimum beyond its ttl),
/// and nothing is announced: nobody can take it before then. A release,
/// deleting or shortening, ends the lock-delay (`nb` cleared, where the
/// first read found it: no `HDEL` for the common grant without terms): an
/// orderly end is not a vanished holder. `lu` stays, so a repeated release
/// answers the same.
/// The marker is read by the same `HMGET` as the holder's fields (a plain
/// lock's fence hash is its resource's): the common release costs `HMGET`
/// and `DELIFEQ`. A permit's release reads its resource's hash after it
/// deleted (one `HGET`). A marker past its instant is deleted where found,
/// so that later releases of the resource do not read the clock for it.
pub(crate) const RELEASE: &str = include_str!("lua/release.lua");

/// KEYS: lock, the resource's own fence hash, the resource's plain lock
/// key. ARGV: token, ttl ms, the semaphore's limit ('0': not a permit),
/// fence ttl ms. `SET NX PX`, for a lock that lost its key on this master
/// (see `Master::recreate`); where set, raises the horizon to the ttl.
///
/// Never beside a holder the kind excludes: a permit's key is not put back
/// where the resource's plain key (or shared holders' sentinel) stands or
/// another limit's permit is held; a plain key not where a permit under
/// `lim` is held. This is the acquire's own conflict check: without it, a
/// plain grant that took this master while the permit's key was gone had
/// the permit's key put back beside it, and the permit's next extension
/// counted this master toward a majority its holder no longer had (two
/// holders; found by the model check, `tools/model`). A permit's key comes
/// back with its semaphore's limit record (`lim` in the resource's fence
/// hash, with the fence ttl as the hash's expiry where it has less): plain,
/// shared and multi-resource acquires find permits only through it, and a
/// master that restarted empty lost it with the key (see
/// `crate::redlock::semaphore`). Returns 1 if set.
pub(crate) const RECREATE: &str = include_str!("lua/recreate.lua");

/// No KEYS. ARGV: the release notices' channel, a leadership notice. Publishes
/// it (an election's leader elected or gone, `crate::redlock::notices`);
/// returns 1.
pub(crate) const ANNOUNCE: &str = include_str!("lua/announce.lua");

/// KEYS: lock. ARGV: token. The remaining PTTL if the token holds the lock, else -3.
pub(crate) const CHECK: &str = include_str!("lua/check.lua");

/// KEYS: lock, fence. Read only: `{''}` when the lock key is absent, else
/// `{token, pttl, holder, fence, owner, kind, at, pv}` (the fence hash's
/// fields, '' where absent), for `Inspect` and `List`
/// (`crate::redlock::admin`) and an election's `Leader`.
pub(crate) const INSPECT: &str = include_str!("lua/inspect.lua");

/// KEYS: lock, fence. ARGV: token, term (the grant's fence), version,
/// value. An election leader's `Proclaim` (`crate::redlock::proclaim`):
/// where the token holds the lock key and the fence hash's record is its
/// grant's, of that term, it replaces the record's `owner` with the value
/// and records `pv` = `term:version`, unless the record keeps a version at
/// least as high (a later Proclaim landed first: it stays). A `pv` left by
/// an earlier grant names another term and counts as version 0, so no
/// grant script has to clear it. Writes nothing else: never creates the
/// hash, never touches the lock key, its expiry or the fence counter.
/// Returns the version the record keeps after the call (the one asked:
/// written, or already there with this value; a higher one: a newer value
/// stays, or another value at this very version, answered as one above it
/// so that the Proclaim goes again higher); 0 where the token holds the
/// key but no record of its grant of that term is kept (re-created after a
/// restart, or its commit never landed here); -1 where the token does not
/// hold the key.
pub(crate) const PROCLAIM: &str = include_str!("lua/proclaim.lua");
