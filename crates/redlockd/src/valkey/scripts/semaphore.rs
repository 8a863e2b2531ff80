//! The script that acquires one permit of a semaphore on one master (see
//! `crate::redlock::semaphore`). It runs in the batch script like every
//! other operation (`super::batch_script`).

/// KEYS: the permit's lock, the permit's fence hash, the resource's plain
/// lock key, the resource's own fence hash. ARGV: token, ttl ms, limit,
/// fence ttl ms, waiter marker ttl ms ('0': the caller will not wait).
///
/// The semaphore's limit lives in the resource's own fence hash, field
/// `lim` (the plain acquire reads that hash anyway, so checking
/// the limit costs it no command). Semaphores were never released before
/// this layout (0.1.0, no tags), so no earlier layout (a separate
/// `limit:R` key) is read: no rolling upgrade from it is supported.
///
/// Refuses with `{0, '0', 'limit', held}` when the resource is held here
/// under another limit: its plain lock key exists (`held` = '0'), or `lim`
/// names another limit and one of that limit's permit keys exists (`held`
/// = that limit). A `lim` whose permits are all gone is stale and
/// overwritten, once their lock-delays have run (a semaphore of another
/// limit is another kind: refused as a delay while any runs). A plain holder's lock-delay (`nb` in the resource's hash)
/// refuses it as a delay (`{0, left, 'delay'}`), as its own permit's
/// does: a delay keeps the resource from every kind (the other kinds read
/// the permits' delays through `permits_delay`, [`super::batch_script`]).
/// Otherwise it is [`super::ACQUIRE`] on the
/// permit's keys (lock-delay included), and where the `SET NX` succeeds it
/// writes `lim` (where it differs) and refreshes the resource's hash's
/// expiry to the fence ttl, above any lock's ttl; a permit's extension
/// refreshes it again ([`super::EXTEND`]), so `lim` outlives
/// every permit key. Reads before it writes, like `ACQUIRE`.
/// Refused because the permit is held, a caller that will wait marks the
/// resource's fence hash (`mark`, [`super::batch_script`]: waiters
/// queue per resource, not per permit), so that a permit's release
/// announces itself ([`super::RELEASE`] reads the resource's
/// hash). The permit's grant keeps the commit round: no proposal is taken
/// here. The fence counter it reports (`max`) is the resource's own, read
/// by the same `HMGET` as the limit: one fence sequence per resource, which
/// the commit raises ([`super::COMMIT_FENCE`]), so a permit's
/// fence is above every earlier grant's of the resource, plain, shared,
/// multi-resource or permit (`crate::redlock::fence`). (The permit's own
/// hash keeps its holder record and lock-delay; its `max` field, written
/// before fences were one sequence, is read only by the `per-kind-fences`
/// counterfactual, `super::counterfactual`.)
pub(crate) const ACQUIRE_PERMIT: &str = include_str!("lua/acquire_permit.lua");
