//! W1's `redsync` and `etcd` modes: the same workload (C workers, each
//! acquiring and releasing a resource of its own, ttl 10 s, one warm-up
//! cycle each) run by `redlockd-peers w1` ([`crate::peers`]), whose samples
//! `crate::w1` makes the same report of as of the bench's own modes.

use crate::peers::{PeerRun, PeerTarget};
use crate::proc::{CpuMeter, CpuSplit};
use crate::BoxError;
use std::time::Duration;

/// What a peer's W1 run measured.
pub(crate) struct PeerCycles {
    /// Acquire latencies of completed cycles, unsorted.
    pub acquire: Vec<Duration>,
    /// Release latencies of completed cycles, unsorted.
    pub release: Vec<Duration>,
    /// The measured window.
    pub window: Duration,
    /// Cycles that failed.
    pub errors: u64,
    /// CPU per completed cycle over the window.
    pub cpu: CpuSplit,
}

/// One W1 run of a peer: `concurrency` workers for `duration`.
pub(crate) async fn run(
    target: &PeerTarget,
    mode: &str,
    concurrency: usize,
    duration: Duration,
    meter: &CpuMeter,
) -> Result<PeerCycles, BoxError> {
    let prefix = format!("bench/w1/{mode}/{concurrency}/{}", std::process::id());
    let extra = [
        format!("--concurrency={concurrency}"),
        format!("--prefix={prefix}"),
    ];
    let PeerRun {
        samples,
        start,
        end,
    } = target.run("w1", &extra, duration, meter).await?;
    let parsed = parse(&samples)?;
    Ok(PeerCycles {
        cpu: CpuMeter::between(&start, &end, parsed.acquire.len()),
        acquire: parsed.acquire,
        release: parsed.release,
        window: parsed.window,
        errors: parsed.errors,
    })
}

/// What `redlockd-peers w1` printed after its window.
#[derive(Debug, Default, PartialEq)]
struct Parsed {
    acquire: Vec<Duration>,
    release: Vec<Duration>,
    window: Duration,
    errors: u64,
}

/// `cycle ACQUIRE_NS RELEASE_NS` per completed cycle, then `window NS
/// ERRORS`; the JSON line (the process's own figures) is skipped.
fn parse(samples: &[String]) -> Result<Parsed, BoxError> {
    let mut parsed = Parsed::default();
    let mut window = false;
    for line in samples {
        let mut fields = line.split_whitespace();
        let tag = fields.next();
        let mut next = || -> Result<u64, BoxError> {
            let field = fields
                .next()
                .ok_or_else(|| format!("short line {line:?}"))?;
            Ok(field.parse()?)
        };
        match tag {
            Some("cycle") => {
                parsed.acquire.push(Duration::from_nanos(next()?));
                parsed.release.push(Duration::from_nanos(next()?));
            }
            Some("window") => {
                parsed.window = Duration::from_nanos(next()?);
                parsed.errors = next()?;
                window = true;
            }
            Some(word) if word.starts_with('{') => {}
            _ => return Err(format!("redlockd-peers w1: unexpected line {line:?}").into()),
        }
    }
    match window {
        true => Ok(parsed),
        false => Err("redlockd-peers w1 printed no window line".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    /// Cycles and the window are read; the JSON line is skipped.
    #[test]
    fn reads_cycles_and_the_window() {
        let parsed = parse(&lines(
            "cycle 1000 2000\ncycle 3000 4000\nwindow 10000000000 3\n{\"workload\":\"W1\"}",
        ))
        .expect("parses");
        assert_eq!(parsed.acquire, [1000, 3000].map(Duration::from_nanos));
        assert_eq!(parsed.release, [2000, 4000].map(Duration::from_nanos));
        assert_eq!(parsed.window, Duration::from_secs(10));
        assert_eq!(parsed.errors, 3);
    }

    /// A short or unknown line, or no window, is an error, not a figure.
    #[test]
    fn rejects_what_it_does_not_know() {
        for text in [
            "cycle 1000\nwindow 1 0",
            "cycles 1 2\nwindow 1 0",
            "cycle 1 2",
            "cycle -1 2\nwindow 1 0",
        ] {
            assert!(parse(&lines(text)).is_err(), "{text:?}");
        }
    }
}
