//! `LockAdmin` against five real masters: Inspect before, during
//! and after a hold with the owner round-tripping; List paging over a few
//! thousand locks; ForceRelease of a unary lock and of a Hold session (which
//! gets `lost`); the admin role under authentication; bad input named.

mod common;

use common::*;
use redlockd::config::{ClientConfig, Config};
use redlockd::pb;
use redlockd::pb::hold_event::Event;
use redlockd::pb::lock_admin_service_client::LockAdminServiceClient;
use redlockd::service::token_sha256;
use redlockd_testkit::masters::Flavor;
use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime};
use tonic::transport::Channel;
use tonic::{Code, Request};

against_both_servers!(inspect_before_during_after, force_release_unary_and_session,);

async fn admin_of(h: &Harness) -> LockAdminServiceClient<Channel> {
    LockAdminServiceClient::connect(format!("http://{}", h.daemons[0].addr))
        .await
        .expect("connect")
}

async fn inspect(
    admin: &mut LockAdminServiceClient<Channel>,
    resource: &str,
) -> pb::InspectResponse {
    admin
        .inspect(pb::InspectRequest {
            resource: resource.into(),
            ..Default::default()
        })
        .await
        .expect("Inspect")
        .into_inner()
}

fn acquire_as(resource: &str, owner: &str, ttl_ms: u64) -> pb::AcquireRequest {
    pb::AcquireRequest {
        resource: resource.into(),
        ttl: ms(ttl_ms),
        owner: owner.into(),
        ..Default::default()
    }
}

/// Not held, then held (owner, fence, time of grant, remaining validity,
/// unary; then a Hold session with its replica), then not held again.
async fn inspect_before_during_after(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut c = h.client().await;
    let mut admin = admin_of(&h).await;

    let before = inspect(&mut admin, "billing/close-month").await;
    assert!(!before.held && before.lock.is_none(), "{before:?}");

    let asked = SystemTime::now();
    let lock = c
        .acquire(acquire_as(
            "billing/close-month",
            "cron@host-7 pid 42",
            30_000,
        ))
        .await
        .expect("Acquire")
        .into_inner()
        .lock
        .expect("lock");
    let during = inspect(&mut admin, "billing/close-month").await;
    let info = during.lock.expect("held: a lock");
    assert!(during.held);
    assert_eq!(info.resource, "billing/close-month");
    assert_eq!(info.owner, "cron@host-7 pid 42", "owner round-trips");
    assert_eq!(info.fence, lock.fence);
    assert_eq!(info.session_kind(), pb::SessionKind::Unary);
    assert!(info.replica.is_empty());
    let remaining = std_duration(info.remaining);
    assert!(
        remaining > Duration::ZERO && remaining <= Duration::from_secs(30),
        "{remaining:?}"
    );
    let at = SystemTime::try_from(info.acquired_at.expect("acquired_at")).expect("timestamp");
    // The masters' clock and ours are the same host's.
    let skew = at.duration_since(asked).unwrap_or_else(|e| e.duration());
    assert!(
        skew < Duration::from_secs(5),
        "acquired_at {at:?} vs asked {asked:?}"
    );
    assert!(
        !format!("{info:?}").contains(&lock.token),
        "the token is never shown"
    );

    assert!(release(&mut c, &lock).await.expect("Release"));
    let after = inspect(&mut admin, "billing/close-month").await;
    assert!(!after.held, "{after:?}");

    let (requests, _events, session) = hold(&mut c, "billing/session", 10_000, 0).await;
    let info = inspect(&mut admin, "billing/session")
        .await
        .lock
        .expect("held");
    assert_eq!(info.session_kind(), pb::SessionKind::Hold);
    assert_eq!(info.owner, "test");
    assert_eq!(info.fence, session.fence);
    assert!(
        info.replica.contains(&std::process::id().to_string()),
        "{}",
        info.replica
    );
    drop(requests);
}

/// ForceRelease of a unary lock frees it for others at once; of a Hold
/// session, the session is told `lost` ("released by an operator"); of a
/// free resource, was_held = false.
async fn force_release_unary_and_session(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut c = h.client().await;
    let mut admin = admin_of(&h).await;

    let lock = c
        .acquire(acquire_as("jobs/stuck", "stuck-worker", 60_000))
        .await
        .expect("Acquire")
        .into_inner()
        .lock
        .expect("lock");
    let forced = admin
        .force_release(pb::ForceReleaseRequest {
            resource: "jobs/stuck".into(),
            ..Default::default()
        })
        .await
        .expect("ForceRelease")
        .into_inner();
    assert!(forced.was_held);
    assert_eq!(
        forced.lock.expect("the released lock").owner,
        "stuck-worker"
    );
    assert!(!validate(&mut c, &lock).await.expect("Validate").held);
    let next = acquire(&mut c, "jobs/stuck", 5_000, 0)
        .await
        .expect("free at once");
    assert!(next.fence > lock.fence);
    release(&mut c, &next).await.expect("Release");
    let again = admin
        .force_release(pb::ForceReleaseRequest {
            resource: "jobs/stuck".into(),
            ..Default::default()
        })
        .await
        .expect("ForceRelease")
        .into_inner();
    assert!(!again.was_held && again.lock.is_none());

    let (_requests, mut events, _) = hold(&mut c, "jobs/session", 60_000, 0).await;
    let forced = admin
        .force_release(pb::ForceReleaseRequest {
            resource: "jobs/session".into(),
            ..Default::default()
        })
        .await
        .expect("ForceRelease")
        .into_inner();
    assert!(forced.was_held);
    let event = tokio::time::timeout(Duration::from_secs(10), events.message())
        .await
        .expect("an event within 10 s")
        .expect("stream ok")
        .and_then(|e| e.event);
    assert_eq!(
        event,
        Some(Event::Lost(pb::hold_event::Lost {
            reason: "released by an operator".into()
        }))
    );
    acquire(&mut c, "jobs/session", 5_000, 0)
        .await
        .expect("free after the force-release");
}

/// List pages through 2,000 held locks under a prefix: every one exactly
/// once, none outside the prefix, each page's work bounded (its time is
/// printed; the bound asserted is generous, for a starved machine).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_pages_over_thousands() {
    const LOCKS: usize = 2_000;
    let h = Harness::start(Flavor::Valkey).await;
    let mut admin = admin_of(&h).await;
    let started = Instant::now();
    let mut expected = BTreeSet::new();
    let mut c = h.client().await;
    for chunk in (0..LOCKS).collect::<Vec<_>>().chunks(50) {
        let calls = chunk.iter().map(|i| {
            let mut c = c.clone();
            let resource = format!("tenant/a/{i:05}");
            async move {
                // A wait rides out rounds lost to a starved machine.
                let request = pb::AcquireRequest {
                    wait: ms(30_000),
                    ..acquire_as(&resource, "lister", 300_000)
                };
                c.acquire(request).await.expect("Acquire");
                resource
            }
        });
        expected.extend(futures::future::join_all(calls).await);
    }
    acquire(&mut c, "tenant/b/other", 300_000, 0)
        .await
        .expect("Acquire");
    println!("acquired {LOCKS} locks in {:?}", started.elapsed());

    let mut seen = BTreeSet::new();
    let mut token = String::new();
    let (mut pages, mut slowest) = (0, Duration::ZERO);
    loop {
        let asked = Instant::now();
        let page = admin
            .list(pb::ListRequest {
                prefix: "tenant/a/".into(),
                page_size: 200,
                page_token: token.clone(),
            })
            .await
            .expect("List")
            .into_inner();
        slowest = slowest.max(asked.elapsed());
        pages += 1;
        assert!(pages < 500, "the listing ends");
        for lock in page.locks {
            assert_eq!(lock.owner, "lister");
            assert!(
                seen.insert(lock.resource.clone()),
                "{} listed twice",
                lock.resource
            );
        }
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    println!(
        "listed {} locks in {pages} pages; slowest page {slowest:?}",
        seen.len()
    );
    assert_eq!(seen, expected);
    assert!(
        slowest < Duration::from_secs(10),
        "slowest page {slowest:?}"
    );
}

const OPS_TOKEN: &str = "ops-5e7a9c1b3d5f7a9c1e3b5d7f9a1c3e5b";
const APP_TOKEN: &str = "app-2c4e6a8c0e2b4d6f8a0c2e4b6d8f0a2c";

fn ops_and_app(config: &mut Config) {
    config.auth.clients = vec![
        ClientConfig {
            max_sessions: None,
            max_waiters: None,
            name: "ops".into(),
            token_sha256: Some(token_sha256(OPS_TOKEN)),
            certificate_san: None,
            namespaces: vec!["".into()],
        },
        ClientConfig {
            max_sessions: None,
            max_waiters: None,
            name: "app".into(),
            token_sha256: Some(token_sha256(APP_TOKEN)),
            certificate_san: None,
            namespaces: vec!["".into()],
        },
    ];
    config.auth.admins = vec!["ops".into()];
}

fn with_token<T>(message: T, token: Option<&str>) -> Request<T> {
    let mut request = Request::new(message);
    if let Some(token) = token {
        let value = format!("Bearer {token}").parse().expect("ascii");
        request.metadata_mut().insert("authorization", value);
    }
    request
}

/// With authentication on, only `auth.admins` may use LockAdmin, even a
/// client whose namespaces cover everything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_role_enforced() {
    let h = Harness::start_with(Flavor::Valkey, ops_and_app).await;
    let mut admin = admin_of(&h).await;
    let ask = |token| {
        with_token(
            pb::InspectRequest {
                resource: "x".into(),
                ..Default::default()
            },
            token,
        )
    };
    let status = admin.inspect(ask(Some(APP_TOKEN))).await.expect_err("app");
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    let status = admin.inspect(ask(None)).await.expect_err("anonymous");
    assert_eq!(status.code(), Code::Unauthenticated, "{status:?}");
    let status = admin
        .force_release(with_token(
            pb::ForceReleaseRequest {
                resource: "x".into(),
                ..Default::default()
            },
            Some(APP_TOKEN),
        ))
        .await
        .expect_err("app");
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    let status = admin
        .list(with_token(pb::ListRequest::default(), Some(APP_TOKEN)))
        .await
        .expect_err("app");
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    let answer = admin.inspect(ask(Some(OPS_TOKEN))).await.expect("ops");
    assert!(!answer.into_inner().held);
}

/// Bad admin input is INVALID_ARGUMENT naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_named() {
    let h = Harness::start(Flavor::Valkey).await;
    let mut admin = admin_of(&h).await;
    let mut c = h.client().await;
    let cases: Vec<(Result<(), tonic::Status>, &str)> = vec![
        (
            admin.inspect(pb::InspectRequest::default()).await.map(drop),
            "resource",
        ),
        (
            admin
                .force_release(pb::ForceReleaseRequest::default())
                .await
                .map(drop),
            "resource",
        ),
        (
            admin
                .list(pb::ListRequest {
                    page_size: 5_000,
                    ..Default::default()
                })
                .await
                .map(drop),
            "page_size",
        ),
        (
            admin
                .list(pb::ListRequest {
                    page_token: "garbage".into(),
                    ..Default::default()
                })
                .await
                .map(drop),
            "page_token",
        ),
        (
            admin
                .list(pb::ListRequest {
                    prefix: "a\u{7}".into(),
                    ..Default::default()
                })
                .await
                .map(drop),
            "prefix",
        ),
        (
            c.acquire(acquire_as("r", &"o".repeat(129), 1_000))
                .await
                .map(drop),
            "owner",
        ),
    ];
    for (result, field) in cases {
        let status = result.expect_err(field);
        assert_eq!(status.code(), Code::InvalidArgument, "{field}: {status:?}");
        assert!(status.message().starts_with(field), "{field}: {status:?}");
    }
}

/// `redlockctl inspect`, `list` and `force-release` against the daemon:
/// the owner shows, the token never does, the exit statuses say held/not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlockctl_admin_commands() {
    use common::ctl::*;
    let h = Harness::start(Flavor::Valkey).await;
    let addr = h.daemons[0].addr;
    let limit = Duration::from_secs(30);
    let mut c = h.client().await;
    let lock = c
        .acquire(acquire_as("billing/close-month", "nightly-billing", 60_000))
        .await
        .expect("Acquire")
        .into_inner()
        .lock
        .expect("lock");

    let out = output_within(redlockctl(addr, &["inspect", "billing/close-month"]), limit).await;
    assert_exit(&out, 0);
    assert_eq!(assignment(&out, "REDLOCK_OWNER"), "nightly-billing");
    assert_eq!(assignment(&out, "REDLOCK_FENCE"), lock.fence.to_string());
    assert_eq!(assignment(&out, "REDLOCK_SESSION"), "unary");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(&lock.token));

    let out = output_within(redlockctl(addr, &["list", "billing/"]), limit).await;
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{stdout}");
    assert!(
        rows[0].starts_with("billing/close-month\tnightly-billing\t"),
        "{stdout}"
    );
    let out = output_within(redlockctl(addr, &["--json", "list", "other/"]), limit).await;
    assert_exit(&out, 0);
    assert!(out.stdout.is_empty(), "{}", describe(&out));

    let out = output_within(
        redlockctl(addr, &["force-release", "billing/close-month"]),
        limit,
    )
    .await;
    assert_exit(&out, 0);
    assert_eq!(assignment(&out, "REDLOCK_WAS_HELD"), "true");
    let out = output_within(
        redlockctl(addr, &["force-release", "billing/close-month"]),
        limit,
    )
    .await;
    assert_exit(&out, 82);
    let out = output_within(redlockctl(addr, &["inspect", "billing/close-month"]), limit).await;
    assert_exit(&out, 82);
    assert_eq!(assignment(&out, "REDLOCK_HELD"), "false");
}
