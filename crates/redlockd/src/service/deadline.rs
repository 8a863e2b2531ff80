//! The caller's gRPC deadline, read from the `grpc-timeout` header, so that an
//! acquisition stops trying before the caller stops listening.

use std::time::Duration;
use tokio::time::Instant;
use tonic::metadata::MetadataMap;

/// When the caller's deadline passes, if it sent one.
pub(crate) fn caller_deadline(metadata: &MetadataMap) -> Option<Instant> {
    let header = metadata.get("grpc-timeout")?.to_str().ok()?;
    parse_timeout(header).map(|timeout| Instant::now() + timeout)
}

/// The part of a caller's deadline, `budget` from now, kept back for the
/// answer's trip (see `service::LockApi::acquire_until`): `server.deadline_reserve`,
/// or a quarter of the budget when that is less. A caller with a 10 ms
/// deadline (a sidecar on loopback answers in about a millisecond) is
/// tried for 7.5 ms rather than refused; if its round trip to the daemon
/// is longer than the 2.5 ms kept back, a grant can reach it too late and
/// stays locked for its ttl, as with any reserve shorter than the round
/// trip.
pub(crate) fn reserve_for(configured: Duration, budget: Duration) -> Duration {
    configured.min(budget / 4)
}

/// Parses a `grpc-timeout` value: up to 8 digits and a unit (H M S m u n).
fn parse_timeout(value: &str) -> Option<Duration> {
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let amount: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount * 3600),
        "M" => Duration::from_secs(amount * 60),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every unit of the gRPC spec, and malformed values ignored.
    #[test]
    fn units() {
        assert_eq!(parse_timeout("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(parse_timeout("3M"), Some(Duration::from_secs(180)));
        assert_eq!(parse_timeout("5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(parse_timeout("7u"), Some(Duration::from_micros(7)));
        assert_eq!(parse_timeout("9n"), Some(Duration::from_nanos(9)));
        assert_eq!(parse_timeout("123456789S"), None);
        assert_eq!(parse_timeout("S"), None);
        assert_eq!(parse_timeout(""), None);
        assert_eq!(parse_timeout("1x"), None);
        assert_eq!(parse_timeout("-1S"), None);
    }
}
