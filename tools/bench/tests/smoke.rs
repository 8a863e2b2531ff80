//! `redlockd-bench` smoke run: every workload for about a second with tiny
//! parameters, over its own `--dev` masters and daemons. It checks that the
//! tool runs and that its JSON lines are well-formed and non-zero; it makes
//! no timing assertions (CI machines are slow and shared).

use serde_json::Value;
use std::process::Command;

/// The W1 modes this build has (`library` needs the `bench-library` feature).
fn w1_modes() -> Vec<&'static str> {
    let mut modes = vec!["grpc", "floor", "engine", "raw"];
    if cfg!(feature = "bench-library") {
        modes.push("library");
    }
    modes
}

/// The JSON lines of stdout, each parsed (a malformed one fails the test).
fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// A number field of a JSON line, which must be there.
fn number(line: &Value, field: &str) -> f64 {
    line[field]
        .as_f64()
        .unwrap_or_else(|| panic!("no number {field:?} in {line}"))
}

/// Runs `redlockd-bench` with `args`, which must succeed: its stdout.
fn bench(args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_redlockd-bench"))
        .args(args)
        .output()
        .expect("redlockd-bench runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "redlockd-bench failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    stdout
}

/// Every workload runs and reports well-formed, non-zero figures: W1 in
/// every mode, W2 with wake-ups and polling, W3 on a daemon process.
#[test]
fn every_workload_reports_well_formed_non_zero_lines() {
    let modes = w1_modes().join(",");
    let stdout = bench(&[
        "--dev",
        "--duration",
        "1",
        "--concurrency",
        "2",
        "--modes",
        &modes,
        "--contenders",
        "2",
        "--sessions",
        "20",
        "--w3-duration",
        "2",
    ]);
    let lines = json_lines(&stdout);
    let of = |workload: &str| -> Vec<&Value> {
        lines.iter().filter(|l| l["workload"] == workload).collect()
    };

    let w1 = of("W1");
    let seen: Vec<&str> = w1.iter().filter_map(|l| l["mode"].as_str()).collect();
    assert_eq!(seen, w1_modes(), "one W1 line per mode:\n{stdout}");
    for line in &w1 {
        assert_eq!(number(line, "concurrency"), 2.0, "{line}");
        for field in [
            "cycles",
            "cycles_per_s",
            "acquire_p50_us",
            "release_p999_us",
        ] {
            assert!(number(line, field) > 0.0, "{field} in {line}");
        }
        // Failed cycles (a master missing its 50 ms timeout on a loaded CI
        // machine) are timing, not form: only their presence is checked.
        assert!(number(line, "errors") >= 0.0, "{line}");
        // The CPU split: the bench's always; the masters' wherever they
        // serve the cycles (--dev; not the floor, which calls none); the
        // server process's where there is one (grpc: the daemon; floor:
        // the floor process).
        assert!(number(line, "client_cpu_us") >= 0.0, "{line}");
        match line["mode"] == "floor" {
            true => assert!(line["masters_cpu_us"].is_null(), "{line}"),
            false => assert!(number(line, "masters_cpu_us") >= 0.0, "{line}"),
        }
        match line["mode"] == "grpc" || line["mode"] == "floor" {
            true => assert!(number(line, "daemon_cpu_us") >= 0.0, "{line}"),
            false => assert!(line["daemon_cpu_us"].is_null(), "{line}"),
        }
    }

    let w2 = of("W2");
    let seen: Vec<&str> = w2.iter().filter_map(|l| l["mode"].as_str()).collect();
    assert_eq!(seen, ["wake", "poll"], "{stdout}");
    for line in &w2 {
        assert!(number(line, "grants") > 0.0, "{line}");
        for field in ["masters_cpu_us", "daemon_cpu_us", "client_cpu_us"] {
            assert!(number(line, field) >= 0.0, "{field} in {line}");
        }
    }

    let w3 = of("W3");
    assert_eq!(w3.len(), 1, "{stdout}");
    let line = w3[0];
    assert_eq!(number(line, "sessions"), 20.0, "{line}");
    for field in [
        "rss_mb",
        "rss_peak_mb",
        "extensions",
        "extension_success_rate",
    ] {
        assert!(number(line, field) > 0.0, "{field} in {line}");
    }
    assert!(number(line, "cpu_s_per_session_minute") >= 0.0, "{line}");

    for table in [
        "W1 uncontended",
        "W2 contended hand-off",
        "W3 open Hold sessions",
    ] {
        assert!(stdout.contains(table), "no {table:?} table:\n{stdout}");
    }
}

/// The script workload runs the daemon's batch script, its two ablations
/// and rslock's commands on a master directly, and checks every reply as
/// a grant with its fence or a release: a change of the script's layout
/// that the bench no longer matches fails here, not silently in a figure.
#[test]
fn script_cost_runs_every_variant_and_checks_its_replies() {
    let stdout = bench(&[
        "--dev",
        "--workloads",
        "script",
        "--duration",
        "0.3",
        "--script-batches",
        "1,4",
    ]);
    let lines = json_lines(&stdout);
    let seen: Vec<(String, f64)> = lines
        .iter()
        .map(|l| {
            (
                l["variant"].as_str().unwrap_or("").to_owned(),
                number(l, "batch"),
            )
        })
        .collect();
    let variants = [
        "daemon",
        "no fence record",
        "no fence record, reads",
        "rslock",
    ];
    let want: Vec<(String, f64)> = variants
        .iter()
        .flat_map(|v| [((*v).to_owned(), 1.0), ((*v).to_owned(), 4.0)])
        .collect();
    assert_eq!(seen, want, "{stdout}");
    for line in &lines {
        assert!(number(line, "cycles") > 0.0, "{line}");
        assert!(number(line, "master_cpu_us") >= 0.0, "{line}");
    }
    assert!(
        stdout.contains("One master's CPU per plain cycle"),
        "{stdout}"
    );
}
