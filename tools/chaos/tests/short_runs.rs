//! The safety checker (`chaos`), short versions: under the full fault
//! schedule, with restart quarantine, it must find no violation and make
//! enough grants; the counterfactual (a majority of masters restarted
//! without data while holders keep long leases, quarantine off) must make
//! it report overlapping grants; the review's interleavings
//! find nothing, and the flapping one catches a daemon without quarantine;
//! locks on several resources at once and read-write locks pass the same
//! checks; bursts of Acquire calls with every master healthy are never answered
//! UNAVAILABLE, and the burst check catches UNAVAILABLE answers it cannot
//! put down to a fault; every kind mixed on the same resources (`--mix`)
//! passes the cross-kind checks and writes its history, the cross-kind
//! interleavings find nothing, and each counterfactual defect
//! (`--counterfactual`) is reported.
//! Needs Valkey and libfaketime (scripts/setup.sh).

use serde_json::Value;
use std::process::Command;
use std::sync::{Mutex, PoisonError};

/// Both runs load the machine's cores with five masters and two daemons:
/// never at once, or each would disturb the other's timing.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Runs chaos with `args`; its exit code and its JSON line.
fn chaos(args: &[&str]) -> (Option<i32>, Value) {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    let output = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(args)
        .arg("--redlockd")
        .arg(redlockd_testkit::bin::require("redlockd"))
        .output()
        .expect("chaos runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let json = stdout
        .lines()
        .find(|line| line.starts_with('{'))
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("chaos printed no JSON line: {stdout}"));
    (output.status.code(), json)
}

fn number(json: &Value, path: &[&str]) -> u64 {
    path.iter()
        .fold(json, |v, key| &v[key])
        .as_u64()
        .unwrap_or_else(|| panic!("no number at {path:?} in {json}"))
}

/// 40 s of every fault kind over two replicas (one drained with SIGTERM
/// while sessions hold locks, session client processes frozen with
/// SIGSTOP, semaphore clients beside the plain ones), with `--mix`: every
/// kind on the same hot resources (plain, Hold sessions of every kind,
/// permits of limits 2 and 3, shared and exclusive, multi), request-id
/// retries of Acquires and of Holds, 1-20 ms deadlines, holds released
/// inside their `hold_at_least`, and a rolling
/// restart of three masters while long holders hold: no violation of any
/// check, and at least 1,000 grants in the healthy phases. The history
/// goes to `<target>/tmp/chaos-history-full-seed1.jsonl` (printed), for
/// the independent linearizability checker.
#[test]
fn full_schedule_finds_no_violation() {
    let history = history_path("full-seed1");
    let (code, json) = chaos(&[
        "--duration",
        "40",
        "--seed",
        "1",
        "--mix",
        "--history",
        history.to_str().expect("a UTF-8 path"),
    ]);
    eprintln!("chaos history: {}", history.display());
    check_history_file(&history);
    assert_eq!(number(&json, &["violations"]), 0, "{json}");
    assert!(number(&json, &["healthy_grants"]) >= 1_000, "{json}");
    for kind in [
        "master_restart_empty",
        "master_sigstop",
        "master_unreachable",
        "replica_kill",
        "replica_sigterm_drain",
    ] {
        assert!(number(&json, &["faults", kind]) > 0, "no {kind}: {json}");
    }
    // Hold sessions took part. Whether a drain caught one mid-hold is
    // coverage, not safety, and depends on the machine's load: a drain
    // waits up to 3 s for a holding session, but on a starved CI box the
    // session can finish its work before the daemon handles SIGTERM (seen
    // once in several runs). The draining event itself is asserted
    // deterministically by tests/tests/draining.rs; here the figure is printed.
    assert!(number(&json, &["session_grants"]) > 0, "{json}");
    eprintln!(
        "sessions told of a drain: {}",
        number(&json, &["sessions_drained"])
    );
    // Session client processes were frozen with SIGSTOP while holding a
    // lock, the lock passed on while they were frozen, and after SIGCONT
    // they found it gone (no write under it: frozen_client_stale_write 0).
    assert!(number(&json, &["frozen", "freezes_holding"]) > 0, "{json}");
    assert!(
        number(&json, &["frozen", "handoffs_during_freeze"]) > 0,
        "{json}"
    );
    assert!(
        number(&json, &["frozen", "resumed_told_gone"]) > 0,
        "{json}"
    );
    // Resumed past its validity, a frozen client stops by its own deadline
    // (or the daemon's word) before it validates or writes.
    assert!(
        number(&json, &["frozen", "resumed_told_lost"]) > 0,
        "{json}"
    );
    assert!(number(&json, &["frozen", "writes"]) > 0, "{json}");
    // A third of the frozen children's sessions carry a lock_delay: a
    // freeze holding one is judged (no grant inside the delay, counted in
    // `violations`) unless a master forgot the delay or a quorum was lost
    // around it. How many qualify depends on the schedule: printed.
    eprintln!(
        "frozen holders' lock_delays judged: {}",
        number(&json, &["frozen", "lock_delays_checked"])
    );
    // Semaphore clients took permits under the same faults,
    // never more than the limit at once (counted in `violations` above);
    // the limit was reached.
    assert!(number(&json, &["semaphore", "grants"]) >= 100, "{json}");
    assert_eq!(
        number(&json, &["semaphore", "most_at_once"]),
        number(&json, &["semaphore", "limit"]),
        "{json}"
    );
    assert_eq!(
        number(&json, &["violations_by_check", "semaphore_over_limit"]),
        0,
        "{json}"
    );
    // The mix mixed: every kind granted on the hot resources, grants of
    // kinds that may coexist held together, retries made, the rolling
    // restart's three extra restarts injected, short deadlines probed.
    for kind in ["plain", "shared", "permit2", "permit3", "multi", "leader"] {
        assert!(
            number(&json, &["grants_by_kind", kind]) > 0,
            "no {kind}: {json}"
        );
    }
    assert!(number(&json, &["mix", "kinds_held_together"]) > 0, "{json}");
    assert!(number(&json, &["mix", "request_id_retries"]) > 0, "{json}");
    assert!(
        number(&json, &["mix", "hold_retries_granted"]) > 0,
        "{json}"
    );
    // Exclusive Acquires with a hold_at_least, released before it ran,
    // were judged (`hold_at_least_cut_short`, counted in `violations`).
    assert!(
        number(&json, &["mix", "holds_released_early"]) > 0,
        "{json}"
    );
    // Elections ran beside the locks of the same names: leaders elected
    // (`leader` above), Resigns retried after their leadership ended, and
    // observers told the changes (`observer_went_back` in `violations`).
    assert!(number(&json, &["mix", "stale_resigns"]) > 0, "{json}");
    assert!(number(&json, &["mix", "observed_changes"]) > 0, "{json}");
    assert!(
        number(&json, &["faults", "master_restart_empty"]) >= 3,
        "{json}"
    );
    eprintln!(
        "short deadlines probed on the masters: {} (+{} CANCELLED)",
        number(&json, &["mix", "deadline_probes"]),
        number(&json, &["mix", "cancelled_probes"])
    );
    assert_eq!(code, Some(0), "{json}");
}

/// Where a run's history file goes: the test target's scratch directory.
fn history_path(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("chaos-history-{name}.jsonl"))
}

/// Every line of a history file is a JSON object with a type and a unique
/// id, and every kind of line is there (the format: tools/chaos/HISTORY.md).
fn check_history_file(path: &std::path::Path) {
    let text = std::fs::read_to_string(path).expect("the history file");
    let mut ids = std::collections::HashSet::new();
    let mut types = std::collections::BTreeMap::<String, usize>::new();
    for line in text.lines() {
        let value: Value = serde_json::from_str(line).expect("a JSON line");
        let kind = value["type"].as_str().expect("a type").to_owned();
        assert!(ids.insert(value["id"].as_u64().expect("an id")), "{line}");
        assert!(value["invoke_us"].is_u64(), "{line}");
        *types.entry(kind).or_default() += 1;
    }
    for kind in ["acquire", "extend", "release"] {
        assert!(
            types.get(kind).copied().unwrap_or(0) > 0,
            "no {kind} line: {types:?}"
        );
    }
}

/// Acquire calls per burst: thousands, as the issue asks, which back a
/// debug daemon up for seconds on the shared CI cores (each call a task in
/// the daemon, 12,000 master operations per burst) and starve the masters
/// of CPU; the run takes about 2 s longer than with 500.
const BURST: &str = "3000";

/// Bursts of Acquire calls at once through one connection while every
/// master is healthy, beside the checking clients: overload is
/// queued or answered RESOURCE_EXHAUSTED, never UNAVAILABLE (a burst call
/// answered UNAVAILABLE with every master healthy is a violation), and
/// most calls are granted (the rest: ABORTED on the burst-hot resources).
/// A run of its own: bursts in the 40 s schedule change its timing enough
/// that no session is open on a replica when it is drained.
#[test]
fn bursts_are_never_blamed_on_healthy_masters() {
    let (code, json) = chaos(&["--duration", "8", "--seed", "1", "--bursts", BURST]);
    assert_eq!(number(&json, &["violations"]), 0, "{json}");
    assert_eq!(
        number(
            &json,
            &["violations_by_check", "burst_unavailable_masters_healthy"]
        ),
        0,
        "{json}"
    );
    assert!(number(&json, &["bursts", "bursts"]) >= 1, "{json}");
    assert!(
        number(&json, &["bursts", "granted"]) * 2 >= number(&json, &["bursts", "calls"]),
        "{json}"
    );
    assert_eq!(code, Some(0), "{json}");
}

/// The burst check can fail: three masters' links blackholed at each
/// burst's start without the checker being told make the daemons' honest
/// UNAVAILABLE answers look like overload blamed on healthy masters, and
/// the run reports them and exits 1.
#[test]
fn burst_check_catches_unavailable_with_masters_it_thinks_healthy() {
    let (code, json) = chaos(&[
        "--duration",
        "4",
        "--seed",
        "1",
        "--bursts",
        "300",
        "--unrecorded-burst-outage",
    ]);
    assert!(
        number(
            &json,
            &["violations_by_check", "burst_unavailable_masters_healthy"]
        ) > 0,
        "{json}"
    );
    assert_eq!(code, Some(1), "{json}");
}

/// Quarantine off, a majority restarted empty under long leases: the
/// checker sees grants overlap and exits 1.
#[test]
fn counterfactual_without_quarantine_is_caught() {
    let (code, json) = chaos(&[
        "--duration",
        "20",
        "--schedule",
        "restarts",
        "--no-quarantine",
    ]);
    assert!(
        number(&json, &["violations_by_check", "overlapping_validity"]) > 0,
        "{json}"
    );
    assert_eq!(code, Some(1), "{json}");
}

/// The whole cluster starts fresh mid-run: all five masters
/// down for longer than any lease, then started empty together, with the
/// daemons at the default restart quarantine: no violation, and the new
/// cluster grants in the healthy phases that follow.
#[test]
fn fresh_cluster_mid_run_finds_no_violation() {
    let (code, json) = chaos(&["--duration", "20", "--schedule", "fresh", "--seed", "1"]);
    assert_eq!(number(&json, &["violations"]), 0, "{json}");
    assert!(
        number(&json, &["faults", "master_restart_empty"]) >= 5,
        "{json}"
    );
    assert_eq!(json["quarantine"], Value::Bool(true), "{json}");
    assert_eq!(code, Some(0), "{json}");
}

/// The review's interleavings, each forced
/// again and again on its own rig: a late client over a 20 ms link with
/// deadlines just above its wait, without and with a request id it retries
/// with at once; a flapping master that then restarts
/// empty under a lock held on three masters; a master 60 s ahead under
/// libfaketime while majorities restart empty. No violation, and each
/// interleaving happened (else the scenario reports "proves_nothing").
#[test]
fn review_interleavings_find_no_violation() {
    let (code, json) = chaos(&["--interleaving", "all", "--duration", "6", "--seed", "1"]);
    assert_eq!(number(&json, &["violations"]), 0, "{json}");
    let scenarios = &json["scenarios"];
    assert!(
        number(scenarios, &["slow_link", "late_deadline_exceeded"]) > 0,
        "{json}"
    );
    assert!(
        number(scenarios, &["idempotent", "retries_after_deadline"]) > 0,
        "{json}"
    );
    assert!(
        number(scenarios, &["idempotent", "lost_answer_retries"]) > 0,
        "{json}"
    );
    assert!(
        number(scenarios, &["flapping", "connection_closes"]) > 100,
        "{json}"
    );
    assert!(
        number(scenarios, &["clock_offset", "offset_gauge_s"]) >= 30,
        "{json}"
    );
    assert!(
        number(scenarios, &["clock_offset", "grants_after_last_restart"]) > 0,
        "{json}"
    );
    assert_eq!(code, Some(0), "{json}");
}

/// The flapping interleaving can fail: with the restart quarantine off,
/// the master restarted empty votes with the two H never held, and the
/// checker sees two holders.
#[test]
fn flapping_without_quarantine_is_caught() {
    let (code, json) = chaos(&[
        "--interleaving",
        "flapping",
        "--duration",
        "1",
        "--no-quarantine",
    ]);
    assert!(
        number(&json, &["scenarios", "flapping", "violations"]) > 0,
        "{json}"
    );
    assert_eq!(code, Some(1), "{json}");
}

/// Locks on several hot resources at once (`--multi`) beside
/// the plain contended clients, under the full fault schedule: every
/// resource of every multi grant passes the per-resource checks (no two
/// overlapping windows, fences ordered, critical sections apart, registers
/// intact), and multi grants were made. Short: about 20 s in all.
#[test]
fn multi_resource_grants_find_no_violation() {
    let (code, json) = chaos(&["--duration", "12", "--seed", "1", "--multi", "6"]);
    assert_eq!(number(&json, &["violations"]), 0, "{json}");
    assert!(number(&json, &["multi_resource_grants"]) >= 20, "{json}");
    assert_eq!(code, Some(0), "{json}");
}

/// 15 s of the full schedule (seed 2: masters restarted empty, slowed)
/// with six read-write clients (`--rw`): no violation, no
/// exclusive grant beside another grant nor a fence out of order among
/// conflicting ones, and both modes granted with readers really sharing.
#[test]
fn read_write_locks_under_faults() {
    let (code, json) = chaos(&["--duration", "15", "--seed", "2", "--rw", "6"]);
    assert_eq!(number(&json, &["violations"]), 0, "{json}");
    assert!(number(&json, &["rw", "shared_grants"]) > 0, "{json}");
    assert!(number(&json, &["rw", "exclusive_grants"]) > 0, "{json}");
    assert!(number(&json, &["rw", "shared_overlaps"]) > 0, "{json}");
    assert_eq!(code, Some(0), "{json}");
}

/// The cross-kind defects, forced (`--interleaving kinds`): a Hold retried
/// with its request id and the first stream closed, with a third client
/// trying; plain, permit, shared, another limit, plain one after another;
/// Acquires with 1-20 ms deadlines, the masters read a second later; a
/// reader right after a writer's hand-off, and a Release with three
/// masters in restart quarantine; a permit held across a rolling restart
/// of three masters; a plain lock with a `hold_at_least` released at once,
/// then a plain lock or a permit asked. No violation, and each
/// interleaving happened.
#[test]
fn cross_kind_interleavings_find_no_violation() {
    let (code, json) = chaos(&["--interleaving", "kinds", "--duration", "2", "--seed", "1"]);
    assert_eq!(number(&json, &["violations"]), 0, "{json}");
    let scenarios = &json["scenarios"];
    assert!(
        number(scenarios, &["hold_retry", "retries_granted_same_token"]) > 0,
        "{json}"
    );
    assert!(
        number(scenarios, &["kind_fences", "ordered_pairs"]) > 0,
        "{json}"
    );
    assert!(
        number(scenarios, &["hold_at_least", "holds_judged"]) > 0,
        "{json}"
    );
    assert!(
        number(
            scenarios,
            &["rolling_permit", "permit_held_across_rolling_restart"]
        ) > 0,
        "{json}"
    );
    assert_eq!(code, Some(0), "{json}");
}

/// The daemon re-creating a permit's key without its limit record on a
/// returned master (`REDLOCKD__TESTING__COUNTERFACTUALS=recreate-without-limit`) is
/// caught: after the rolling restart a plain lock (or another limit) is
/// granted beside the held permit.
#[test]
fn counterfactual_recreate_without_limit_is_caught() {
    let (code, json) = chaos(&[
        "--interleaving",
        "rolling-permit",
        "--duration",
        "1",
        "--counterfactual",
        "recreate-without-limit",
    ]);
    assert!(
        number(&json, &["scenarios", "rolling_permit", "violations"]) > 0,
        "{json}"
    );
    assert_eq!(code, Some(1), "{json}");
}

/// Fences kept per kind (`REDLOCKD__TESTING__COUNTERFACTUALS=per-kind-fences`) are
/// caught: a permit's fence below the plain holder's before it.
#[test]
fn counterfactual_per_kind_fences_is_caught() {
    let (code, json) = chaos(&[
        "--interleaving",
        "kind-fences",
        "--duration",
        "2",
        "--counterfactual",
        "per-kind-fences",
    ]);
    assert!(
        number(&json, &["scenarios", "kind_fences", "violations"]) > 0,
        "{json}"
    );
    assert_eq!(code, Some(1), "{json}");
}

/// A holder's Release deleting the lock before its `hold_at_least` ran
/// (`REDLOCKD__TESTING__COUNTERFACTUALS=release-ignores-hold-at-least`) is
/// caught: the next holder is granted inside the hold.
#[test]
fn counterfactual_release_ignores_hold_at_least_is_caught() {
    let (code, json) = chaos(&[
        "--interleaving",
        "hold-at-least",
        "--duration",
        "2",
        "--counterfactual",
        "release-ignores-hold-at-least",
    ]);
    assert!(
        number(&json, &["scenarios", "hold_at_least", "violations"]) > 0,
        "{json}"
    );
    assert_eq!(code, Some(1), "{json}");
}

/// A Resign that ends whoever leads (not only its own leadership): a
/// candidate's Resign retried after its leadership ended ends the next
/// leader's, and a standby is elected inside that leader's validity.
#[test]
fn counterfactual_resign_ignores_token_is_caught() {
    let (code, json) = chaos(&[
        "--mix",
        "--duration",
        "8",
        "--seed",
        "3",
        "--counterfactual",
        "resign-ignores-token",
    ]);
    assert!(
        number(&json, &["violations_by_check", "overlapping_validity"]) > 0,
        "{json}"
    );
    assert_eq!(code, Some(1), "{json}");
}
