//! Malformed requests get INVALID_ARGUMENT naming the field, and nothing
//! reaches the masters.

mod common;

use common::*;
use redlockd::pb;
use redlockd_testkit::masters::Flavor;
use tonic::Code;

against_both_servers!(every_invalid_case_is_rejected_before_the_masters);

const GOOD_TOKEN: &str = "0123456789abcdef0123456789abcdef";

fn acquire_req(
    resource: &str,
    ttl: Option<prost_types::Duration>,
    wait: Option<prost_types::Duration>,
) -> pb::AcquireRequest {
    pb::AcquireRequest {
        resource: resource.into(),
        ttl,
        wait,
        owner: String::new(),
        request_id: String::new(),
        ..Default::default()
    }
}

fn neg(seconds: i64, nanos: i32) -> Option<prost_types::Duration> {
    Some(prost_types::Duration { seconds, nanos })
}

/// Each case of the contract, with the field named in the message.
async fn every_invalid_case_is_rejected_before_the_masters(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut c = h.client().await;
    let mut before = Vec::new();
    for i in 0..5 {
        before.push(h.lock_commands(i).await);
    }

    let long = "x".repeat(513);
    let acquires = [
        ("resource", acquire_req("", ms(1_000), None)),
        ("resource", acquire_req(&long, ms(1_000), None)),
        ("resource", acquire_req("bad\u{7}name", ms(1_000), None)),
        ("ttl", acquire_req("r", None, None)),
        ("ttl", acquire_req("r", ms(9), None)),
        ("ttl", acquire_req("r", ms(3_600_001), None)),
        ("ttl", acquire_req("r", neg(-1, 0), None)),
        ("wait", acquire_req("r", ms(1_000), neg(-1, 0))),
        ("wait", acquire_req("r", ms(1_000), neg(0, -1))),
        ("wait", acquire_req("r", ms(1_000), ms(5 * 60_000 + 1))),
    ];
    for (field, request) in acquires {
        let status = c.acquire(request).await.expect_err("invalid");
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(
            status.message().starts_with(field),
            "{field}: {}",
            status.message()
        );
    }

    let extends = [
        (
            "token",
            pb::ExtendRequest {
                resource: "r".into(),
                token: String::new(),
                ttl: ms(1_000),
            },
        ),
        (
            "token",
            pb::ExtendRequest {
                resource: "r".into(),
                token: "not-a-token".into(),
                ttl: ms(1_000),
            },
        ),
        (
            "ttl",
            pb::ExtendRequest {
                resource: "r".into(),
                token: GOOD_TOKEN.into(),
                ttl: None,
            },
        ),
        (
            "ttl",
            pb::ExtendRequest {
                resource: "r".into(),
                token: GOOD_TOKEN.into(),
                ttl: ms(1),
            },
        ),
        (
            "resource",
            pb::ExtendRequest {
                resource: String::new(),
                token: GOOD_TOKEN.into(),
                ttl: ms(1_000),
            },
        ),
    ];
    for (field, request) in extends {
        let status = c.extend(request).await.expect_err("invalid");
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(
            status.message().starts_with(field),
            "{field}: {}",
            status.message()
        );
    }

    for (field, resource, token) in [
        ("token", "r", ""),
        ("token", "r", "ZZZZ56789abcdef0123456789abcdef0"),
        ("resource", "", GOOD_TOKEN),
        ("resource", long.as_str(), GOOD_TOKEN),
    ] {
        let status = c
            .release(pb::ReleaseRequest {
                resource: resource.into(),
                token: token.into(),
            })
            .await
            .expect_err("invalid");
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(
            status.message().starts_with(field),
            "{field}: {}",
            status.message()
        );
        let status = c
            .validate(pb::ValidateRequest {
                resource: resource.into(),
                token: token.into(),
            })
            .await
            .expect_err("invalid");
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    }

    for (i, count) in before.into_iter().enumerate() {
        assert_eq!(
            h.lock_commands(i).await,
            count,
            "master {i} received a lock command"
        );
    }
    // The counter does move for a valid request: the check above can fail.
    acquire(&mut c, "r", 1_000, 0).await.expect("valid");
    assert!(h.lock_commands(0).await > 0);
}
