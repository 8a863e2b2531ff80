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
