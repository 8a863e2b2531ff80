//! Unit and property tests of the horizon arithmetic (`super`).

use super::*;
use proptest::prelude::*;

const MS: fn(u64) -> Duration = Duration::from_millis;
const DF: f64 = 0.01;
const HOUR: Duration = Duration::from_secs(3600);

fn census(candidates: usize) -> Census {
    Census {
        masters: 5,
        quorum: 3,
        candidates,
    }
}

fn reading(horizon: Horizon, received: Instant, trusted: bool) -> Reading {
    Reading {
        horizon,
        received,
        trusted,
    }
}

/// N - Q + 1 for the usual sizes.
#[test]
fn trusted_answers_needed() {
    assert_eq!(trusted_needed(5, 3), 3);
    assert_eq!(trusted_needed(3, 2), 2);
    assert_eq!(trusted_needed(4, 3), 2);
    assert_eq!(trusted_needed(1, 1), 1);
    assert_eq!(trusted_needed(7, 4), 4);
}

/// PTTL replies.
#[test]
fn pttl_replies() {
    assert_eq!(Horizon::from_pttl(-2), Horizon::Absent);
    assert_eq!(Horizon::from_pttl(-1), Horizon::Persistent);
    assert_eq!(Horizon::from_pttl(0), Horizon::Remaining(MS(0)));
    assert_eq!(Horizon::from_pttl(4_000), Horizon::Remaining(MS(4_000)));
}

/// A new cluster: every other master answers, none has a horizon, the
/// daemon granted nothing: no quarantine, even with nobody trusted yet.
#[test]
fn new_cluster_is_not_quarantined() {
    let now = Instant::now();
    let readings = [reading(Horizon::Absent, now, false); 4];
    assert_eq!(
        settle(&readings, census(4), None, DF, HOUR, now),
        Verdict::Settled { until: None }
    );
}

/// A 4 s horizon: the quarantine is 4 s plus 45 ms of margin, not an hour.
#[test]
fn quarantine_is_the_horizon_plus_margin() {
    let now = Instant::now();
    let readings = [
        reading(Horizon::Remaining(MS(4_000)), now, true),
        reading(Horizon::Remaining(MS(1_000)), now, true),
        reading(Horizon::Absent, now, true),
    ];
    let until = match settle(&readings, census(4), None, DF, HOUR, now) {
        Verdict::Settled { until: Some(until) } => until,
        other => panic!("{other:?}"),
    };
    let length = until - now;
    assert!(length >= MS(4_045) && length <= MS(4_046), "{length:?}");
}

/// Too few answers, or too few trusted ones while some are missing:
/// unsettled (the blanket bound stays).
#[test]
fn too_few_answers_keep_the_blanket() {
    let now = Instant::now();
    let two = [reading(Horizon::Absent, now, true); 2];
    assert_eq!(
        settle(&two, census(4), None, DF, HOUR, now),
        Verdict::Unsettled
    );
    let three_untrusted = [reading(Horizon::Absent, now, false); 3];
    assert_eq!(
        settle(&three_untrusted, census(4), None, DF, HOUR, now),
        Verdict::Unsettled
    );
    // The same three are every candidate when the fourth is refused.
    assert_eq!(
        settle(&three_untrusted, census(3), None, DF, HOUR, now),
        Verdict::Settled { until: None }
    );
}

/// The daemon's own grants count even when no master remembers them;
/// a horizon without expiry counts as max_ttl.
#[test]
fn local_grants_and_persistent_horizons() {
    let now = Instant::now();
    let readings = [reading(Horizon::Absent, now, true); 4];
    let local = Some(now + MS(2_000));
    match settle(&readings, census(4), local, DF, HOUR, now) {
        Verdict::Settled { until: Some(until) } => assert!(until - now >= MS(2_000)),
        other => panic!("{other:?}"),
    }
    let past = Some(now - MS(1));
    assert_eq!(
        settle(&readings, census(4), past, DF, HOUR, now),
        Verdict::Settled { until: None }
    );
    let stuck = [reading(Horizon::Persistent, now, true); 3];
    match settle(&stuck, census(4), None, DF, HOUR, now) {
        Verdict::Settled { until: Some(until) } => assert!(until - now >= HOUR),
        other => panic!("{other:?}"),
    }
}

/// The local horizon keeps the latest end, rounded up.
#[tokio::test(start_paused = true)]
async fn local_horizon_keeps_the_latest() {
    let local = LocalHorizon::new(Duration::ZERO);
    assert_eq!(local.latest(), None);
    let start = Instant::now();
    local.record(MS(3_000));
    local.record(MS(1_000));
    let first = local.latest().expect("recorded");
    assert!(first >= start + MS(3_000) && first <= start + MS(3_001));
    tokio::time::advance(MS(2_500)).await;
    local.record(MS(1_000));
    let second = local.latest().expect("recorded");
    assert!(second >= start + MS(3_500), "{:?}", second - start);
}

/// One lock of the model: where its writes landed and until when its
/// holder believes in it (ms from now).
#[derive(Debug, Clone)]
struct Lock {
    quorum: Vec<usize>,
    /// Masters outside the quorum that also got the horizon raise.
    also: Vec<usize>,
    believed_ms: u64,
    ours: bool,
}

/// A master other than the restarted one (index 0), as the model sees it.
#[derive(Debug, Clone, Copy)]
struct Other {
    answers: bool,
    /// Lost its data after the locks were written (then it is not
    /// trusted: its own quarantine would outlast the locks).
    lost: bool,
    trusted: bool,
    /// Its clock's rate relative to ours, within the drift factor.
    rate: f64,
    /// An unrelated longer horizon it holds (ms), if any.
    extra_ms: Option<u64>,
}

fn world() -> impl Strategy<Value = (usize, Vec<Other>, Vec<Lock>)> {
    (1usize..=7).prop_flat_map(|n| {
        let quorum = n / 2 + 1;
        let other = (
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            (1.0 - DF)..=(1.0 + DF),
            proptest::option::of(0u64..20_000),
        )
            .prop_map(|(answers, lost, trusted, rate, extra_ms)| Other {
                answers,
                lost,
                trusted: trusted && !lost,
                rate,
                extra_ms,
            });
        let lock = (
            proptest::sample::subsequence((1..n).collect::<Vec<_>>(), quorum - 1..=n - 1),
            proptest::sample::subsequence((1..n).collect::<Vec<_>>(), 0..=n - 1),
            1u64..30_000,
            proptest::bool::weighted(0.2),
        )
            .prop_map(|(mut quorum, also, believed_ms, ours)| {
                // Every lock at risk was granted with the restarted master.
                quorum.push(0);
                Lock {
                    quorum,
                    also,
                    believed_ms,
                    ours,
                }
            });
        (
            Just(n),
            proptest::collection::vec(other, n - 1),
            proptest::collection::vec(lock, 0..4),
        )
    })
}

proptest! {
    /// Soundness: whenever the readings settle a quarantine, it lasts
    /// until every lock the restarted master may have lost is no
    /// longer believed in, unless every master that recorded the lock
    /// lost it too and this daemon did not grant it (the documented
    /// residual case). Clocks run within the drift factor of ours.
    #[test]
    fn a_settled_quarantine_outlasts_every_lock_at_risk(
        (n, others, locks) in world(),
        answer_ms in 0u64..50,
    ) {
        let now = Instant::now();
        let quorum = n / 2 + 1;
        let received = now + MS(answer_ms);
        let mut readings = Vec::new();
        for (i, other) in others.iter().enumerate() {
            let master = i + 1;
            if !other.answers {
                continue;
            }
            // Key expiry on this master, in our time: H says the key
            // outlives the belief; its clock counts `rate` times ours.
            let kept = locks
                .iter()
                .filter(|l| !other.lost && (l.quorum.contains(&master) || l.also.contains(&master)))
                .map(|l| l.believed_ms)
                .chain(other.extra_ms)
                .max();
            let horizon = match kept {
                None => Horizon::Absent,
                Some(ms) => {
                    let left = ms.saturating_sub(answer_ms) as f64 * other.rate;
                    if left <= 0.0 { Horizon::Absent } else { Horizon::Remaining(MS(left as u64)) }
                }
            };
            readings.push(reading(horizon, received, other.trusted));
        }
        let local = locks.iter().filter(|l| l.ours).map(|l| now + MS(l.believed_ms)).max();
        let census = Census { masters: n, quorum, candidates: n - 1 };
        if let Verdict::Settled { until } = settle(&readings, census, local, DF, HOUR, received) {
            for lock in &locks {
                let remembered = lock.ours
                    || lock.quorum.iter().chain(&lock.also)
                        .any(|m| *m != 0 && !others[*m - 1].lost);
                let believed_until = now + MS(lock.believed_ms);
                if remembered && believed_until > received {
                    prop_assert!(
                        until.is_some_and(|u| u >= believed_until),
                        "lock {lock:?} believed until +{:?}, quarantine until {:?}",
                        believed_until - now, until.map(|u| u - now)
                    );
                }
            }
        }
    }

    /// More answers never shorten a settled quarantine, and never turn
    /// a settled one unsettled.
    #[test]
    fn more_answers_never_shorten(
        horizons in proptest::collection::vec((proptest::option::of(0u64..10_000), any::<bool>()), 1..7),
        extra in proptest::option::of(0u64..10_000),
        extra_trusted in any::<bool>(),
    ) {
        let now = Instant::now();
        let to_reading = |(ms, trusted): (Option<u64>, bool)| reading(
            ms.map_or(Horizon::Absent, |ms| Horizon::Remaining(MS(ms))), now, trusted);
        let readings: Vec<Reading> = horizons.iter().copied().map(to_reading).collect();
        let census = Census { masters: 7, quorum: 4, candidates: 6 };
        let before = settle(&readings, census, None, DF, HOUR, now);
        let mut more = readings.clone();
        more.push(to_reading((extra, extra_trusted)));
        let after = settle(&more, census, None, DF, HOUR, now);
        match (before, after) {
            (Verdict::Settled { until: a }, Verdict::Settled { until: b }) => prop_assert!(b >= a),
            (Verdict::Settled { .. }, Verdict::Unsettled) => prop_assert!(false, "unsettled by more answers"),
            _ => {}
        }
    }

    /// The quarantine is never shorter than the longest horizon read,
    /// and never longer than it by more than the margin.
    #[test]
    fn length_is_horizon_plus_margin(
        horizons in proptest::collection::vec(0u64..3_600_000, 1..5),
        df in 0.0f64..0.5,
    ) {
        let now = Instant::now();
        let readings: Vec<Reading> = horizons.iter()
            .map(|ms| reading(Horizon::Remaining(MS(*ms)), now, true)).collect();
        let census = Census { masters: 5, quorum: 3, candidates: readings.len() };
        let longest = MS(*horizons.iter().max().expect("one"));
        match settle(&readings, census, None, df, HOUR, now) {
            Verdict::Settled { until: Some(until) } => {
                let length = until - now;
                prop_assert!(length >= longest + MARGIN_FLOOR);
                // p / (1 - df) of our time, within a millisecond of rounding.
                let bound = longest.as_secs_f64() / (1.0 - df) + 0.006;
                prop_assert!(length.as_secs_f64() <= bound, "{length:?} > {bound}");
            }
            other => prop_assert!(false, "{other:?}"),
        }
    }
}
