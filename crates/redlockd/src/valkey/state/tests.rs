//! Unit tests of a master's state (`super`): quarantines, trust per
//! connection, boot certificate bookkeeping and the clock checks, under
//! paused time.

use super::*;
use crate::valkey::offset::Offset;
use crate::valkey::server_info::ServerInfo;

const S: fn(u64) -> Duration = Duration::from_secs;

/// A fresh master waits out the whole period (plus rounding); an old one none.
#[test]
fn quarantine_arithmetic() {
    assert_eq!(quarantine_left(0, S(3600)), Some(S(3601)));
    assert_eq!(quarantine_left(3000, S(3600)), Some(S(601)));
    assert_eq!(quarantine_left(3600, S(3600)), Some(S(1)));
    assert_eq!(quarantine_left(3601, S(3600)), None);
}

/// Quarantine after a restart, and trust again once it has passed.
#[tokio::test(start_paused = true)]
async fn restarted_master_is_distrusted_for_the_period() {
    let state = NodeState::new("m".into(), Some(S(10)), false);
    assert!(!state.trusted(), "not before INFO was read");
    let info = |uptime: u64, run_id: &str| ServerInfo {
        software: "valkey".into(),
        version: (9, 0, 0),
        run_id: run_id.into(),
        uptime_seconds: uptime,
        role: "master".into(),
        maxmemory: 0,
        maxmemory_policy: "noeviction".into(),
    };
    state.observe(&info(100, "a"));
    assert!(state.trusted(), "up for longer than the period");
    state.set_down(true);
    state.set_down(false);
    assert!(
        !state.trusted(),
        "reconnected: not before INFO is read again"
    );
    state.observe(&info(101, "a"));
    assert!(state.trusted());
    state.observe(&info(2, "b"));
    assert!(!state.trusted() && state.quarantined());
    assert_eq!(
        state.unsettled(),
        None,
        "the blanket is final under max_ttl"
    );
    // A new run_id: the period counts from now, not from the start.
    assert_eq!(state.quarantine_left(), S(10));
    tokio::time::advance(S(9)).await;
    assert!(!state.trusted());
    tokio::time::advance(S(1)).await;
    assert!(state.trusted());
    // Another server behind the address, up for long: quarantined too.
    state.observe(&info(100_000, "swapped"));
    assert!(!state.trusted() && state.quarantine_left() == S(10));
    let off = NodeState::new("m".into(), None, true);
    off.observe(&info(0, "c"));
    assert!(off.trusted(), "quarantine turned off");
    let mut replica = info(100, "d");
    replica.role = "slave".into();
    off.observe(&replica);
    assert!(!off.trusted(), "a replica never counts");
    off.observe(&info(100, "d"));
    off.set_duplicate_of(Some("other".into()));
    assert!(!off.trusted(), "a duplicate never counts");
}

fn info(uptime: u64, run_id: &str) -> ServerInfo {
    ServerInfo {
        software: "valkey".into(),
        version: (9, 0, 0),
        run_id: run_id.into(),
        uptime_seconds: uptime,
        role: "master".into(),
        maxmemory: 0,
        maxmemory_policy: "noeviction".into(),
    }
}

/// Under the horizon quarantine a restart starts unsettled at the
/// blanket bound, and the reading settles it: shorter, or not at all;
/// a stale reading (an older generation) changes nothing; reconnecting
/// to the same process does not quarantine again.
#[tokio::test(start_paused = true)]
async fn horizon_quarantine_is_settled_by_the_reading() {
    let state = NodeState::new("m".into(), Some(S(3600)), true);
    state.observe(&info(5, "a"));
    let first = state.unsettled().expect("young at first sight: unsettled");
    assert!(!state.trusted(), "unknown horizon: no vote");
    assert_eq!(state.quarantine_left(), S(3600 - 5 + 1));
    // A request is waiting for the reading task.
    tokio::time::timeout(S(1), state.settle_wanted())
        .await
        .expect("the reading task is woken");
    assert!(state.settle(first, None, "no horizon"));
    assert!(state.trusted() && !state.quarantined());
    assert!(!state.settle(first, None, "twice"), "already settled");
    // Same process after a reconnection: nothing new.
    state.set_down(true);
    state.reconnected();
    state.observe(&info(6, "a"));
    assert!(state.trusted() && state.unsettled().is_none());
    // Restarted: unsettled again; the reading says 4 s.
    state.observe(&info(0, "b"));
    let second = state.unsettled().expect("unsettled");
    assert_ne!(first, second);
    assert!(!state.settle(first, None, "stale"), "an older reading");
    assert!(!state.trusted());
    assert!(state.settle(second, Some(Instant::now() + S(4)), "4 s horizon"));
    assert_eq!(state.quarantine_left(), S(4));
    tokio::time::advance(S(4)).await;
    assert!(state.trusted());
    // A clock jump: unsettled from now.
    state.quarantine_now("jumped");
    let third = state.unsettled().expect("unsettled");
    assert_eq!(state.quarantine_left(), S(3600));
    assert!(state.settle(third, Some(Instant::now() + S(1)), "1 s"));
    tokio::time::advance(S(1)).await;
    assert!(state.trusted());
    // An unsettled quarantine that nobody settles ends with its blanket.
    state.observe(&info(0, "c"));
    tokio::time::advance(S(3601)).await;
    assert!(state.unsettled().is_none() && state.trusted());
}

/// The boot certificate's bookkeeping: written once the master is
/// fully trusted, for its run_id only; a quarantine for identity may
/// be ended by one, a clock jump's may not, and a jump takes the
/// certificate back before another is written.
#[tokio::test(start_paused = true)]
async fn boot_certificate_bookkeeping() {
    let state = NodeState::new("m".into(), Some(S(3600)), true);
    state.observe(&info(5, "a"));
    assert_eq!(state.certificate_due(), None, "not trusted yet");
    let (generation, run_id) = state.certifiable().expect("young at first sight");
    assert_eq!(run_id, "a");
    assert!(state.settle(generation, None, "certificate"));
    assert_eq!(
        state.certificate_due(),
        Some(CertificateDue::Write("a".into()))
    );
    state.certificate_known("a");
    assert_eq!(state.certificate_due(), None, "written once");
    // A clock jump: not certifiable, and the certificate is taken back.
    state.quarantine_now("jumped");
    assert!(state.unsettled().is_some() && state.certifiable().is_none());
    assert_eq!(
        state.certificate_due(),
        Some(CertificateDue::Revoke("a".into()))
    );
    state.certificate_known("a");
    assert_eq!(
        state.certificate_due(),
        Some(CertificateDue::Revoke("a".into())),
        "a write racing with the revocation does not cancel it"
    );
    state.certificate_revoked("a");
    assert_eq!(
        state.certificate_due(),
        None,
        "quarantined: nothing to write"
    );
    // A restart during the clock quarantine: still not certifiable.
    state.observe(&info(0, "b"));
    assert!(state.certifiable().is_none());
    tokio::time::advance(S(3601)).await;
    assert!(state.trusted());
    assert_eq!(
        state.certificate_due(),
        Some(CertificateDue::Write("b".into()))
    );
    // A later restart, with no other quarantine running: certifiable.
    state.certificate_known("b");
    state.observe(&info(0, "c"));
    assert_eq!(state.certifiable().map(|(_, r)| r), Some("c".into()));
    // Quarantine off: nothing is ever written.
    let off = NodeState::new("m".into(), None, true);
    off.observe(&info(0, "d"));
    assert!(off.trusted() && off.certificate_due().is_none());
}

/// Trust follows the connection: a new connection
/// (numbered by fred's set-up, before it carries commands) is untrusted
/// at once, before any watcher runs; a reply to a command queued on an
/// earlier connection does not count; INFO read on an earlier
/// connection does not verify a later one.
#[test]
fn trust_is_tied_to_the_connection() {
    let state = NodeState::new("m".into(), None, true);
    let first = state.connection_opened();
    state.observe_on(first, &info(100, "a"));
    assert!(state.trusted() && state.verified_on_connection(first));
    // The master restarts; fred sets up a new connection. No watcher
    // has run (no `reconnected`, no `set_down`).
    let second = state.connection_opened();
    assert!(
        !state.trusted(),
        "untrusted as soon as the connection is new"
    );
    assert!(
        !state.verified_on_connection(first),
        "a reply to a command queued on the first connection may have \
         come on the second"
    );
    assert!(!state.verified_on_connection(second));
    // INFO sent on the first connection, answered late: not the second.
    state.observe_on(first, &info(100, "a"));
    assert!(!state.trusted());
    state.observe_on(second, &info(0, "b"));
    assert!(state.trusted() && state.verified_on_connection(second));
}

/// A master whose clock may be beyond the bound does not count until a
/// reading within it.
#[test]
fn clock_offset_bound() {
    let state = NodeState::new("m".into(), None, true);
    state.observe(&info(100, "a"));
    let base = S(1_700_000_000);
    let ahead = Offset::measure(base + S(2), base, base);
    state.clock_offset(ahead, S(1));
    assert!(!state.trusted() && !state.excluded());
    state.clock_offset(Offset::measure(base, base, base), S(1));
    assert!(state.trusted());
}

/// An old master at first sight is trusted without any reading.
#[tokio::test(start_paused = true)]
async fn old_master_at_first_sight_is_trusted() {
    let state = NodeState::new("m".into(), Some(S(3600)), true);
    state.observe(&info(4000, "a"));
    assert!(state.trusted() && state.unsettled().is_none());
}
