//! The Prometheus scrape endpoint: `GET /metrics` over plain HTTP/1.1 on
//! `metrics.listen`, separate from the gRPC port so that scraping needs no
//! gRPC and cannot be reached through the lock API's authentication. It
//! also answers `GET /elections/NAME` for the elections the daemon
//! campaigns in itself (`crate::campaigns`): 200 while it leads, 503
//! otherwise (a readiness probe), 404 for one not configured.

use crate::campaigns::Campaigns;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::PrometheusHandle;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// How long a scraper may take to send its request headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one scrape connection may stay open at all (keep-alive
/// included): a slow or silent client cannot hold it forever.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);
/// Scrape connections served at once; more wait in the listen backlog.
const MAX_CONNECTIONS: usize = 64;
/// Pause after a failed accept (EMFILE), instead of retrying at once.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Serves `/metrics` from `handle`, and `/elections/NAME` from
/// `campaigns`, on `listener` until `shutdown` completes.
pub(crate) async fn serve(
    listener: TcpListener,
    handle: PrometheusHandle,
    campaigns: Campaigns,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let errors = crate::conn::Throttled::new(Duration::from_secs(10));
    loop {
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_closed) => return,
            },
            () = &mut shutdown => return,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    if let Some(not_logged) = errors.ready() {
                        tracing::warn!(%error, not_logged, "metrics endpoint: accept failed");
                    }
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => return,
        };
        let (handle, campaigns) = (handle.clone(), campaigns.clone());
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |request| {
                let (handle, campaigns) = (handle.clone(), campaigns.clone());
                async move { Ok::<_, Infallible>(answer(&request, &handle, &campaigns)) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, connection).await;
        });
    }
}

fn answer(
    request: &Request<Incoming>,
    handle: &PrometheusHandle,
    campaigns: &Campaigns,
) -> Response<Full<Bytes>> {
    let path = request.uri().path();
    let election = path.strip_prefix("/elections/");
    let (status, content_type, body) = match (request.method() == Method::GET, election) {
        (true, None) if path == "/metrics" => {
            crate::metrics::collect_process();
            (StatusCode::OK, "text/plain; version=0.0.4", handle.render())
        }
        (true, Some(name)) => match campaigns.leading(name) {
            Some(leading) => {
                let status = match leading {
                    Some(_) => StatusCode::OK,
                    None => StatusCode::SERVICE_UNAVAILABLE,
                };
                let body = crate::campaigns::state_json(leading.as_ref());
                (status, "application/json", body)
            }
            None => (
                StatusCode::NOT_FOUND,
                "text/plain",
                format!(
                    "not found: no [[election]] named {name:?} in this daemon's configuration\n"
                ),
            ),
        },
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: try GET /metrics\n".to_owned(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = hyper::header::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}
