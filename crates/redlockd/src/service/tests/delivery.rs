//! An `Acquire` answer's grant is released if the answer never leaves
//! (`service::delivery`), and kept once its last frame is handed out.

use super::*;
use crate::service::delivery;
use http_body_util::BodyExt;
use tonic::body::Body;

/// The answer to a granted Acquire, as the server's layers receive it (a
/// body of a few bytes stands for the encoded message: only whether it is
/// sent to its end matters here).
async fn granted_answer(d: &Daemon) -> (String, tonic::codegen::http::Response<Body>) {
    answer_to(d, acquire(RESOURCE, TTL, Duration::ZERO)).await
}

/// The answer to `request`, granted, as [`granted_answer`].
async fn answer_to(
    d: &Daemon,
    request: pb::AcquireRequest,
) -> (String, tonic::codegen::http::Response<Body>) {
    let answer = d.api.acquire(Request::new(request)).await.expect("granted");
    let token = answer
        .get_ref()
        .lock
        .as_ref()
        .expect("a lock")
        .token
        .clone();
    let (_metadata, _message, extensions) = answer.into_parts();
    let body = Body::new(http_body_util::Full::new(hyper::body::Bytes::from_static(
        b"lock",
    )));
    let mut response = tonic::codegen::http::Response::new(body);
    *response.extensions_mut() = extensions;
    (token, delivery::watch(response))
}

fn holding(d: &Daemon, token: &str) -> usize {
    d.fakes
        .iter()
        .filter(|f| f.holder(&d.keys).as_deref() == Some(token))
        .count()
}

/// The caller reset the call as the grant came: the answer's body is
/// dropped unsent, and the grant is released at once.
#[tokio::test(start_paused = true)]
async fn an_answer_that_never_leaves_releases_its_grant() {
    let d = daemon();
    let (token, response) = granted_answer(&d).await;
    assert_eq!(holding(&d, &token), 5, "granted on every master");
    drop(response);
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(holding(&d, &token), 0, "released, not left for its ttl");
}

/// With a request id too: the release takes the request id's turn first
/// (a retry through this replica then starts after it), and releases.
#[tokio::test(start_paused = true)]
async fn an_undelivered_grant_with_a_request_id_is_released() {
    let d = daemon();
    let mut request = acquire(RESOURCE, TTL, Duration::ZERO);
    request.request_id = "an-undelivered-request-id-1".into();
    let (token, response) = answer_to(&d, request).await;
    assert_eq!(holding(&d, &token), 5, "granted on every master");
    drop(response);
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
    assert_eq!(holding(&d, &token), 0, "released, not left for its ttl");
}

/// An answer sent to its end leaves the caller its lock.
#[tokio::test(start_paused = true)]
async fn a_delivered_answer_keeps_its_grant() {
    let d = daemon();
    let (token, response) = granted_answer(&d).await;
    let body = response.into_body().collect().await.expect("the body");
    drop(body);
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(holding(&d, &token), 5, "still the caller's");
}

/// An answer taken apart by something other than the server's layers (the
/// HTTP gateway reads the message itself) releases nothing.
#[tokio::test(start_paused = true)]
async fn an_answer_read_in_process_keeps_its_grant() {
    let d = daemon();
    let answer = d
        .api
        .acquire(Request::new(acquire(RESOURCE, TTL, Duration::ZERO)))
        .await
        .expect("granted");
    let lock = answer.into_inner().lock.expect("a lock");
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(holding(&d, &lock.token), 5, "still the caller's");
}
