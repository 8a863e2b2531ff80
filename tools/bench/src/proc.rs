//! Readings of a daemon process from `/proc`: its resident memory and CPU
//! time, so that figures are the daemon's own, apart from the bench's.

use crate::BoxError;

/// Clock ticks per second of `/proc/<pid>/stat` times (USER_HZ: 100 on Linux).
const CLOCK_TICKS_PER_S: f64 = 100.0;

/// One reading of the daemon process.
#[derive(Clone, Copy)]
pub(crate) struct ProcSample {
    /// Resident memory, KiB.
    pub rss_kb: u64,
    /// CPU seconds used so far (user + system).
    pub cpu_s: f64,
}

impl ProcSample {
    /// Reads `/proc/<pid>/status` (VmRSS) and `/proc/<pid>/stat` (utime, stime).
    pub(crate) fn read(pid: u32) -> Result<ProcSample, BoxError> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let rss_kb = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .ok_or("no VmRSS in /proc/<pid>/status")?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // Fields after the command name (which may hold spaces): state is
        // field 3, utime 14, stime 15.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .ok_or("malformed /proc/<pid>/stat")?
            .1
            .split_whitespace()
            .collect();
        let tick = |i: usize| -> Result<f64, BoxError> {
            Ok(fields
                .get(i)
                .ok_or("short /proc/<pid>/stat")?
                .parse::<u64>()? as f64)
        };
        let cpu_s = (tick(11)? + tick(12)?) / CLOCK_TICKS_PER_S;
        Ok(ProcSample { rss_kb, cpu_s })
    }
}

/// CPU seconds (user + system) process `pid` has used so far.
fn cpu_s(pid: u32) -> Result<f64, BoxError> {
    Ok(ProcSample::read(pid)?.cpu_s)
}

/// The processes whose CPU a run splits its cost into: the masters, the
/// daemon (a process of its own, when the mode has one) and the client (this
/// bench process: the workers, and in `engine` mode the engine too; in the
/// peer modes the `redlockd-peers` process).
#[derive(Clone, Debug, Default)]
pub(crate) struct CpuMeter {
    /// The masters' process ids (empty: not known, e.g. `--nodes`). The
    /// `etcd` peer puts its etcd server here: the store behind the locks.
    pub masters: Vec<u32>,
    /// The daemon process's id, if the mode has one and it is known.
    pub daemon: Option<u32>,
    /// The client process when it is not this bench (the peer modes run
    /// their workers in a process of their own).
    pub client: Option<u32>,
}

/// The CPU counters at one instant: a measuring window's start or end.
pub(crate) struct CpuReading {
    masters: Option<f64>,
    daemon: Option<f64>,
    client: f64,
}

/// Core-microseconds of CPU per unit of work (a cycle, a grant) over a
/// measuring window, by process kind; `None`: not measured.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CpuSplit {
    /// All masters together.
    pub masters_us: Option<f64>,
    /// The daemon process.
    pub daemon_us: Option<f64>,
    /// The bench process (client; in-process modes include their lock logic).
    pub client_us: Option<f64>,
}

impl CpuMeter {
    /// The masters' CPU seconds summed; `None` when unknown or unreadable.
    fn masters_s(&self) -> Option<f64> {
        if self.masters.is_empty() {
            return None;
        }
        self.masters.iter().map(|&pid| cpu_s(pid).ok()).sum()
    }

    /// Reads every counter: the start (or the end) of a window.
    pub(crate) fn start(&self) -> CpuReading {
        CpuReading {
            masters: self.masters_s(),
            daemon: self.daemon.and_then(|pid| cpu_s(pid).ok()),
            client: cpu_s(self.client.unwrap_or_else(std::process::id)).unwrap_or(f64::NAN),
        }
    }

    /// The CPU used since `start`, per each of `units` units of work.
    pub(crate) fn per_unit(&self, start: &CpuReading, units: usize) -> CpuSplit {
        CpuMeter::between(start, &self.start(), units)
    }

    /// The CPU used from `start` to `end`, per each of `units` units of
    /// work: for a window whose units are counted after it closed.
    pub(crate) fn between(start: &CpuReading, end: &CpuReading, units: usize) -> CpuSplit {
        let per = |before: Option<f64>, now: Option<f64>| -> Option<f64> {
            let used = now? - before?;
            (units > 0 && used.is_finite()).then(|| used * 1e6 / units as f64)
        };
        CpuSplit {
            masters_us: per(start.masters, end.masters),
            daemon_us: per(start.daemon, end.daemon),
            client_us: per(Some(start.client), Some(end.client)),
        }
    }
}

impl CpuSplit {
    /// `"masters_cpu_us":..,"daemon_cpu_us":..,"client_cpu_us":..` for a JSON line
    /// (`null`: not measured).
    pub(crate) fn json_fields(&self) -> String {
        let f = |v: Option<f64>| v.map_or("null".to_owned(), |v| format!("{v:.1}"));
        format!(
            "\"masters_cpu_us\":{},\"daemon_cpu_us\":{},\"client_cpu_us\":{}",
            f(self.masters_us),
            f(self.daemon_us),
            f(self.client_us)
        )
    }

    /// "masters / daemon / client" in microseconds, for tables ("-": not measured).
    pub(crate) fn cell(&self) -> String {
        let f = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.0}"));
        format!(
            "{} / {} / {}",
            f(self.masters_us),
            f(self.daemon_us),
            f(self.client_us)
        )
    }
}
