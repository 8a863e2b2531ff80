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
            max_sessions: None,
            max_waiters: None,
            name: "orders".into(),
            token_sha256: Some(token_sha256(ORDERS_TOKEN)),
            certificate_san: None,
            namespaces: vec!["orders/".into()],
        },
        ClientConfig {
            max_sessions: None,
            max_waiters: None,
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
        ..Default::default()
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
    // The grant is answered on a quorum; its last masters' commands follow
    // and must not be counted as a refused call's.
    h.held_everywhere(&lock.resource, &lock.token).await;
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

fn small_quotas(config: &mut Config) {
    two_clients(config);
    config.limits.max_sessions = 4;
    config.limits.max_sessions_per_identity = 2;
    config.limits.max_waiters = 4;
    config.limits.max_waiters_per_identity = 2;
}

/// Opens a Hold on `resource` and waits for its first event; the sender
/// keeps the session open while it lives.
async fn open_hold(
    c: &mut Authed,
    resource: &str,
) -> Result<
    (
        tokio::sync::mpsc::Sender<pb::HoldRequest>,
        tonic::Streaming<pb::HoldEvent>,
    ),
    Status,
> {
    let (tx, outgoing) = tokio::sync::mpsc::channel::<pb::HoldRequest>(1);
    tx.send(pb::HoldRequest {
        request: Some(pb::hold_request::Request::Acquire(acquire_req(resource))),
    })
    .await
    .expect("queue the first message");
    let mut events = c
        .hold(tokio_stream::wrappers::ReceiverStream::new(outgoing))
        .await?
        .into_inner();
    let first = tokio::time::timeout(std::time::Duration::from_secs(20), events.message())
        .await
        .expect("a first event in time")?;
    assert!(first.is_some(), "an event, not the end of the stream");
    Ok((tx, events))
}

/// One identity at its quotas of sessions and waiters gets
/// RESOURCE_EXHAUSTED; another identity still opens sessions and waits,
/// although the global caps alone would have let the first take them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identity_quotas_protect_other_identities() {
    let h = Harness::start_with(Flavor::Valkey, small_quotas).await;
    let mut orders = client_with(&h, Some(&format!("Bearer {ORDERS_TOKEN}"))).await;
    let mut jobs = client_with(&h, Some(&format!("Bearer {JOBS_TOKEN}"))).await;

    // Sessions: two for orders, the third refused; jobs still gets its own.
    let _s1 = open_hold(&mut orders, "orders/h1")
        .await
        .expect("session 1");
    let _s2 = open_hold(&mut orders, "orders/h2")
        .await
        .expect("session 2");
    let third = open_hold(&mut orders, "orders/h3").await;
    assert_eq!(
        third.map(|_| ()).expect_err("over the quota").code(),
        Code::ResourceExhausted
    );
    let _j1 = open_hold(&mut jobs, "jobs/h1")
        .await
        .expect("another identity's session");

    // Waiters: orders parks two waiting acquisitions on a held lock.
    let mut long = acquire_req("orders/w");
    long.ttl = ms(60_000);
    orders
        .acquire(long)
        .await
        .expect("the lock the waiters wait for");
    let waiting = |resource: &str, ms_wait: u64| {
        let mut request = acquire_req(resource);
        request.wait = ms(ms_wait);
        request
    };
    let park = |c: Authed| {
        let mut c = c;
        let request = waiting("orders/w", 60_000);
        tokio::spawn(async move { c.acquire(request).await })
    };
    let mut parked = Vec::new();
    for _ in 0..2 {
        parked.push(park(
            client_with(&h, Some(&format!("Bearer {ORDERS_TOKEN}"))).await,
        ));
    }
    // Once both are parked, a third waiting call is refused at once. (A
    // probe that arrived before a parked call did may have taken its place
    // and had it refused: that one is parked again.)
    let started = std::time::Instant::now();
    loop {
        let outcome = orders.acquire(waiting("orders/w", 100)).await;
        let refused = matches!(&outcome, Err(s) if s.code() == Code::ResourceExhausted);
        if refused && parked.iter().all(|t| !t.is_finished()) {
            break;
        }
        for task in &mut parked {
            if task.is_finished() {
                *task = park(client_with(&h, Some(&format!("Bearer {ORDERS_TOKEN}"))).await);
            }
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the waiter quota is reached: {outcome:?}"
        );
    }
    // jobs can still wait (and is told the lock stayed held, not refused).
    jobs.acquire(acquire_req("jobs/w"))
        .await
        .expect("jobs' lock");
    let outcome = jobs.acquire(waiting("jobs/w", 200)).await;
    assert!(
        !matches!(&outcome, Err(s) if s.code() == Code::ResourceExhausted),
        "another identity waits: {outcome:?}"
    );
    for task in &parked {
        assert!(!task.is_finished(), "orders' waiters are still parked");
    }
    for task in parked {
        task.abort();
    }
}

fn jobs_with_its_own_quota(config: &mut Config) {
    small_quotas(config);
    config.limits.max_sessions = 8;
    config.auth.clients[1].max_sessions = Some(3);
}

/// A client given its own session quota (`[[auth.clients]] max_sessions`)
/// opens that many, while another keeps the default share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_can_have_its_own_quota() {
    let h = Harness::start_with(Flavor::Valkey, jobs_with_its_own_quota).await;
    let mut orders = client_with(&h, Some(&format!("Bearer {ORDERS_TOKEN}"))).await;
    let mut jobs = client_with(&h, Some(&format!("Bearer {JOBS_TOKEN}"))).await;
    let mut open = Vec::new();
    for i in 0..3 {
        open.push(
            open_hold(&mut jobs, &format!("jobs/own{i}"))
                .await
                .expect("within jobs' own quota of 3"),
        );
    }
    let fourth = open_hold(&mut jobs, "jobs/own3").await;
    assert_eq!(
        fourth.map(|_| ()).expect_err("over jobs' own quota").code(),
        Code::ResourceExhausted
    );
    for i in 0..2 {
        open.push(
            open_hold(&mut orders, &format!("orders/own{i}"))
                .await
                .expect("within the default quota of 2"),
        );
    }
    let third = open_hold(&mut orders, "orders/own2").await;
    assert_eq!(
        third
            .map(|_| ())
            .expect_err("over the default quota")
            .code(),
        Code::ResourceExhausted
    );
}

/// Hold sessions cannot amplify past the `session.min_ttl` floor: a 10 ms
/// ttl is refused, and 20 sessions at the floor cause at most
/// `masters / (min_ttl * extend_at)` master operations per second each
/// (measured, with room for a retry or two).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tiny_ttl_sessions_stay_within_the_master_budget() {
    const SESSIONS: usize = 20;
    let h = Harness::start(Flavor::Valkey).await;
    let mut c = h.client().await;
    let hold = |resource: &str, ttl: u64| {
        let (tx, outgoing) = tokio::sync::mpsc::channel::<pb::HoldRequest>(1);
        let mut request = acquire_req(resource);
        request.ttl = ms(ttl);
        tx.try_send(pb::HoldRequest {
            request: Some(pb::hold_request::Request::Acquire(request)),
        })
        .expect("queue the first message");
        (tx, tokio_stream::wrappers::ReceiverStream::new(outgoing))
    };
    for _ in 0..SESSIONS {
        let (_tx, outgoing) = hold("flood/r", 10);
        let status = c.hold(outgoing).await.expect_err("a 10 ms session");
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains("session.min_ttl"), "{status:?}");
    }
    let floor = redlockd::config::Config::default().session;
    let floor_ms = u64::try_from(floor.min_ttl.as_millis()).expect("ms");
    let mut open = Vec::new();
    for i in 0..SESSIONS {
        // Distinct resources: every session holds its own lock.
        let (tx, outgoing) = hold(&format!("flood/{i}"), floor_ms);
        let mut events = c
            .hold(outgoing)
            .await
            .expect("a session at the floor")
            .into_inner();
        let first = tokio::time::timeout(std::time::Duration::from_secs(20), events.message())
            .await
            .expect("granted in time")
            .expect("healthy");
        assert!(first.is_some());
        open.push((tx, events));
    }
    let window = std::time::Duration::from_secs(2);
    let before = lock_commands(&h).await;
    let started = std::time::Instant::now();
    tokio::time::sleep(window).await;
    let ops = lock_commands(&h).await - before;
    let seconds = started.elapsed().as_secs_f64();
    #[allow(clippy::cast_precision_loss)]
    let per_session = ops as f64 / seconds / SESSIONS as f64;
    let budget = 5.0 / (floor.min_ttl.as_secs_f64() * floor.extend_at);
    println!(
        "{SESSIONS} sessions at ttl {:?}: {per_session:.1} master ops/s per session (budget {budget:.0})",
        floor.min_ttl
    );
    assert!(
        per_session <= budget * 1.5,
        "{per_session:.1} ops/s per session over {budget:.0}"
    );
    drop(open);
}

/// Elections are permitted by their name, as locks by their resource: a
/// client campaigns, reads and observes elections in its namespaces, and
/// is refused every call on another's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elections_in_namespaces() {
    use redlockd::pb::election_service_client::ElectionServiceClient;
    let h = Harness::start_with(Flavor::Valkey, two_clients).await;
    let channel = Channel::from_shared(format!("http://{}", h.daemons[0].addr))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let header: MetadataValue<_> = format!("Bearer {JOBS_TOKEN}").parse().expect("ascii");
    let add: AddAuth = Box::new(move |mut request: Request<()>| {
        request
            .metadata_mut()
            .insert("authorization", header.clone());
        Ok(request)
    });
    let mut jobs = ElectionServiceClient::with_interceptor(channel, add);
    let start = |name: &str| pb::CampaignRequest {
        request: Some(pb::campaign_request::Request::Campaign(
            pb::campaign_request::Start {
                name: name.into(),
                value: "me".into(),
                ttl: ms(5_000),
            },
        )),
    };
    // The stream stays open (a half-close before `elected` withdraws).
    let (requests, outgoing) = tokio::sync::mpsc::channel(1);
    requests.send(start("jobs/leader")).await.expect("queue");
    let mut events = jobs
        .campaign(tokio_stream::wrappers::ReceiverStream::new(outgoing))
        .await
        .expect("own namespace")
        .into_inner();
    let elected = events.message().await.expect("an event").expect("open");
    assert!(
        matches!(
            elected.event,
            Some(pb::campaign_response::Event::Elected(_))
        ),
        "{elected:?}"
    );
    let leader = jobs
        .leader(pb::LeaderRequest {
            name: "jobs/leader".into(),
        })
        .await
        .expect("own namespace")
        .into_inner();
    assert!(leader.has_leader);

    let refused = jobs
        .campaign(tokio_stream::iter([start("orders/leader")]))
        .await
        .expect_err("another's namespace");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let refused = jobs
        .leader(pb::LeaderRequest {
            name: "orders/leader".into(),
        })
        .await
        .expect_err("another's namespace");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let refused = jobs
        .observe(pb::ObserveRequest {
            name: "orders/leader".into(),
        })
        .await
        .expect_err("another's namespace");
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
}
