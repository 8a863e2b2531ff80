//! The checkers over hand-made histories: each flags what it must, and
//! nothing that the history does not prove.

use crate::checks::check;
use crate::findings::{Check, Findings};
use crate::history::{
    Failure, Fault, FaultKind, FencedOp, Grant, History, Kind, PlainWrite, RegisterLog,
    ReleaseRecord, Via, Window, Workload,
};
use std::time::Duration;

const RESOURCE: &str = "hot/0";

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A contended grant: Acquire sent at `sent`, answered at `received` with
/// `validity`, critical section until `released` where the Release (was_held
/// = `held`) is sent; answered 1 ms later.
pub(crate) fn grant(
    id: u64,
    fence: u64,
    sent: u64,
    received: u64,
    validity: u64,
    released: u64,
) -> Grant {
    let window = Window::of_call(ms(sent), ms(received), ms(validity));
    Grant {
        id,
        call: id,
        resource: RESOURCE.to_owned(),
        kind: Kind::Plain,
        via: Via::Unary,
        token: format!("t{id}"),
        permit: 0,
        request_id: None,
        extends: Vec::new(),
        workload: Workload::Contended,
        client: id as u32,
        replica: 0,
        fence,
        sent: ms(sent),
        received: ms(received),
        windows: vec![window],
        valid_until: window.end,
        paused: false,
        hold_at_least: Duration::ZERO,
        hold_from: ms(sent),
        left_to_expire: None,
        cs_end: ms(released),
        release: Some(ReleaseRecord {
            sent: ms(released),
            received: ms(released + 1),
            outcome: Ok(true),
            calls: 1,
            first_failure: None,
        }),
    }
}

fn run(grants: Vec<Grant>) -> Findings {
    check(&History {
        grants,
        ..History::default()
    })
}

fn only(findings: &Findings, check: Check, n: usize) {
    for c in Check::ALL {
        let expected = if c == check { n } else { 0 };
        assert_eq!(
            findings.count(c),
            expected,
            "{c:?}: {:?}",
            findings.violations
        );
    }
}

/// Hand-offs by release, fences growing: nothing to report.
#[test]
fn clean_history() {
    let findings = run(vec![
        grant(1, 10, 0, 2, 500, 5),
        grant(2, 11, 1, 7, 500, 9),
        grant(3, 12, 8, 10, 500, 12),
    ]);
    only(&findings, Check::Overlap, 0);
}

/// A grant received while the previous holder's window is still open and
/// its holder has not released: overlap, and critical sections overlap.
#[test]
fn overlapping_windows() {
    let findings = run(vec![
        grant(1, 10, 0, 2, 500, 300),
        grant(2, 11, 1, 100, 500, 120),
    ]);
    assert_eq!(
        findings.count(Check::Overlap),
        1,
        "{:?}",
        findings.violations
    );
    assert_eq!(findings.count(Check::CriticalSections), 1);
    assert_eq!(findings.count(Check::FenceOrder), 0);
}

/// A client starved between the daemon's answer and its own reading of it
/// (answered at about 0 ms, read at 450 ms): its window is counted from
/// when it sent the Acquire, so it ends at 500 ms, before the next holder's
/// grant at 515 ms. Counted from receipt it would run to 950 ms and the
/// checker would report an overlap that never happened.
#[test]
fn starved_client_window_ends_at_send_plus_validity() {
    let mut starved = grant(1, 10, 0, 450, 500, 600);
    starved.release = None;
    assert_eq!(
        starved.windows[0],
        Window {
            start: ms(450),
            end: ms(500)
        }
    );
    let findings = run(vec![starved, grant(2, 11, 510, 515, 500, 520)]);
    only(&findings, Check::Overlap, 0);
}

/// Counted from the send, a genuine overlap is still found: a waiter sent
/// its Acquire early (1 ms), was granted at 250 ms with 480 ms left while
/// the holder (window from 2 ms, Release at 300 ms) still held the lock.
#[test]
fn send_anchored_windows_still_overlap() {
    let findings = run(vec![
        grant(1, 10, 0, 2, 500, 300),
        grant(2, 11, 1, 250, 480, 260),
    ]);
    assert_eq!(
        findings.count(Check::Overlap),
        1,
        "{:?}",
        findings.violations
    );
}

/// A paused holder (slept past its validity) overlaps nobody's window once
/// its window is over; its critical section is not checked.
#[test]
fn paused_holder_is_only_checked_by_its_window() {
    let mut paused = grant(1, 10, 0, 2, 500, 700);
    paused.paused = true;
    paused.release = Some(ReleaseRecord {
        sent: ms(700),
        received: ms(701),
        outcome: Ok(false),
        calls: 1,
        first_failure: None,
    });
    let findings = run(vec![paused, grant(2, 11, 1, 520, 500, 530)]);
    only(&findings, Check::Overlap, 0);
    assert_eq!(findings.paused, 1);
}

/// A grant requested after another was received must carry a higher fence;
/// a lower fence with an uncertain order is not flagged, a repeat is.
#[test]
fn fence_order() {
    let findings = run(vec![grant(1, 10, 0, 2, 500, 5), grant(2, 9, 6, 8, 500, 9)]);
    only(&findings, Check::FenceOrder, 1);
    // Sent before the other was received: no certain order.
    let findings = run(vec![grant(1, 10, 0, 2, 500, 5), grant(2, 9, 1, 8, 500, 9)]);
    only(&findings, Check::FenceOrder, 0);
    let findings = run(vec![grant(1, 10, 0, 2, 500, 5), grant(2, 10, 1, 8, 500, 9)]);
    only(&findings, Check::FenceOrder, 1);
}

/// was_held = true while another holder's guarantee covers the Release.
#[test]
fn was_held_while_held_elsewhere() {
    let mut first = grant(1, 10, 0, 2, 100, 300);
    first.paused = true; // released late, after its window
    let findings = run(vec![first, grant(2, 11, 101, 150, 500, 400)]);
    only(&findings, Check::WasHeld, 1);
}

/// was_held = false within the validity: a violation without faults, only
/// a figure with one.
#[test]
fn not_held_within_validity() {
    let mut g = grant(1, 10, 0, 2, 500, 100);
    g.release = g.release.map(|r| ReleaseRecord {
        outcome: Ok(false),
        ..r
    });
    let findings = run(vec![g.clone()]);
    only(&findings, Check::WasHeld, 1);
    let fault = Fault {
        kind: FaultKind::MasterRestart,
        target: 0,
        start: ms(50),
        end: ms(60),
        counts_until: ms(90),
        three_phase: false,
    };
    let findings = check(&History {
        grants: vec![g],
        faults: vec![fault],
        ..History::default()
    });
    only(&findings, Check::WasHeld, 0);
    assert_eq!(findings.not_held_under_faults, 1);
    // A failed Release says nothing.
    let mut failed = grant(1, 10, 0, 2, 500, 100);
    failed.release = failed.release.map(|r| ReleaseRecord {
        outcome: Err(Failure::TimedOut),
        ..r
    });
    only(&run(vec![failed]), Check::WasHeld, 0);
    // A retried Release may find the keys its first call deleted.
    let mut retried = grant(1, 10, 0, 2, 500, 100);
    retried.release = retried.release.map(|r| ReleaseRecord {
        outcome: Ok(false),
        calls: 2,
        first_failure: None,
        ..r
    });
    only(&run(vec![retried]), Check::WasHeld, 0);
}

/// A session's release after a retry with its request id took the lock
/// over (the same token granted to another call before the release was
/// sent) rightly answers was_held = false; before the retry's grant it
/// would be a violation.
#[test]
fn superseded_release_is_not_held() {
    let mut first = grant(1, 10, 0, 2, 500, 100);
    first.release = first.release.map(|r| ReleaseRecord {
        outcome: Ok(false),
        ..r
    });
    let mut retry = grant(2, 10, 50, 90, 500, 400);
    retry.token = first.token.clone();
    only(&run(vec![first.clone(), retry.clone()]), Check::WasHeld, 0);
    retry.received = ms(150);
    only(&run(vec![first, retry]), Check::WasHeld, 1);
}

fn with_register(grants: Vec<Grant>, log: RegisterLog) -> Findings {
    check(&History {
        grants,
        registers: vec![log],
        ..History::default()
    })
}

/// Two acknowledged writes that read the same value: one update lost.
#[test]
fn lost_update() {
    let log = RegisterLog {
        resource: RESOURCE.to_owned(),
        plain_final: 1,
        plain_writes: vec![
            PlainWrite { grant: 1, read: 0 },
            PlainWrite { grant: 2, read: 0 },
        ],
        ..RegisterLog::default()
    };
    only(&with_register(vec![], log), Check::LostUpdates, 1);
}

fn op(grant: u64, write: bool, fence: u64, at: u64, accepted: bool, valid: bool) -> FencedOp {
    FencedOp {
        grant,
        write,
        fence,
        at: ms(at),
        accepted,
        within_validity: valid,
        read: 0,
    }
}

/// The fenced register applied the write of a holder after a newer holder
/// checked in (possible only with a fence out of order).
#[test]
fn stale_fenced_write() {
    let mut old = grant(1, 10, 0, 2, 100, 300);
    old.paused = true;
    let newer = grant(2, 9, 50, 120, 500, 130);
    let log = RegisterLog {
        resource: RESOURCE.to_owned(),
        fenced_final: 1,
        fenced_ops: vec![
            op(1, false, 10, 2, true, true),
            op(2, false, 9, 120, false, true),
            op(1, true, 10, 200, true, false),
        ],
        ..RegisterLog::default()
    };
    let findings = with_register(vec![old, newer], log);
    assert_eq!(
        findings.count(Check::StaleWrites),
        1,
        "{:?}",
        findings.violations
    );
    assert_eq!(findings.count(Check::FencedValidHolder), 1);
    assert_eq!(findings.paused_writes_applied, 1);
}

/// Kleppmann: the paused holder's write is refused after the next holder
/// checked in; nothing is wrong.
#[test]
fn paused_write_refused() {
    let mut old = grant(1, 10, 0, 2, 100, 300);
    old.paused = true;
    old.release = None;
    let newer = grant(2, 11, 50, 120, 500, 130);
    let log = RegisterLog {
        resource: RESOURCE.to_owned(),
        fenced_final: 1,
        fenced_ops: vec![
            op(1, false, 10, 2, true, true),
            op(2, false, 11, 120, true, true),
            op(2, true, 11, 125, true, true),
            op(1, true, 10, 200, false, false),
        ],
        ..RegisterLog::default()
    };
    let findings = with_register(vec![old, newer], log);
    only(&findings, Check::StaleWrites, 0);
    assert_eq!(findings.paused_writes_refused, 1);
}

/// A grant whose validity, counted from its send, ran out before its answer
/// arrived (sent 0, received 300, validity 250): its holder's fenced write,
/// applied because nobody newer checked in, is not stale merely because an
/// older holder (received at 280, released at 290) received its grant after
/// the stale grant's empty window "ended". A holder received after the stale
/// grant still supersedes it.
#[test]
fn stale_on_arrival_grant_is_not_superseded_by_an_older_holder() {
    let older = grant(1, 10, 270, 280, 500, 290);
    let mut stale = grant(2, 11, 0, 300, 250, 310);
    assert!(stale.stale_on_arrival());
    assert!(!stale.overran(), "it never entered a critical section");
    stale.cs_end = ms(300);
    let log = |newer_checked_in: bool| {
        let mut fenced_ops = vec![
            op(1, false, 10, 281, true, true),
            op(2, false, 11, 301, true, false),
        ];
        if newer_checked_in {
            fenced_ops.push(op(3, false, 12, 305, true, true));
        }
        fenced_ops.push(op(2, true, 11, 306, !newer_checked_in, false));
        RegisterLog {
            resource: RESOURCE.to_owned(),
            fenced_final: 1,
            fenced_ops,
            ..RegisterLog::default()
        }
    };
    let findings = with_register(vec![older.clone(), stale.clone()], log(false));
    only(&findings, Check::StaleWrites, 0);
    // A later write applied after a holder received at 304 checked in (as
    // if its fence were out of order): stale.
    let mut applied = log(true);
    if let Some(last) = applied.fenced_ops.last_mut() {
        last.accepted = true;
    }
    let newer = grant(3, 12, 302, 304, 500, 400);
    let findings = with_register(vec![older, stale, newer], applied);
    assert_eq!(
        findings.count(Check::StaleWrites),
        1,
        "{:?}",
        findings.violations
    );
}

/// `grant` of another kind and token.
fn of_kind(mut g: Grant, kind: Kind, permit: u32, token: &str) -> Grant {
    g.kind = kind;
    g.permit = permit;
    g.token = token.to_owned();
    g
}

/// A permit granted while a plain holder holds: cross-kind overlap.
#[test]
fn permit_beside_plain_overlaps() {
    let findings = run(vec![
        grant(1, 10, 0, 2, 500, 300),
        of_kind(grant(2, 11, 1, 100, 500, 120), Kind::Permit(2), 0, "p"),
    ]);
    only(&findings, Check::Overlap, 1);
}

/// Readers together, and permits of one limit on distinct indexes, are
/// not conflicts; a reader beside a permit, two permits of one index, and
/// permits of two limits are.
#[test]
fn the_conflict_relation() {
    let shared = |id, token| of_kind(grant(id, 10 + id, 0, 2, 500, 300), Kind::Shared, 0, token);
    let permit = |id, limit, index, token| {
        of_kind(
            grant(id, 10 + id, 0, 2, 500, 300),
            Kind::Permit(limit),
            index,
            token,
        )
    };
    let clean = run(vec![shared(1, "a"), shared(2, "b")]);
    only(&clean, Check::Overlap, 0);
    assert_eq!(clean.kinds.shared_overlaps, 1);
    let clean = run(vec![permit(1, 2, 0, "a"), permit(2, 2, 1, "b")]);
    only(&clean, Check::Overlap, 0);
    assert_eq!(clean.kinds.most_permits.get(&2), Some(&2));
    only(
        &run(vec![shared(1, "a"), permit(2, 2, 0, "b")]),
        Check::Overlap,
        1,
    );
    only(
        &run(vec![permit(1, 2, 0, "a"), permit(2, 2, 0, "b")]),
        Check::Overlap,
        1,
    );
    only(
        &run(vec![permit(1, 2, 0, "a"), permit(2, 3, 1, "b")]),
        Check::Overlap,
        1,
    );
}

/// Three permits of limit 2 on three indexes (a daemon that lost count)
/// at once: over the limit.
#[test]
fn permits_over_their_limit() {
    let permit = |id, index, token| {
        of_kind(
            grant(id, 10 + id, 0, 2 + id, 500, 300),
            Kind::Permit(2),
            index,
            token,
        )
    };
    let findings = run(vec![
        permit(1, 0, "a"),
        permit(2, 1, "b"),
        permit(3, 2, "c"),
    ]);
    only(&findings, Check::SemaphoreLimit, 1);
}

/// A Hold retried with its request id: S1 and S2 share a token (one lock)
/// and overlap each other freely; S1 ends at 150 ms; a third client
/// granted at 200 ms while S2's window lasts until 480 ms is an overlap
/// (and its critical section overlaps S2's).
#[test]
fn third_holder_while_a_retry_holds() {
    let s1 = of_kind(grant(1, 10, 0, 2, 500, 150), Kind::Plain, 0, "x");
    let mut s2 = of_kind(grant(2, 10, 100, 120, 380, 450), Kind::Plain, 0, "x");
    s2.release = None;
    let clean = run(vec![s1.clone(), s2.clone()]);
    only(&clean, Check::Overlap, 0);
    let third = grant(3, 11, 160, 200, 500, 220);
    let findings = run(vec![s1, s2, third]);
    assert_eq!(
        findings.count(Check::Overlap),
        1,
        "{:?}",
        findings.violations
    );
    assert_eq!(findings.count(Check::CriticalSections), 1);
}

/// Fences across kinds: a permit after a plain holder with a lower fence
/// is out of order, and so is a permit of the same index; readers, and
/// permits of other indexes of one limit, are not ordered among
/// themselves; equal tokens (a retry) share their fence.
#[test]
fn cross_kind_fence_order() {
    let later =
        |kind, index, token, fence| of_kind(grant(2, fence, 10, 12, 500, 14), kind, index, token);
    let plain = grant(1, 10, 0, 2, 500, 5);
    only(
        &run(vec![plain.clone(), later(Kind::Permit(2), 0, "p", 9)]),
        Check::FenceOrder,
        1,
    );
    only(
        &run(vec![plain.clone(), later(Kind::Shared, 0, "s", 10)]),
        Check::FenceOrder,
        1,
    );
    only(
        &run(vec![plain.clone(), later(Kind::Plain, 0, "t1", 10)]),
        Check::FenceOrder,
        0,
    );
    let reader = of_kind(grant(1, 10, 0, 2, 500, 5), Kind::Shared, 0, "r");
    only(
        &run(vec![reader, later(Kind::Shared, 0, "s", 9)]),
        Check::FenceOrder,
        0,
    );
    let permit = of_kind(grant(1, 10, 0, 2, 500, 5), Kind::Permit(2), 0, "a");
    only(
        &run(vec![permit.clone(), later(Kind::Permit(2), 1, "b", 9)]),
        Check::FenceOrder,
        0,
    );
    only(
        &run(vec![permit.clone(), later(Kind::Permit(2), 0, "b", 9)]),
        Check::FenceOrder,
        1,
    );
    only(
        &run(vec![permit, later(Kind::Permit(3), 1, "b", 9)]),
        Check::FenceOrder,
        1,
    );
}

/// A short-deadline Acquire's key left on a majority with every master
/// healthy is a violation; on a minority, or with a fault around, a
/// figure.
#[test]
fn left_locked_after_deadline_exceeded() {
    use crate::leftovers::{check, Probe};
    let probe = |present, deadline_exceeded| Probe {
        resource: "fresh".into(),
        replica: 0,
        sent: ms(0),
        answered: ms(10),
        deadline_exceeded,
        read_from: ms(1010),
        read_until: ms(1012),
        answered_masters: 5,
        present,
    };
    let mut findings = Findings::default();
    let figures = check(
        &[probe(3, true), probe(2, true), probe(0, true)],
        &[],
        &mut findings,
    );
    assert_eq!(
        findings.count(Check::LeftLocked),
        1,
        "{:?}",
        findings.violations
    );
    assert_eq!((figures.majority_healthy, figures.other_leftovers), (1, 1));
    let restart = Fault {
        kind: FaultKind::MasterRestart,
        target: 0,
        start: ms(500),
        end: ms(600),
        counts_until: ms(5000),
        three_phase: false,
    };
    let mut findings = Findings::default();
    check(&[probe(3, true)], &[restart], &mut findings);
    assert_eq!(findings.count(Check::LeftLocked), 0);
    // The OTHER replica killed meanwhile: every master healthy, flagged.
    let other_replica = Fault {
        kind: FaultKind::ReplicaKill,
        target: 1,
        ..restart
    };
    let mut findings = Findings::default();
    check(&[probe(3, false)], &[other_replica], &mut findings);
    assert_eq!(findings.count(Check::LeftLocked), 1);
}
