//! The Prometheus scrape endpoint: `GET /metrics` over plain HTTP/1.1 on
//! `metrics.listen`, separate from the gRPC port so that scraping needs no
//! gRPC and cannot be reached through the lock API's authentication.

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use metrics_exporter_prometheus::PrometheusHandle;
use std::convert::Infallible;
use std::future::Future;
use tokio::net::TcpListener;

/// Serves `/metrics` from `handle` on `listener` until `shutdown` completes.
pub(crate) async fn serve(
    listener: TcpListener,
    handle: PrometheusHandle,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!(%error, "metrics endpoint: accept failed");
                    continue;
                }
            },
            () = &mut shutdown => return,
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let handle = handle.clone();
                async move { Ok::<_, Infallible>(answer(&request, &handle)) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn answer(request: &Request<Incoming>, handle: &PrometheusHandle) -> Response<Full<Bytes>> {
    let (status, content_type, body) =
        if request.method() == Method::GET && request.uri().path() == "/metrics" {
            crate::metrics::collect_process();
            (StatusCode::OK, "text/plain; version=0.0.4", handle.render())
        } else {
            (
                StatusCode::NOT_FOUND,
                "text/plain",
                "not found: try GET /metrics\n".to_owned(),
            )
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
