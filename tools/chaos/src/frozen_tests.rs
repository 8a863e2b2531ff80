//! The freeze checks and the burst checks over hand-made records: each
//! flags what it must, and nothing more.

use crate::burst::{self, BurstCall};
use crate::faults::{Budget, Plan, Planned};
use crate::findings::{Check, Findings};
use crate::frozen::{self, Ended, Freeze, FrozenLog, FrozenWrite};
use crate::history::{Fault, FaultKind, Grant, History, Kind, Phases, Via, Window, Workload};
use std::time::Duration;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn grant(id: u64, client: u32, received: u64) -> Grant {
    Grant {
        id,
        call: id,
        resource: "hot/0".to_owned(),
        kind: Kind::Plain,
        via: Via::Unary,
        token: format!("t{id}"),
        permit: 0,
        request_id: None,
        extends: Vec::new(),
        workload: Workload::Contended,
        client,
        replica: 0,
        fence: id,
        sent: ms(received),
        received: ms(received),
        windows: vec![Window {
            start: ms(received),
            end: ms(received + 500),
        }],
        valid_until: ms(received + 500),
        paused: false,
        hold_at_least: Duration::ZERO,
        hold_from: ms(received),
        left_to_expire: None,
        cs_end: ms(received),
        release: None,
    }
}

/// Client 2000 holds grant 1 from 1 s, is frozen 1.1 s .. 6.1 s; client 7
/// gets the lock at 4 s.
fn frozen_history(writes: Vec<FrozenWrite>, ended: Vec<Ended>) -> (History, FrozenLog) {
    let history = History {
        grants: vec![grant(1, 2000, 1000), grant(2, 7, 4000)],
        ..History::default()
    };
    let log = FrozenLog {
        delays: Vec::new(),
        writes,
        ended,
        freezes: vec![Freeze {
            client: 2000,
            start: ms(1100),
            end: ms(6100),
            holding: Some((1, "hot/0".to_owned())),
            ttl: crate::frozen_child::TTL,
        }],
    };
    (history, log)
}

/// Found gone after SIGCONT, no write: no violation; the hand-off during
/// the freeze and the resumed client's finding are counted.
#[test]
fn resumed_client_told_lost_is_clean() {
    let ended = vec![Ended {
        grant: 1,
        at: ms(6200),
        reason: "lost".to_owned(),
    }];
    let (history, log) = frozen_history(Vec::new(), ended);
    let mut findings = Findings::default();
    let figures = frozen::check(&history, &log, &mut findings);
    assert_eq!(findings.count(Check::FrozenClient), 0);
    assert_eq!(
        (figures.freezes_holding, figures.handoffs),
        (1, 1),
        "{figures:?}"
    );
    assert_eq!(
        (figures.resumed_told_gone, figures.resumed_told_lost),
        (1, 1)
    );
}

/// A write decided after SIGCONT under the grant held when frozen is a
/// violation, even when the validity it relied on looked fine; a write
/// decided past its validity is one too; a write before the freeze is not.
#[test]
fn writes_under_a_stale_lock_are_flagged() {
    let before = FrozenWrite {
        grant: 1,
        checked: ms(1050),
        valid_until: ms(1500),
    };
    let after_resume = FrozenWrite {
        grant: 1,
        checked: ms(6150),
        valid_until: ms(6500),
    };
    let (history, log) = frozen_history(vec![before, after_resume], Vec::new());
    let mut findings = Findings::default();
    frozen::check(&history, &log, &mut findings);
    assert_eq!(findings.count(Check::FrozenClient), 1, "{findings:?}");
    let late = FrozenWrite {
        grant: 1,
        checked: ms(1500),
        valid_until: ms(1500),
    };
    let (history, log) = frozen_history(vec![late], Vec::new());
    let mut findings = Findings::default();
    frozen::check(&history, &log, &mut findings);
    assert_eq!(findings.count(Check::FrozenClient), 1, "{findings:?}");
}

/// The frozen holder's grant asked for a 4 s lock_delay: client 7's grant
/// at 4 s (2.9 s into the freeze, as when a daemon released the lock on
/// dropping the frozen client's connection) is inside it; one at 5.2 s is
/// not; a master emptied during the delay and voting again before its end
/// leaves the freeze unjudged.
#[test]
fn a_grant_inside_the_delay_of_a_frozen_holder_is_flagged() {
    let (history, mut log) = frozen_history(Vec::new(), Vec::new());
    log.delays.push((1, ms(4_000)));
    let mut findings = Findings::default();
    let figures = frozen::check(&history, &log, &mut findings);
    assert_eq!(findings.count(Check::LockDelay), 1, "{findings:?}");
    assert_eq!(figures.delays_checked, 1);

    let mut later = history.clone();
    later.grants[1] = grant(2, 7, 5_200);
    let mut findings = Findings::default();
    frozen::check(&later, &log, &mut findings);
    assert_eq!(findings.count(Check::LockDelay), 0, "{findings:?}");

    let mut restarted = history;
    restarted.faults.push(Fault {
        kind: FaultKind::MasterRestart,
        target: 3,
        start: ms(2_000),
        end: ms(2_500),
        counts_until: ms(4_500),
        three_phase: false,
    });
    let mut findings = Findings::default();
    let figures = frozen::check(&restarted, &log, &mut findings);
    assert_eq!(findings.count(Check::LockDelay), 0, "{findings:?}");
    assert_eq!(figures.delays_checked, 0);
}

fn planned(kind: FaultKind, at: u64, len: u64) -> Planned {
    Planned {
        kind,
        target: 0,
        at: ms(at),
        len: ms(len),
        delay: Duration::ZERO,
        three_phase: false,
    }
}

/// Bursts start only where no master fault is planned for a while: the
/// warm-up and a long gap, never inside a fault or its grace.
#[test]
fn bursts_start_where_masters_are_healthy() {
    let budget = Budget {
        grace: ms(1000),
        quarantine: ms(4000),
    };
    let plan = Plan {
        faults: vec![
            planned(FaultKind::MasterPause, 2000, 2000),
            planned(FaultKind::MasterPause, 6000, 500),
            planned(FaultKind::ReplicaKill, 9000, 1000),
            planned(FaultKind::MasterPause, 12_000, 1000),
        ],
        phases: Phases::default(),
    };
    let times = burst::times(&plan, budget, ms(20_000));
    // 0.3 s (warm-up, quiet until the first pause at 2 s); not 5.3 s (the
    // second pause starts 0.7 s later); 7.8 s (after it and its grace; the
    // replica fault at 9 s does not block a burst); 14.3 s.
    assert_eq!(times, vec![ms(300), ms(7800), ms(14_300)]);
}

/// A burst goes to the replicas in turn, past one the plan kills or drains
/// while it starts (seed 37's second burst found its replica draining and
/// never ran).
#[test]
fn bursts_go_past_a_faulted_replica() {
    let budget = Budget {
        grace: ms(1000),
        quarantine: ms(4000),
    };
    let drain = |target, at, len| Planned {
        target,
        ..planned(FaultKind::ReplicaDrain, at, len)
    };
    let plan = Plan {
        // Replica 1 drains over the second burst, replica 0 over the third.
        faults: vec![drain(1, 7000, 2000), drain(0, 14_000, 500)],
        phases: Phases::default(),
    };
    let times = [ms(300), ms(7800), ms(14_300), ms(30_000)];
    assert_eq!(
        burst::replicas_for(&plan, budget, &times, 2),
        vec![0, 0, 1, 1]
    );
    // Both faulted at once (never planned): the turn's replica.
    let both = Plan {
        faults: vec![drain(0, 7000, 2000), drain(1, 7000, 2000)],
        phases: Phases::default(),
    };
    assert_eq!(
        burst::replicas_for(&both, budget, &times[..2], 2),
        vec![0, 1]
    );
}

fn call(code: Option<tonic::Code>, sent: u64) -> BurstCall {
    BurstCall {
        burst: 0,
        replica: 0,
        sent: ms(sent),
        received: ms(sent + 100),
        code,
        message: String::new(),
    }
}

/// UNAVAILABLE with every master healthy is a violation; with a master
/// faulted, or RESOURCE_EXHAUSTED, it is only counted.
#[test]
fn burst_unavailable_only_counts_when_masters_are_healthy() {
    let faults = vec![Fault {
        kind: FaultKind::MasterPause,
        target: 1,
        start: ms(5000),
        end: ms(6000),
        counts_until: ms(7000),
        three_phase: false,
    }];
    let calls = vec![
        call(None, 100),
        call(Some(tonic::Code::ResourceExhausted), 100),
        call(Some(tonic::Code::Unavailable), 100),
        call(Some(tonic::Code::Unavailable), 5500),
    ];
    let mut findings = Findings::default();
    let fired = burst::Fired {
        fired: 1,
        calls,
        failed: Vec::new(),
    };
    let figures = burst::check(&fired, &faults, &mut findings);
    assert_eq!(findings.count(Check::BurstUnavailable), 1);
    assert_eq!(figures.granted, 1);
    assert_eq!(
        (figures.unavailable_healthy, figures.unavailable_faulted),
        (1, 1)
    );
    assert_eq!(figures.codes.get("ResourceExhausted"), Some(&1));
}

/// A burst whose process died (the 300 s run's "chaos --burst-client:
/// transport error") is reported as a failed burst, not as a burst of 0
/// calls at Time::MAX.
#[test]
fn a_dead_burst_process_is_a_failed_burst() {
    let fired = burst::Fired {
        fired: 2,
        calls: vec![BurstCall {
            burst: 1,
            ..call(None, 100)
        }],
        failed: vec![(0, ms(300), "the burst process exited with 2".into())],
    };
    let mut findings = Findings::default();
    let figures = burst::check(&fired, &[], &mut findings);
    assert_eq!(figures.failed.len(), 1);
    let summary = crate::figures::Figures {
        bursts: figures,
        ..Default::default()
    }
    .summary();
    assert!(summary.contains("burst 0 at 0.300 s: FAILED"), "{summary}");
    assert!(!summary.contains("18446744073709551616"), "{summary}");
    assert!(summary.contains("burst 1 at 0.100 s: 1 calls"), "{summary}");
}
