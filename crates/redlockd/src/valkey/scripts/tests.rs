//! The batch script's assembly: offsets, headers, constants.

use super::*;
use std::time::Duration;

/// Offsets replace every index the scripts use.
#[test]
fn offsets() {
    assert_eq!(
        at_offsets("GET KEYS[1] KEYS[2] ARGV[1] ARGV[4]"),
        "GET KEYS[k + 0] KEYS[k + 1] ARGV[a + 0] ARGV[a + 3]"
    );
    assert_eq!(at_offsets("ARGV[10] ARGV[1]"), "ARGV[a + 9] ARGV[a + 0]");
    assert_eq!(
        at_offsets("OPT[6] ARGV[1]"),
        "(na >= 6 and ARGV[a + 5] or '0') ARGV[a + 0]"
    );
    for op in Op::ALL {
        let body = at_offsets(op.lua());
        // No index left unreplaced (one above MAX_INDEX would be).
        for n in 1..=MAX_INDEX * 2 {
            assert!(!body.contains(&format!("KEYS[{n}]")), "{body}");
            assert!(!body.contains(&format!("ARGV[{n}]")), "{body}");
            assert!(!body.contains(&format!("OPT[{n}]")), "{body}");
        }
    }
}

/// Every counterfactual finds the fixed line it replaces (a rewrite of
/// a script that moved the line would silently switch it off), and
/// only its own switch applies it.
#[test]
fn counterfactuals_apply() {
    let all = Counterfactuals {
        recreate_without_limit: true,
        per_kind_fences: true,
        release_ignores_hold_at_least: true,
        resign_ignores_token: true,
        release_silent_sessions: true,
    };
    for (op, on, fixed, defect) in COUNTERFACTUALS {
        assert!(op.lua().contains(fixed), "{op:?}: {fixed}");
        assert!(on(&all));
        assert!(!on(&Counterfactuals::default()));
        let changed = op.lua_with(all);
        assert!(!changed.contains(fixed), "{op:?}");
        assert!(changed.contains(defect), "{op:?}");
        assert_eq!(op.lua_with(Counterfactuals::default()), op.lua());
    }
}

/// A header keeps its three counts apart as the batch script takes
/// them apart (`h % 100`, `floor(h / 100) % 10000`, `floor(h / 10^6)`),
/// and refuses counts it could not.
#[test]
fn headers_take_apart() {
    for (op, keys, args) in [
        (Op::Acquire, 2, 5),
        (Op::AcquireAll, 128, 4),
        (Op::Release, 0, 0),
    ] {
        let h = header(op, keys, args).expect("fits");
        assert_eq!(h % 100, op as i64);
        assert_eq!((h / 100) % 10_000, keys as i64);
        assert_eq!(h / 1_000_000, args as i64);
    }
    assert_eq!(header(Op::AcquireAll, 10_000, 4), None);
}

/// The constants are written in, and no placeholder is left.
#[test]
fn constants_are_written_in() {
    let constants = Constants {
        horizon_allowance: Duration::from_millis(1234),
        proposal_window: Duration::from_micros(5_678_901),
        fence_ttl: Duration::from_millis(98_765),
        fence_refresh: Duration::from_micros(12_345_678),
    };
    let lua = batch_script(Counterfactuals::default(), constants);
    for placeholder in [
        "ALLOWANCE",
        "PROPOSAL_WINDOW_US",
        "FENCE_TTL_MS",
        "FENCE_REFRESH_US",
        "OPT[",
    ] {
        assert!(!lua.contains(placeholder), "{placeholder}");
    }
    for value in ["+ 1234", "t + 5678901", "'98765'", "p / 12345678"] {
        assert!(lua.contains(value), "{value}");
    }
}

/// Every operation is in the batch script, at the index its code names.
#[test]
fn batch_script_holds_every_op_in_code_order() {
    let constants = Constants::defaults();
    let lua = batch_script(Counterfactuals::default(), constants);
    let mut from = 0;
    for (i, op) in Op::ALL.iter().enumerate() {
        assert_eq!(*op as usize, i + 1);
        let body = constants.write_into(&at_offsets(op.lua().trim()));
        let at = lua[from..].find(&body).expect("op body present") + from;
        from = at + 1;
    }
}

/// The bench's script is the one a daemon at the default settings sends,
/// and its ablations remove exactly what they name: the acquire's two
/// writes of the fence record, then the acquire's and the release's reads.
#[test]
fn the_bench_scripts_drop_only_what_they_name() {
    let daemon = super::cost::daemon_script();
    assert_eq!(Value::from(daemon.as_str()), BatchScript::new().lua);
    let ablated = super::cost::script_without_fence_record().expect("record lines present");
    assert!(daemon.contains("'holder', ARGV[a + 0], 'fence', ARGV[a + 2]"));
    assert!(!ablated.contains("'holder', ARGV[a + 0], 'fence', ARGV[a + 2]"));
    let removed = daemon.lines().count() - ablated.lines().count();
    assert_eq!(removed, 2, "the HSET of the record and the hash's PEXPIRE");
    let without_reads = super::cost::script_without_fence_record_or_reads().expect("reads present");
    assert_eq!(
        without_reads.matches("redis.call('HMGET'").count() + 2,
        daemon.matches("redis.call('HMGET'").count()
    );
    assert_eq!(without_reads.lines().count(), ablated.lines().count());
}
