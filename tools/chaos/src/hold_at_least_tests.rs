//! The `hold_at_least` check over hand-made grants: it flags a conflicting
//! grant answered inside a hold released early, and nothing else.

use crate::findings::{Check, Findings, KindFigures};
use crate::history::{Grant, Kind};
use crate::hold_at_least::{certain_end, hold_at_least};
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A plain grant sent at `sent`, answered at `received` with an 800 ms
/// lease, released at `released`, holding at least `hold` ms.
fn grant(id: u64, sent: u64, received: u64, released: Option<u64>, hold: u64) -> Grant {
    let mut g =
        crate::checks_tests::grant(id, id, sent, received, 800, released.unwrap_or(received));
    if released.is_none() {
        g.release = None;
    }
    g.hold_at_least = ms(hold);
    g.hold_from = ms(sent);
    g
}

fn judge(grants: &[Grant]) -> (Findings, KindFigures) {
    let (mut findings, mut figures) = (Findings::default(), KindFigures::default());
    let refs: Vec<&Grant> = grants.iter().collect();
    hold_at_least(&refs, &mut findings, &mut figures);
    (findings, figures)
}

/// The hold's certain end: from the send, less the drift allowance, never
/// past the lease's window.
#[test]
fn certain_end_is_on_the_safe_side() {
    assert_eq!(certain_end(&grant(1, 100, 110, None, 0)), None);
    // 100 + 300 - (3 + 2)
    assert_eq!(certain_end(&grant(1, 100, 110, None, 300)), Some(ms(395)));
    // The lease's window ends at 100 + 800.
    assert_eq!(certain_end(&grant(1, 100, 110, None, 2_000)), Some(ms(900)));
}

/// Released 40 ms in, the next holder answered 100 ms later, inside a
/// 300 ms hold: caught. Answered after the hold's end: fine.
#[test]
fn a_grant_inside_a_hold_released_early_is_caught() {
    let first = grant(1, 0, 10, Some(40), 300);
    let (findings, figures) = judge(&[first.clone(), grant(2, 20, 140, None, 0)]);
    assert_eq!(
        findings.count(Check::HoldAtLeast),
        1,
        "{:?}",
        findings.violations
    );
    assert_eq!(figures.holds_released_early, 1);
    let (findings, _) = judge(&[first, grant(2, 20, 301, None, 0)]);
    assert_eq!(findings.count(Check::HoldAtLeast), 0);
}

/// Released after its hold ran, or never released: not this check's
/// (the windows are); no hold asked: nothing to judge.
#[test]
fn holds_not_released_early_are_not_judged() {
    for first in [
        grant(1, 0, 10, Some(350), 300),
        grant(1, 0, 10, None, 300),
        grant(1, 0, 10, Some(40), 0),
    ] {
        let (findings, figures) = judge(&[first, grant(2, 20, 380, None, 0)]);
        assert_eq!(findings.count(Check::HoldAtLeast), 0);
        assert_eq!(figures.holds_released_early, 0);
    }
}

/// The same lock answered to a retry (equal tokens), or a grant that does
/// not conflict (readers beside readers), is not a second holder.
#[test]
fn only_conflicting_grants_count() {
    let first = grant(1, 0, 10, Some(40), 300);
    let mut retry = grant(2, 20, 140, None, 0);
    retry.token = first.token.clone();
    let (mut reader, mut other_reader) = (first.clone(), grant(3, 20, 140, None, 0));
    reader.kind = Kind::Shared;
    other_reader.kind = Kind::Shared;
    assert_eq!(judge(&[first, retry]).0.count(Check::HoldAtLeast), 0);
    assert_eq!(
        judge(&[reader, other_reader]).0.count(Check::HoldAtLeast),
        0
    );
}

/// A grant won on a request-id retry: the hold counts from the first
/// call's send, since the retry took over what that call acquired.
#[test]
fn a_retried_grant_holds_from_its_first_call() {
    let mut retried = grant(1, 300, 310, Some(320), 300);
    retried.hold_from = ms(0);
    // 0 + 300 - 5: a grant answered at 400 is after the hold.
    assert_eq!(certain_end(&retried), Some(ms(295)));
    let (findings, figures) = judge(&[retried, grant(2, 330, 400, None, 0)]);
    assert_eq!(findings.count(Check::HoldAtLeast), 0);
    assert_eq!(figures.holds_released_early, 0);
}
