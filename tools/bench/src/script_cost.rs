//! **Script cost** (`--workloads script`, `--dev` only): what one master
//! spends per plain lock cycle (acquire + release) of the batch script, by
//! the number of operations a script call carries, beside what the same
//! master spends on rslock's commands. No daemon, no engine: this bench
//! writes the script calls itself on one connection to the first master,
//! as a daemon's batcher would (at most [`IN_FLIGHT`] calls out at once),
//! and reads the master's CPU from `/proc` over the window.
//!
//! Four variants, each at every `--script-batches` size:
//! - `daemon`: the batch script a daemon at the default settings sends
//!   (`redlockd::valkey::script_cost::daemon_script`), with the arguments of
//!   a plain acquire with its one-round fence and of a plain release;
//! - `no fence record`: the same, with the acquire's two writes of the fence
//!   record (`HSET` of its fields, `PEXPIRE` of the hash) removed: the
//!   difference is what the fence itself costs the master;
//! - `no fence record, reads`: also without the acquire's and the
//!   release's `HMGET` of the fence hash: what is left is the script's own
//!   machinery around `SET NX` and `DELIFEQ` (the batch, the operation's
//!   call, `TIME`, the horizon, the replies);
//! - `rslock`: what the rslock crate sends per lock per master, `SET NX PX`
//!   and a compare-and-delete script, pipelined (the batch size is how many
//!   of each are written together).
//!
//! Every reply is checked (a grant that took its fence, a release that
//! deleted): a script whose layout changed fails the run instead of
//! measuring something else. The master is flushed before each run (it is
//! the bench's own, `--dev`): fence records accumulate otherwise.
//!
//! The master's own counters (`INFO commandstats`, reset before each run)
//! then say how much of its time was inside the script calls, and of that
//! how much in the commands the scripts ran and how much in the Lua around
//! them ([`crate::commandstats`]).

use crate::commandstats::ScriptTime;
use crate::proc::ProcSample;
use crate::resp::{command, Resp};
use crate::stats::print_columns;
use crate::BoxError;
use redlockd::valkey::script_cost;
use redlockd_testkit::masters::LocalMasters;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Script calls (or pipelined groups of commands) out at once, as a
/// daemon's batcher allows per master.
const IN_FLIGHT: usize = script_cost::CALLS_IN_FLIGHT;

/// The lock's ttl, as W1's.
const TTL_MS: &str = "10000";

/// What rslock sends to release (its compare-and-delete script).
const RSLOCK_UNLOCK: &str =
    "if redis.call('get',KEYS[1]) == ARGV[1] then return redis.call('del',KEYS[1]) else return 0 end";

/// One run's figures.
pub(crate) struct ScriptReport {
    variant: Variant,
    batch: usize,
    cycles: usize,
    duration: Duration,
    /// The master's CPU per cycle, core-microseconds.
    master_us: f64,
    /// The master's own account of its time in script calls.
    script_time: ScriptTime,
}

/// What runs on the master, in the order of [`Variant::ALL`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// The daemon's batch script.
    Daemon,
    /// Without the acquire's fence record.
    NoFenceRecord,
    /// Without the record and the fence hash's reads.
    NoFenceRecordOrReads,
    /// rslock's commands.
    Rslock,
}

impl Variant {
    const ALL: [Variant; 4] = [
        Variant::Daemon,
        Variant::NoFenceRecord,
        Variant::NoFenceRecordOrReads,
        Variant::Rslock,
    ];

    /// Its name in the JSON lines and the table.
    fn name(self) -> &'static str {
        match self {
            Variant::Daemon => "daemon",
            Variant::NoFenceRecord => "no fence record",
            Variant::NoFenceRecordOrReads => "no fence record, reads",
            Variant::Rslock => "rslock",
        }
    }

    /// The script it loads: the batch script, or rslock's release.
    fn script(self) -> Result<String, BoxError> {
        Ok(match self {
            Variant::Daemon => script_cost::daemon_script(),
            Variant::NoFenceRecord => script_cost::script_without_fence_record()
                .ok_or("the acquire's fence record is no longer where the bench removes it")?,
            Variant::NoFenceRecordOrReads => script_cost::script_without_fence_record_or_reads()
                .ok_or("the fence hash's reads are no longer where the bench removes them")?,
            Variant::Rslock => RSLOCK_UNLOCK.to_owned(),
        })
    }
}

/// Runs every variant at every batch size against the first `--dev`
/// master, for `duration` each, and prints the table.
pub(crate) async fn run_all(
    batches: &[usize],
    duration: Duration,
    masters: Option<&LocalMasters>,
) -> Result<Vec<ScriptReport>, BoxError> {
    let Some(masters) = masters else {
        tracing::warn!("script skipped: it flushes a master, so it runs only on --dev masters");
        return Ok(Vec::new());
    };
    let (port, pid) = (
        masters.port(0),
        masters.pid(0).ok_or("master 0 has no pid")?,
    );
    let sizes = batches.to_vec();
    let reports = tokio::task::spawn_blocking(move || -> Result<Vec<ScriptReport>, BoxError> {
        let mut reports = Vec::new();
        for variant in Variant::ALL {
            for &batch in &sizes {
                let name = variant.name();
                tracing::info!(variant = name, batch, "script cost for {duration:?}");
                let report = run(variant, batch, duration, port, pid)?;
                crate::emit(&report.json_line());
                reports.push(report);
            }
        }
        Ok(reports)
    })
    .await??;
    print(&reports, batches);
    Ok(reports)
}

/// One variant at one batch size.
fn run(
    variant: Variant,
    batch: usize,
    duration: Duration,
    port: u16,
    pid: u32,
) -> Result<ScriptReport, BoxError> {
    let mut master = Resp::connect(port)?;
    master.expect_ok(&command(&["FLUSHALL"]))?;
    master.expect_ok(&command(&["CONFIG", "RESETSTAT"]))?;
    let script = variant.script()?;
    let sha = master.bulk(&command(&["SCRIPT", "LOAD", &script]))?;
    let acquire_header = script_cost::acquire_header(5).ok_or("acquire header")?;
    let release_header = script_cost::release_header(4).ok_or("release header")?;
    let token = format!("{:032x}", rand::random::<u128>());
    // A resource per operation slot, each locked and released again every
    // round, as W1's workers reuse theirs: the fence record is rewritten,
    // not created.
    let names: Vec<Vec<String>> = (0..IN_FLIGHT)
        .map(|call| (0..batch).map(|op| format!("r{call}-{op}")).collect())
        .collect();
    let rslock = variant == Variant::Rslock;
    let mut cycles = 0usize;
    let cpu_before = ProcSample::read(pid)?.cpu_s;
    let started = Instant::now();
    while started.elapsed() < duration {
        // One round: IN_FLIGHT calls of `batch` acquires, then as many of
        // `batch` releases of the same locks. Each round's proposal is
        // above the last (the clock moved on), as a daemon's are.
        let proposal = (now_micros() + 300_000).to_string();
        let acquires = names.iter().flat_map(|group| match rslock {
            true => group
                .iter()
                .flat_map(|name| {
                    let key = format!("redlock:lock:{name}");
                    command(&["SET", &key, &token, "NX", "PX", TTL_MS])
                })
                .collect(),
            false => script_call(&sha, group, |name| {
                let lock = format!("redlock:lock:{name}");
                let keys = vec![lock, format!("redlock:fence:{name}")];
                let args = [
                    &acquire_header.to_string(),
                    &token,
                    TTL_MS,
                    &proposal,
                    "",
                    "unary",
                ];
                (keys, args.map(|s| s.to_owned()).to_vec())
            }),
        });
        master.send(&acquires.collect::<Vec<u8>>())?;
        for group in &names {
            match rslock {
                true => group.iter().try_for_each(|_| master.expect_ok_reply())?,
                false => master.expect_grants(group.len())?,
            }
        }
        let releases = names.iter().flat_map(|group| match rslock {
            true => group
                .iter()
                .flat_map(|name| {
                    let key = format!("redlock:lock:{name}");
                    command(&["EVALSHA", &sha, "1", &key, &token])
                })
                .collect(),
            false => script_call(&sha, group, |name| {
                let fence = format!("redlock:fence:{name}");
                let keys = vec![format!("redlock:lock:{name}"), fence.clone(), fence];
                let args = [
                    &release_header.to_string(),
                    &token,
                    "redlock:release",
                    name,
                    "1",
                ];
                (keys, args.map(|s| s.to_owned()).to_vec())
            }),
        });
        master.send(&releases.collect::<Vec<u8>>())?;
        for group in &names {
            match rslock {
                true => group.iter().try_for_each(|_| master.expect_integer(1))?,
                false => master.expect_releases(group.len())?,
            }
        }
        cycles += IN_FLIGHT * batch;
    }
    let duration = started.elapsed();
    let used = ProcSample::read(pid)?.cpu_s - cpu_before;
    let stats = master.bulk(&command(&["INFO", "commandstats"]))?;
    let top_level: &[&str] = if rslock { &["set"] } else { &[] };
    master.expect_ok(&command(&["FLUSHALL"]))?;
    Ok(ScriptReport {
        variant,
        batch,
        cycles,
        duration,
        master_us: used * 1e6 / cycles.max(1) as f64,
        script_time: ScriptTime::of(&stats, top_level),
    })
}

impl ScriptReport {
    fn json_line(&self) -> String {
        format!(
            "{{\"workload\":\"script\",\"variant\":\"{}\",\"batch\":{},\"duration_s\":{:.3},\"cycles\":{},\"cycles_per_s\":{:.1},\"master_cpu_us\":{:.2},\"five_masters_cpu_us\":{:.1},\"in_scripts_us\":{:.2},\"scripts_commands_us\":{:.2},\"scripts_lua_us\":{:.2}}}",
            self.variant.name(),
            self.batch,
            self.duration.as_secs_f64(),
            self.cycles,
            self.cycles as f64 / self.duration.as_secs_f64(),
            self.master_us,
            self.master_us * 5.0,
            self.per_cycle(self.script_time.in_scripts),
            self.per_cycle(self.script_time.scripts_commands),
            self.per_cycle(self.script_time.lua()),
        )
    }

    /// Microseconds of the whole run as microseconds per cycle.
    fn per_cycle(&self, usec: u64) -> f64 {
        usec as f64 / self.cycles.max(1) as f64
    }
}

fn print(reports: &[ScriptReport], batches: &[usize]) {
    if reports.is_empty() {
        return;
    }
    print_table(
        reports,
        batches,
        "One master's CPU per plain cycle (acquire + release); five masters: x5",
        |r| format!("{:.1} us", r.master_us),
    );
    print_table(
        reports,
        batches,
        "Of which inside script calls, per cycle: the commands they ran + the Lua around them (the master's commandstats)",
        |r| {
            let time = r.script_time;
            format!(
                "{:.1} + {:.1} us",
                r.per_cycle(time.scripts_commands),
                r.per_cycle(time.lua())
            )
        },
    );
}

/// A table of one figure, a row per variant and a column per batch size.
fn print_table(
    reports: &[ScriptReport],
    batches: &[usize],
    title: &str,
    cell: impl Fn(&ScriptReport) -> String,
) {
    let heads: Vec<String> = batches.iter().map(|b| format!("batch {b}")).collect();
    let rows: Vec<(&str, Vec<String>)> = Variant::ALL
        .iter()
        .map(|&variant| {
            let cells = batches
                .iter()
                .map(|&b| {
                    reports
                        .iter()
                        .find(|r| r.variant == variant && r.batch == b)
                        .map_or("-".to_owned(), &cell)
                })
                .collect();
            (variant.name(), cells)
        })
        .collect();
    print_columns(title, &heads, &rows);
}

/// One batch script call (EVALSHA) of an operation per resource of
/// `group`: the horizon key, then each operation's keys; the operations'
/// count, then each one's header and arguments (`op` gives both, the
/// header first among the arguments), packed into one value from
/// `PACKED_FROM` operations on, as a daemon's batcher lays them out.
fn script_call(
    sha: &str,
    group: &[String],
    op: impl Fn(&str) -> (Vec<String>, Vec<String>),
) -> Vec<u8> {
    let ops: Vec<(Vec<String>, Vec<String>)> = group.iter().map(|name| op(name)).collect();
    let key_count = 1 + ops.iter().map(|(keys, _)| keys.len()).sum::<usize>();
    let mut call: Vec<Vec<u8>> = vec![
        b"EVALSHA".to_vec(),
        sha.into(),
        key_count.to_string().into(),
        b"redlock:horizon".to_vec(),
    ];
    call.extend(
        ops.iter()
            .flat_map(|(keys, _)| keys.iter().map(|key| key.clone().into())),
    );
    let count = ops.len().to_string();
    let args = std::iter::once(count.as_bytes()).chain(
        ops.iter()
            .flat_map(|(_, args)| args.iter().map(|arg| arg.as_bytes())),
    );
    match ops.len() >= script_cost::PACKED_FROM {
        true => call.push(script_cost::packed_args(args)),
        false => call.extend(args.map(<[u8]>::to_vec)),
    }
    command(&call)
}

fn now_micros() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros())
}
