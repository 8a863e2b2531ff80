//! The readable tables printed after every run, and W1's layer ratios.

use crate::burst::{self, BurstReport};
use crate::stats::{ms, permille, print_columns};
use crate::w1::W1Report;
use crate::w2::{self, W2Report};
use crate::w3::W3Report;

/// Every report of this invocation, by workload.
#[derive(Default)]
pub(crate) struct Reports {
    /// W1 runs, mode-major.
    pub w1: Vec<W1Report>,
    /// W2 runs.
    pub w2: Vec<W2Report>,
    /// W3 runs.
    pub w3: Vec<W3Report>,
    /// Bursts.
    pub burst: Vec<BurstReport>,
    /// Frozen clients.
    pub frozen: Vec<crate::frozen::FrozenReport>,
    /// Semaphore beside the plain lock.
    pub semaphore: Vec<crate::semaphore::SemReport>,
    /// Several resources at once.
    pub multi: Vec<crate::multi::MultiReport>,
}

impl Reports {
    /// Prints a table per workload that ran.
    pub(crate) fn print_tables(&self) {
        if !self.w1.is_empty() {
            print_w1(&self.w1);
        }
        if !self.w2.is_empty() {
            w2::print_table(&self.w2);
        }
        if !self.w3.is_empty() {
            print_w3(&self.w3);
        }
        if !self.burst.is_empty() {
            burst::print_table(&self.burst);
        }
        if !self.multi.is_empty() {
            crate::multi::print_table(&self.multi);
        }
        if !self.frozen.is_empty() {
            crate::frozen::print_table(&self.frozen);
        }
        if !self.semaphore.is_empty() {
            crate::semaphore::print_table(&self.semaphore);
        }
    }
}

fn print_w1(reports: &[W1Report]) {
    let heads: Vec<String> = reports
        .iter()
        .map(|r| format!("{} C={}", r.mode, r.concurrency))
        .collect();
    let column = |f: &dyn Fn(&W1Report) -> String| reports.iter().map(f).collect::<Vec<_>>();
    let rows = vec![
        (
            "cycles / s",
            column(&|r| format!("{:.0}", r.cycles_per_s())),
        ),
        ("acquire p50", column(&|r| ms(permille(&r.acquire, 500)))),
        ("acquire p99", column(&|r| ms(permille(&r.acquire, 990)))),
        ("acquire p99.9", column(&|r| ms(permille(&r.acquire, 999)))),
        ("release p50", column(&|r| ms(permille(&r.release, 500)))),
        ("release p99", column(&|r| ms(permille(&r.release, 990)))),
        ("release p99.9", column(&|r| ms(permille(&r.release, 999)))),
        ("errors", column(&|r| r.errors.to_string())),
        ("CPU us/cycle m/d/c", column(&|r| r.cpu.cell())),
    ];
    print_columns("W1 uncontended acquire + release", &heads, &rows);
    println!("CPU us/cycle m/d/c: core-microseconds per cycle of the masters (all five; etcd: the etcd server), the daemon process (floor: the floor process) and the bench process (redsync, etcd: the redlockd-peers process), from /proc/<pid>/stat over the window");
    let find = |mode: &str, c: usize| {
        reports
            .iter()
            .find(|r| r.mode == mode && r.concurrency == c)
    };
    // The performance targets (docs/benchmarks.md, "Peers in the same
    // run"): same-run ratios against rslock (`library`) and etcd.
    let rate = |r: &W1Report| r.cycles_per_s().max(f64::MIN_POSITIVE);
    if let (Some(grpc), Some(library)) = (find("grpc", 64), find("library", 64)) {
        let ratio = grpc.cycles_per_s() / rate(library);
        println!("W1 C=64 cycles/s, grpc / library (rslock): {ratio:.2} (target >= 0.5)");
    }
    if let (Some(grpc), Some(etcd)) = (find("grpc", 64), find("etcd", 64)) {
        let ratio = grpc.cycles_per_s() / rate(etcd);
        println!("W1 C=64 cycles/s, grpc / etcd: {ratio:.2} (target >= 1.5)");
    }
    print_floor_ratios(reports);
    let p50 = |r: &W1Report| permille(&r.acquire, 500);
    if let (Some(grpc), Some(library)) = (
        find("grpc", 1).and_then(p50),
        find("library", 1).and_then(p50),
    ) {
        let gap = grpc.as_secs_f64() * 1e6 - library.as_secs_f64() * 1e6;
        println!("W1 C=1 acquire p50, grpc - library (rslock): {gap:.0} us (target <= 150 us)");
    }
}

fn print_w3(reports: &[W3Report]) {
    let heads: Vec<String> = reports
        .iter()
        .map(|r| format!("K={}", r.sessions))
        .collect();
    let column = |f: &dyn Fn(&W3Report) -> String| reports.iter().map(f).collect::<Vec<_>>();
    let mb = |kb: u64| format!("{:.1} MB", kb as f64 / 1024.0);
    let rows = vec![
        (
            "window s",
            column(&|r| format!("{:.1}", r.duration.as_secs_f64())),
        ),
        (
            "opening all s",
            column(&|r| format!("{:.1}", r.open.as_secs_f64())),
        ),
        ("RSS idle", column(&|r| mb(r.rss_idle_kb))),
        ("RSS at the end", column(&|r| mb(r.rss_kb))),
        ("RSS peak", column(&|r| mb(r.rss_peak_kb))),
        ("CPU s", column(&|r| format!("{:.2}", r.cpu_s))),
        (
            "CPU s / session-minute",
            column(&|r| format!("{:.5}", r.cpu_per_session_minute())),
        ),
        ("extensions", column(&|r| r.extended.to_string())),
        ("lost", column(&|r| r.lost.to_string())),
        (
            "extension success",
            column(&|r| format!("{:.3}%", r.success_rate() * 100.0)),
        ),
    ];
    print_columns("W3 open Hold sessions (daemon process)", &heads, &rows);
}

/// The daemon's CPU per cycle (two calls) held against the gRPC floor's, at
/// each concurrency both modes ran: the target is at most 2x.
fn print_floor_ratios(reports: &[W1Report]) {
    for grpc in reports.iter().filter(|r| r.mode == "grpc") {
        let floor = reports
            .iter()
            .find(|r| r.mode == "floor" && r.concurrency == grpc.concurrency);
        let (Some(daemon), Some(floor)) = (grpc.cpu.daemon_us, floor.and_then(|f| f.cpu.daemon_us))
        else {
            continue;
        };
        let ratio = daemon / floor.max(f64::MIN_POSITIVE);
        println!(
            "W1 C={} server CPU per cycle, daemon / gRPC floor: {daemon:.0} / {floor:.0} us = {ratio:.2}x (target <= 2x)",
            grpc.concurrency
        );
    }
}
