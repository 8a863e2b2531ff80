//! Durations between `std` and the contract's `google.protobuf.Duration`.

use std::time::Duration;

/// `d` as a protobuf duration (saturating: no lock lives 292 billion years).
pub(crate) fn proto_duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration::try_from(d).unwrap_or(prost_types::Duration {
        seconds: i64::MAX,
        nanos: 999_999_999,
    })
}

/// `d` as an optional protobuf duration: absent when zero (the contract's
/// "absent or zero" fields).
pub(crate) fn optional_duration(d: Duration) -> Option<prost_types::Duration> {
    (!d.is_zero()).then(|| proto_duration(d))
}

/// A `std` duration from the daemon's (zero when absent or negative).
pub(crate) fn std_duration(d: Option<prost_types::Duration>) -> Duration {
    d.and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Round trips, saturation, absent and negative values.
    #[test]
    fn conversions() {
        let d = Duration::from_millis(1_500);
        assert_eq!(std_duration(Some(proto_duration(d))), d);
        assert_eq!(proto_duration(Duration::MAX).seconds, i64::MAX);
        assert_eq!(optional_duration(Duration::ZERO), None);
        assert_eq!(std_duration(None), Duration::ZERO);
        let negative = prost_types::Duration {
            seconds: -1,
            nanos: 0,
        };
        assert_eq!(std_duration(Some(negative)), Duration::ZERO);
    }
}
