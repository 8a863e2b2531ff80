//! The left-to-expire `lock_delay` check over hand-made grants: it flags a
//! conflicting grant answered inside the delay of a permit never released,
//! of any kind, and not a permit of the same semaphore, a grant after the
//! delay, or one where a master forgot the delay.

use crate::findings::{Check, Findings, KindFigures};
use crate::history::{Fault, FaultKind, Grant, Kind};
use crate::lock_delay::{certain_end, left_to_expire};
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A grant of `kind` (permit index `permit`) sent at `sent`, answered 10
/// ms later with an 800 ms lease, released 20 ms after that.
fn grant(id: u64, sent: u64, kind: Kind, permit: u32) -> Grant {
    let mut g = crate::checks_tests::grant(id, id, sent, sent + 10, 790, sent + 30);
    g.kind = kind;
    g.permit = permit;
    g
}

/// Permit 0 of a semaphore of 2, sent at 0, left to expire after its 800
/// ms ttl with a 700 ms delay.
fn abandoned() -> Grant {
    let mut g = grant(1, 0, Kind::Permit(2), 0);
    g.release = None;
    g.left_to_expire = Some((ms(800), ms(700)));
    g
}

fn judge(grants: &[Grant], faults: &[Fault]) -> (Findings, KindFigures) {
    let (mut findings, mut figures) = (Findings::default(), KindFigures::default());
    let refs: Vec<&Grant> = grants.iter().collect();
    left_to_expire(&refs, faults, &mut findings, &mut figures);
    (findings, figures)
}

/// From the send, less the drift allowance: 0 + 800 + 700 - (15 + 2).
#[test]
fn the_delay_ends_on_the_safe_side() {
    assert_eq!(certain_end(&abandoned()), Some(ms(1_483)));
    assert_eq!(certain_end(&grant(2, 0, Kind::Plain, 0)), None);
}

/// Every conflicting kind answered inside the delay is caught (after the
/// lease, before the delay's end); the same permit index too.
#[test]
fn a_conflicting_grant_inside_the_delay_is_caught() {
    for (kind, permit) in [
        (Kind::Plain, 0),
        (Kind::Shared, 0),
        (Kind::Multi, 0),
        (Kind::Permit(3), 1),
        (Kind::Permit(2), 0),
    ] {
        let (findings, figures) = judge(&[abandoned(), grant(2, 900, kind, permit)], &[]);
        assert_eq!(
            findings.count(Check::LockDelay),
            1,
            "{kind:?}: {:?}",
            findings.violations
        );
        assert_eq!(figures.delays_left_to_expire, 1);
    }
}

/// Another permit of the same semaphore is not kept out (the delay is the
/// permit's), nor is anything answered after the delay's end.
#[test]
fn the_semaphores_other_permits_and_later_grants_pass() {
    let (findings, _) = judge(&[abandoned(), grant(2, 900, Kind::Permit(2), 1)], &[]);
    assert_eq!(findings.count(Check::LockDelay), 0);
    let (findings, _) = judge(&[abandoned(), grant(2, 1_480, Kind::Plain, 0)], &[]);
    assert_eq!(findings.count(Check::LockDelay), 0);
}

/// A master restarted without its data inside the delay may forget it:
/// not judged.
#[test]
fn a_master_restarted_in_the_delay_is_not_judged() {
    let restart = Fault {
        kind: FaultKind::MasterRestart,
        target: 2,
        start: ms(1_000),
        end: ms(1_100),
        counts_until: ms(1_200),
        three_phase: false,
    };
    let (findings, figures) = judge(&[abandoned(), grant(2, 1_250, Kind::Plain, 0)], &[restart]);
    assert_eq!(findings.count(Check::LockDelay), 0);
    assert_eq!(figures.delays_left_to_expire, 0);
}
