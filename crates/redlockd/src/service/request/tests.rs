//! The rules of each request field, each refusal naming its field.

use super::*;

/// The bounds the tests check against (also `multi.rs`'s tests).
pub(super) fn limits() -> RequestBounds {
    RequestBounds {
        min_ttl: Duration::from_millis(10),
        max_ttl: Duration::from_secs(3600),
        max_wait: Duration::from_secs(300),
        max_resource_len: 8,
        max_semaphore_limit: 4,
        max_resources_per_lock: 3,
        max_lock_delay: Duration::from_secs(60),
        max_hold_at_least: Duration::from_secs(3600),
    }
}

fn secs(seconds: i64, nanos: i32) -> Option<prost_types::Duration> {
    Some(prost_types::Duration { seconds, nanos })
}

fn acquire(
    resource: &str,
    ttl: Option<prost_types::Duration>,
    wait: Option<prost_types::Duration>,
) -> Result<AcquireArgs, InvalidRequest> {
    limits().acquire(pb::AcquireRequest {
        resource: resource.into(),
        ttl,
        wait,
        owner: String::new(),
        request_id: String::new(),
        lock_delay: None,
        hold_at_least: None,
        mode: 0,
        limit: 0,
        resources: Vec::new(),
    })
}

/// `limit` over the maximum, or with a request id, is refused naming
/// the field; up to the maximum it passes through.
#[test]
fn semaphore_limit() {
    let with = |limit: u32, request_id: &str| {
        limits().acquire(pb::AcquireRequest {
            resource: "r".into(),
            ttl: secs(1, 0),
            limit,
            request_id: request_id.into(),
            ..Default::default()
        })
    };
    assert_eq!(with(4, "").map(|a| a.limit), Ok(4));
    assert_eq!(with(0, "").map(|a| a.limit), Ok(0));
    assert_eq!(
        with(5, "").map(|a| a.limit).map_err(|e| e.field),
        Err("limit")
    );
    let id = "A".repeat(22);
    assert_eq!(with(1, &id).map(|a| a.limit), Ok(1));
    assert_eq!(
        with(2, &id).map(|a| a.limit).map_err(|e| e.field),
        Err("request_id")
    );
    let on_several = |limit: u32| {
        limits().acquire(pb::AcquireRequest {
            resources: vec!["a".into(), "b".into()],
            ttl: secs(1, 0),
            limit,
            ..Default::default()
        })
    };
    assert!(on_several(1).is_ok(), "limit 1 is a plain lock");
    assert_eq!(field_of(on_several(2)), "limit");
}

fn with_terms(
    lock_delay: Option<prost_types::Duration>,
    hold_at_least: Option<prost_types::Duration>,
) -> Result<AcquireArgs, InvalidRequest> {
    limits().acquire(pb::AcquireRequest {
        resource: "r".into(),
        ttl: secs(1, 0),
        lock_delay,
        hold_at_least,
        ..Default::default()
    })
}

/// mode: absent is EXCLUSIVE, SHARED is shared, an unknown value or
/// SHARED with lock terms is refused naming `mode`.
#[test]
fn lock_mode() {
    let with_mode = |mode: i32, lock_delay| {
        limits().acquire(pb::AcquireRequest {
            resource: "r".into(),
            ttl: secs(1, 0),
            mode,
            lock_delay,
            ..Default::default()
        })
    };
    assert!(!with_mode(0, None).expect("exclusive").shared);
    assert!(
        with_mode(pb::LockMode::Shared as i32, None)
            .expect("shared")
            .shared
    );
    assert!(
        with_mode(pb::LockMode::Shared as i32, secs(0, 0))
            .expect("zero")
            .shared
    );
    assert_eq!(field_of(with_mode(2, None)), "mode");
    assert_eq!(field_of(with_mode(-1, None)), "mode");
    assert_eq!(field_of(with_mode(1, secs(1, 0))), "mode");
    assert!(!with_mode(0, secs(1, 0)).expect("terms are fine").shared);
    let semaphore = limits().acquire(pb::AcquireRequest {
        resource: "r".into(),
        ttl: secs(1, 0),
        mode: pb::LockMode::Shared as i32,
        limit: 2,
        ..Default::default()
    });
    assert_eq!(field_of(semaphore), "mode");
}

/// lock_delay and hold_at_least: absent is zero, bounds are inclusive,
/// negative or over the maximum is refused naming the field.
#[test]
fn lock_terms() {
    let ok = with_terms(None, None).expect("absent is fine");
    assert_eq!(
        (ok.lock_delay, ok.hold_at_least),
        (Duration::ZERO, Duration::ZERO)
    );
    let ok = with_terms(secs(60, 0), secs(3600, 0)).expect("at the maxima");
    assert_eq!(ok.lock_delay, Duration::from_secs(60));
    assert_eq!(ok.hold_at_least, Duration::from_secs(3600));
    assert_eq!(field_of(with_terms(secs(-1, 0), None)), "lock_delay");
    assert_eq!(field_of(with_terms(secs(0, -1), None)), "lock_delay");
    assert_eq!(field_of(with_terms(secs(60, 1), None)), "lock_delay");
    assert_eq!(field_of(with_terms(None, secs(-5, 0))), "hold_at_least");
    assert_eq!(field_of(with_terms(None, secs(3601, 0))), "hold_at_least");
}

fn field_of<T: std::fmt::Debug>(result: Result<T, InvalidRequest>) -> &'static str {
    result.expect_err("must be rejected").field
}

/// Each rule names its field.
#[test]
fn acquire_rules_name_their_field() {
    assert!(acquire("r", secs(1, 0), None).is_ok());
    assert_eq!(field_of(acquire("", secs(1, 0), None)), "resource");
    assert_eq!(field_of(acquire("123456789", secs(1, 0), None)), "resource");
    assert_eq!(field_of(acquire("a\nb", secs(1, 0), None)), "resource");
    assert_eq!(field_of(acquire("r", None, None)), "ttl");
    assert_eq!(field_of(acquire("r", secs(0, 9_000_000), None)), "ttl");
    assert_eq!(field_of(acquire("r", secs(3601, 0), None)), "ttl");
    assert_eq!(field_of(acquire("r", secs(-1, 0), None)), "ttl");
    assert_eq!(field_of(acquire("r", secs(1, 0), secs(-1, 0))), "wait");
    assert_eq!(field_of(acquire("r", secs(1, 0), secs(0, -5))), "wait");
    assert_eq!(field_of(acquire("r", secs(1, 0), secs(301, 0))), "wait");
}

/// Bounds are inclusive; the byte length, not the char count, is limited.
#[test]
fn bounds_are_inclusive() {
    assert!(acquire("12345678", secs(0, 10_000_000), secs(300, 0)).is_ok());
    assert!(acquire("r", secs(3600, 0), secs(0, 0)).is_ok());
    assert_eq!(field_of(acquire("ééééé", secs(1, 0), None)), "resource");
}

/// Tokens are checked for shape before any master is asked.
#[test]
fn token_shape() {
    let ok = "0123456789abcdef0123456789abcdef";
    assert!(limits().lock_ref("r".into(), ok).is_ok());
    assert_eq!(field_of(limits().lock_ref("r".into(), "")), "token");
    assert_eq!(field_of(limits().lock_ref("r".into(), "nope")), "token");
    assert_eq!(field_of(limits().lock_ref(String::new(), ok)), "resource");
}
