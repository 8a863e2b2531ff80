//! A lock's life through the unary calls: acquire, contention, waiting,
//! fences, extend, validate, release, request ids, bad input.

use crate::{client_of, start};
use redlockd_client::{new_request_id, Client, Error, Lock};
use std::time::{Duration, Instant};

const TTL: Duration = Duration::from_secs(30);

/// Acquire grants a lock with a token, a fence and a validity counted from
/// the send time; release says it was held, and a second release says it
/// was not; the next holder's fence is greater.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_release_and_fences_increase() {
    let (_h, c) = start().await;
    let before = Instant::now();
    let lock = c.acquire("life/basic", TTL).await.expect("acquire");
    assert_eq!(lock.resource(), "life/basic");
    assert_eq!(lock.token().len(), 32);
    assert!(lock.fence() > 0);
    assert!(lock.validity() > Duration::ZERO && lock.validity() <= TTL);
    assert!(lock.valid_until() <= before + TTL + Duration::from_secs(1));
    assert!(lock.valid_until() >= before + lock.validity());
    assert!(!format!("{lock:?}").contains(lock.token()));
    assert!(c.release(&lock).await.expect("release"));
    assert!(!c.release(&lock).await.expect("second release"));
    let next = c.acquire("life/basic", TTL).await.expect("acquire again");
    assert!(
        next.fence() > lock.fence(),
        "{} then {}",
        lock.fence(),
        next.fence()
    );
    assert_ne!(next.token(), lock.token());
    c.release(&next).await.expect("release");
}

/// A held resource refuses an acquire without a wait (Held, nothing
/// granted); one with a wait is granted when the holder releases, long
/// before the holder's ttl, with a greater fence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_refused_then_woken_by_release() {
    let (h, a) = start().await;
    let b = client_of(&h, 0).await;
    let held = a.acquire("life/contended", TTL).await.expect("acquire");
    let refused = b.acquire("life/contended", TTL).await.expect_err("held");
    assert!(matches!(refused, Error::Held(_)), "{refused}");
    let waiter = tokio::spawn({
        let b = b.clone();
        async move {
            b.acquire("life/contended", TTL)
                .wait(Duration::from_secs(20))
                .await
        }
    });
    // Lets the waiter's wait begin; it cannot make the test pass on its
    // own (the holder's ttl is 30 s, the bound below 5 s).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = Instant::now();
    assert!(a.release(&held).await.expect("release"));
    let granted = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the waiter is woken by the release")
        .expect("task")
        .expect("granted");
    println!("waiter granted {:?} after the release", released.elapsed());
    assert!(granted.fence() > held.fence());
    b.release(&granted).await.expect("release");
}

/// Extend keeps token and fence and moves the validity; validate says held
/// with a validity, then not held after the release; extending a released
/// lock is NotHeld.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_and_validate() {
    let (_h, c) = start().await;
    let lock = c
        .acquire("life/extend", Duration::from_secs(2))
        .await
        .expect("acquire");
    let extended = c
        .extend(&lock, Duration::from_secs(20))
        .await
        .expect("extend");
    assert_eq!(
        (extended.token(), extended.fence()),
        (lock.token(), lock.fence())
    );
    assert!(extended.validity() > Duration::from_secs(10));
    assert!(extended.valid_until() > lock.valid_until());
    let v = c.validate(&extended).await.expect("validate");
    assert!(v.held && v.validity > Duration::from_secs(10), "{v:?}");
    assert!(c.release(&extended).await.expect("release"));
    let v = c.validate(&extended).await.expect("validate");
    assert!(!v.held && v.validity.is_zero(), "{v:?}");
    let gone = c
        .extend(&lock, Duration::from_secs(20))
        .await
        .expect_err("released");
    assert!(matches!(gone, Error::NotHeld(_)), "{gone}");
    // A lock known by resource and token only, as a resource server has it.
    let claim = Lock::from_parts("life/extend", "0123456789abcdef0123456789abcdef");
    assert!(!c.validate(&claim).await.expect("validate").held);
}

/// The same request id answers the lock it already holds (same token and
/// fence) instead of Held; another request id is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_id_is_idempotent() {
    let (_h, c) = start().await;
    let id = new_request_id().expect("a request id");
    let first = c
        .acquire("life/idempotent", TTL)
        .request_id(&id)
        .await
        .expect("acquire");
    let again = c
        .acquire("life/idempotent", TTL)
        .request_id(&id)
        .await
        .expect("the same request id");
    assert_eq!(
        (again.token(), again.fence()),
        (first.token(), first.fence())
    );
    let other = c
        .acquire("life/idempotent", TTL)
        .request_id(new_request_id().expect("id"))
        .await
        .expect_err("another request id");
    assert!(matches!(other, Error::Held(_)), "{other}");
    assert!(c.release(&again).await.expect("release"));
}

/// Bad input is InvalidArgument naming the field, whether this client
/// refuses it (an empty resource, a zero ttl) or the daemon does (a short
/// request id, a ttl over max_ttl).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_named() {
    let (_h, c) = start().await;
    let field = |e: Error| {
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        e.field().map(str::to_owned)
    };
    let e = c.acquire("", TTL).await.expect_err("empty");
    assert_eq!(field(e).as_deref(), Some("resource"));
    let e = c.acquire("r", Duration::ZERO).await.expect_err("zero");
    assert_eq!(field(e).as_deref(), Some("ttl"));
    let e = c
        .acquire("r", TTL)
        .request_id("short")
        .await
        .expect_err("short id");
    assert_eq!(field(e).as_deref(), Some("request_id"));
    let e = c
        .acquire("r", Duration::from_secs(365 * 24 * 3600))
        .await
        .expect_err("a year");
    assert_eq!(field(e).as_deref(), Some("ttl"));
    let e = c
        .hold("", TTL)
        .await
        .expect_err("an empty resource, in a session");
    assert_eq!(field(e).as_deref(), Some("resource"));
}

/// A daemon that is not there: connect says Unavailable; a lazy client's
/// first call does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_daemon_is_unavailable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let e = Client::connect(addr.to_string())
        .await
        .expect_err("nobody listens");
    assert!(matches!(e, Error::Unavailable(_)), "{e}");
    assert!(e.is_retryable());
    let lazy = Client::builder(format!("http://{addr}"))
        .connect_lazy()
        .expect("a lazy client");
    let e = lazy.acquire("r", TTL).await.expect_err("nobody listens");
    assert!(matches!(e, Error::Unavailable(_)), "{e}");
}
