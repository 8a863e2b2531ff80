//! Client authentication, namespaces and limits against a real daemon:
//! bearer tokens, UNAUTHENTICATED, PERMISSION_DENIED across namespaces, lock
//! tokens still required, the per-identity rate limit, and the cap on calls
//! per connection. Nothing refused reaches the masters.

mod common;

use common::*;
use redlockd::config::{ClientConfig, Config};
use redlockd::pb;
use redlockd::pb::lock_service_client::LockServiceClient;
use redlockd::service::token_sha256;
use redlockd_testkit::masters::Flavor;
use tonic::metadata::MetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

const ORDERS_TOKEN: &str = "orders-7f3a9c2e4b6d8f0a1c3e5b7d9f2a4c6e";
const JOBS_TOKEN: &str = "jobs-1b3d5f7a9c2e4a6c8e0b2d4f6a8c0e2b";

/// Two clients with disjoint namespaces.
fn two_clients(config: &mut Config) {
    config.auth.clients = vec![
        ClientConfig {
            name: "orders".into(),
            token_sha256: Some(token_sha256(ORDERS_TOKEN)),
            certificate_san: None,
            namespaces: vec!["orders/".into()],
        },
        ClientConfig {
            name: "jobs".into(),
            token_sha256: Some(token_sha256(JOBS_TOKEN)),
            certificate_san: None,
            namespaces: vec!["jobs/".into(), "shared/".into()],
        },
    ];
}

/// The client-side interceptor that adds the `authorization` header.
type AddAuth = Box<dyn FnMut(Request<()>) -> Result<Request<()>, Status> + Send>;

type Authed = LockServiceClient<InterceptedService<Channel, AddAuth>>;

/// A client of daemon 0 sending `authorization: <value>` (none if `None`).
async fn client_with(h: &Harness, value: Option<&str>) -> Authed {
    let channel = Channel::from_shared(format!("http://{}", h.daemons[0].addr))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let header: Option<MetadataValue<_>> = value.map(|v| v.parse().expect("ascii"));
    let add: AddAuth = Box::new(move |mut request: Request<()>| {
        if let Some(header) = &header {
            request
                .metadata_mut()
                .insert("authorization", header.clone());
        }
        Ok(request)
    });
    LockServiceClient::with_interceptor(channel, add)
}

fn acquire_req(resource: &str) -> pb::AcquireRequest {
    pb::AcquireRequest {
        resource: resource.into(),
        ttl: ms(5_000),
        wait: None,
        owner: "security-test".into(),
        request_id: String::new(),
    }
}

async fn lock_commands(h: &Harness) -> u64 {
    let mut n = 0;
    for i in 0..5 {
        n += h.lock_commands(i).await;
    }
    n
}

/// A valid token works in its namespace; no token, a wrong token, or a
/// resource outside the namespaces is refused before any master is asked;
/// a client that knows another's resource still cannot release its lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_tokens_and_namespaces() {
    let h = Harness::start_with(Flavor::Valkey, two_clients).await;
    let mut orders = client_with(&h, Some(&format!("Bearer {ORDERS_TOKEN}"))).await;
    let mut jobs = client_with(&h, Some(&format!("Bearer {JOBS_TOKEN}"))).await;

    let lock = orders
        .acquire(acquire_req("orders/1"))
        .await
        .expect("own namespace")
        .into_inner()
        .lock
        .expect("lock");
    let before = lock_commands(&h).await;

    for (value, what) in [
        (None, "no credentials"),
        (Some("Bearer not-a-known-token"), "unknown token"),
        (Some("Basic b3JkZXJzOnNlY3JldA=="), "wrong scheme"),
        (Some(ORDERS_TOKEN), "no scheme"),
    ] {
        let mut anonymous = client_with(&h, value).await;
        let status = anonymous
            .acquire(acquire_req("orders/2"))
            .await
            .expect_err(what);
        assert_eq!(status.code(), Code::Unauthenticated, "{what}: {status:?}");
        let status = anonymous
            .release(pb::ReleaseRequest {
                resource: lock.resource.clone(),
                token: lock.token.clone(),
            })
            .await
            .expect_err(what);
        assert_eq!(status.code(), Code::Unauthenticated, "{what}: {status:?}");
    }

    // Across namespaces: every call, with or without the lock token.
    let status = jobs.acquire(acquire_req("orders/1")).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    let status = orders.acquire(acquire_req("jobs/1")).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    let release = pb::ReleaseRequest {
        resource: lock.resource.clone(),
        token: lock.token.clone(),
    };
    let status = jobs.release(release.clone()).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    let extend = pb::ExtendRequest {
        resource: lock.resource.clone(),
        token: lock.token.clone(),
        ttl: ms(5_000),
    };
    let status = jobs.extend(extend.clone()).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    let validate = pb::ValidateRequest {
        resource: lock.resource.clone(),
        token: lock.token.clone(),
    };
    let status = jobs.validate(validate).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert_eq!(
        lock_commands(&h).await,
        before,
        "refused calls reached a master"
    );

    // Hold sessions are checked the same way.
    let (_tx, rx) = tokio::sync::mpsc::channel(1);
    _tx.send(pb::HoldRequest {
        request: Some(pb::hold_request::Request::Acquire(acquire_req("orders/9"))),
    })
    .await
    .expect("queue");
    let status = jobs
        .hold(tokio_stream::wrappers::ReceiverStream::new(rx))
        .await
        .expect_err("hold outside the namespace");
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");

    // Inside its namespace, the same client still needs the lock token.
    let status = orders
        .release(pb::ReleaseRequest {
            resource: lock.resource.clone(),
            token: "0123456789abcdef0123456789abcdef".into(),
        })
        .await;
    assert!(
        !status.expect("a well-formed token").into_inner().was_held,
        "a wrong lock token released the lock"
    );
    assert_eq!(h.holders(&lock.resource, &lock.token).await, 5);
    let status = orders
        .extend(pb::ExtendRequest {
            token: "0123456789abcdef0123456789abcdef".into(),
            ..extend.clone()
        })
        .await
        .expect_err("extend with a wrong lock token");
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    orders.extend(extend).await.expect("extend with the token");
    assert!(
        orders
            .release(release)
            .await
            .expect("release")
            .into_inner()
            .was_held
    );
    // The second client's other namespace works too.
    jobs.acquire(acquire_req("shared/x"))
        .await
        .expect("shared/");
}

fn rate_limited(config: &mut Config) {
    two_clients(config);
    config.limits.rate_per_second = 1;
    config.limits.burst = 5;
}

/// Past its burst, an identity gets RESOURCE_EXHAUSTED; another identity
/// is not affected; nothing refused reaches the masters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_per_identity() {
    let h = Harness::start_with(Flavor::Valkey, rate_limited).await;
    let mut orders = client_with(&h, Some(&format!("Bearer {ORDERS_TOKEN}"))).await;
    let mut jobs = client_with(&h, Some(&format!("Bearer {JOBS_TOKEN}"))).await;
    // The bucket refills one token a second: a slow machine may earn one
    // more call while the loop runs, so only the refusals are counted.
    let mut codes = Vec::new();
    let started = std::time::Instant::now();
    for i in 0..8 {
        let outcome = orders.acquire(acquire_req(&format!("orders/r{i}"))).await;
        codes.push(outcome.map_or_else(|s| s.code(), |_| Code::Ok));
    }
    let refilled = usize::try_from(started.elapsed().as_secs()).unwrap_or(usize::MAX);
    assert_eq!(&codes[..5], &[Code::Ok; 5], "{codes:?}");
    let refused = codes
        .iter()
        .filter(|c| **c == Code::ResourceExhausted)
        .count();
    assert!(refused >= 3usize.saturating_sub(refilled), "{codes:?}");
    assert_eq!(
        refused + codes.iter().filter(|c| **c == Code::Ok).count(),
        8
    );
    // Refused calls never reach a master.
    let before = lock_commands(&h).await;
    for _ in 0..20 {
        let _ = orders.acquire(acquire_req("orders/x")).await;
    }
    let granted = lock_commands(&h).await - before;
    // At most a refill's worth of calls got through (each is at most a
    // few commands per master), not twenty.
    assert!(granted <= 5 * 3 * 2, "{granted} lock commands");
    jobs.acquire(acquire_req("jobs/1"))
        .await
        .expect("another identity has its own bucket");
}

fn one_call_per_connection(config: &mut Config) {
    config.limits.max_calls_per_connection = 1;
}

/// With one call per connection, the daemon announces one HTTP/2 stream per
/// connection: a second call while a Hold session is open on the same
/// connection is queued by the client, not refused, and is served once the
/// session ends; another connection is not affected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_per_connection() {
    let h = Harness::start_with(Flavor::Valkey, one_call_per_connection).await;
    let mut c = h.client().await;
    let (tx, mut events, _lock) = hold(&mut c, "conn/1", 5_000, 0).await;
    let queued = tokio::spawn({
        let mut c = c.clone();
        async move { acquire(&mut c, "conn/2", 1_000, 0).await }
    });
    let mut other = h.client().await;
    acquire(&mut other, "conn/3", 1_000, 0)
        .await
        .expect("another connection");
    assert!(
        !queued.is_finished(),
        "a call past the connection's one stream was answered while the session held it"
    );
    tx.send(release_message()).await.expect("release");
    while let Ok(Some(_)) = events.message().await {}
    drop(tx);
    tokio::time::timeout(std::time::Duration::from_secs(10), queued)
        .await
        .expect("the queued call is served once the session ends")
        .expect("no panic")
        .expect("granted");
}
