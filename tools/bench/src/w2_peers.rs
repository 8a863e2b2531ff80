//! W2 against the peers: `redlockd-peers w2` runs the contenders (each with
//! a client of its own, releasing as soon as granted; redsync retrying at
//! its defaults, 32 tries 50 to 250 ms apart, etcd blocking in `Lock`) and
//! prints every grant on its own clock; `crate::w2` makes the same
//! figures of them as of its own runs.

use crate::peers::{PeerRun, PeerTarget};
use crate::proc::{CpuMeter, CpuSplit};
use crate::w2_log::{ContenderLog, Grant};
use crate::BoxError;
use std::time::Duration;

/// What a peer's W2 run saw.
pub(crate) struct PeerGrants {
    /// One log per contender.
    pub logs: Vec<ContenderLog>,
    /// One uncontended acquisition per contender, timed before the window.
    pub free: Vec<Duration>,
    /// CPU per grant over the window.
    pub cpu: CpuSplit,
}

/// One W2 run of a peer: `contenders` on one resource for `duration`.
pub(crate) async fn run(
    target: &PeerTarget,
    mode: &str,
    contenders: usize,
    duration: Duration,
    meter: &CpuMeter,
) -> Result<PeerGrants, BoxError> {
    let prefix = format!("bench/w2/{mode}/{}", std::process::id());
    let extra = [
        format!("--contenders={contenders}"),
        format!("--prefix={prefix}"),
    ];
    let PeerRun {
        samples,
        start,
        end,
    } = target.run("w2", &extra, duration, meter).await?;
    let (logs, free) = parse(&samples, contenders)?;
    let grants = logs.iter().map(|log| log.grants.len()).sum();
    let cpu = CpuMeter::between(&start, &end, grants);
    Ok(PeerGrants { logs, free, cpu })
}

/// `free NS` per contender (an uncontended acquisition before the
/// window), `grant ID ACQUIRE_SENT GRANTED RELEASE_SENT RELEASE_DONE` (ns
/// on the run's clock; RELEASE_DONE -1: the release failed), `contender ID
/// ERRORS NOT_HELD CUT_WAIT` (-1: not cut); the JSON line is skipped.
fn parse(
    samples: &[String],
    contenders: usize,
) -> Result<(Vec<ContenderLog>, Vec<Duration>), BoxError> {
    let mut logs: Vec<ContenderLog> = (0..contenders).map(|_| ContenderLog::default()).collect();
    let mut free = Vec::new();
    for line in samples {
        let mut fields = line.split_whitespace();
        let tag = fields.next();
        let mut next = || -> Result<i64, BoxError> {
            let field = fields
                .next()
                .ok_or_else(|| format!("short line {line:?}"))?;
            Ok(field.parse()?)
        };
        // A time on the run's clock, or -1 for none.
        let time = |ns: i64| -> Result<Option<Duration>, BoxError> {
            match ns {
                -1 => Ok(None),
                ns => Ok(Some(Duration::from_nanos(u64::try_from(ns)?))),
            }
        };
        let required = |ns: i64| -> Result<Duration, BoxError> {
            time(ns)?.ok_or_else(|| format!("no time in {line:?}").into())
        };
        match tag {
            Some("free") => free.push(required(next()?)?),
            Some("grant") => {
                let id = usize::try_from(next()?)?;
                let grant = Grant {
                    contender: id,
                    acquire_sent: required(next()?)?,
                    granted: required(next()?)?,
                    release_sent: required(next()?)?,
                    release_done: time(next()?)?,
                };
                let log = logs
                    .get_mut(id)
                    .ok_or_else(|| format!("no contender {id}"))?;
                log.grants.push(grant);
            }
            Some("contender") => {
                let id = usize::try_from(next()?)?;
                let (errors, not_held) = (u64::try_from(next()?)?, u64::try_from(next()?)?);
                let cut_wait = time(next()?)?;
                let log = logs
                    .get_mut(id)
                    .ok_or_else(|| format!("no contender {id}"))?;
                (log.errors, log.not_held, log.cut_wait) = (errors, not_held, cut_wait);
            }
            Some(word) if word.starts_with('{') => {}
            _ => return Err(format!("redlockd-peers w2: unexpected line {line:?}").into()),
        }
    }
    Ok((logs, free))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    /// Grants go to their contender's log, in order; a contender without
    /// grants still has its log (its zero is the minimum); -1 is "none".
    #[test]
    fn reads_grants_by_contender() {
        let (logs, free) = parse(
            &lines(
                "free 500\nfree 700\ngrant 1 0 10 20 30\ngrant 1 40 50 60 -1\n\
                 contender 0 2 0 90\ncontender 1 0 1 -1\n{\"workload\":\"W2\"}",
            ),
            3,
        )
        .expect("parses");
        assert_eq!(free, [500, 700].map(Duration::from_nanos));
        assert_eq!(logs.len(), 3);
        assert_eq!(logs[0].grants.len(), 0);
        assert_eq!(
            (logs[0].errors, logs[0].cut_wait),
            (2, Some(Duration::from_nanos(90)))
        );
        let grants = &logs[1].grants;
        assert_eq!(grants.len(), 2);
        assert_eq!(grants[0].granted, Duration::from_nanos(10));
        assert_eq!(grants[0].release_done, Some(Duration::from_nanos(30)));
        assert_eq!(grants[1].release_done, None);
        assert_eq!((logs[1].not_held, logs[1].cut_wait), (1, None));
    }

    /// A contender out of range, a short line or a missing time is an error.
    #[test]
    fn rejects_what_it_does_not_know() {
        for text in [
            "grant 5 0 1 2 3",
            "grant 0 0 1 2",
            "grant 0 -1 1 2 3",
            "free",
            "held 1",
        ] {
            assert!(parse(&lines(text), 2).is_err(), "{text:?}");
        }
    }
}
