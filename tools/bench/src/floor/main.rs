//! `redlockd-echo-floor`: the gRPC floor under redlockd's CPU per call. It
//! serves `redlock.v1.LockService` with tonic and answers `Acquire` with a
//! canned grant and `Release` with `was_held: true` ([`service`]), without
//! masters, engine, authentication or metrics: what one call costs a tonic
//! server on this machine and nothing else. W1's `floor` mode
//! (`redlockd-bench --modes floor`) drives it with the `grpc` mode's
//! clients and reads its CPU from `/proc`, so that the daemon's CPU per
//! cycle can be held against it.
//!
//! The server is set up like the daemon's (`crates/redlockd/src/server/`),
//! from the daemon's default configuration where it has the value:
//!
//! - HTTP/2 connection window: the daemon's, from its stream limit
//!   (`redlockd::server::connection_window`);
//! - max concurrent streams per connection: `limits.max_calls_per_connection`;
//! - HTTP/2 keepalive PINGs: `server.keepalive_interval`, `keepalive_timeout`;
//! - accepted sockets: TCP_NODELAY, and TCP keepalive idle and interval
//!   `keepalive_interval`, `keepalive_timeout / keepalive_interval` probes
//!   (the daemon's `conn::accept`);
//! - decoding limit `server.max_request_bytes`; the generated server with
//!   the contract's small-buffer codec; mimalloc; the daemon's runtime for
//!   `server.worker_threads` (`redlockd::runtime`; `--worker-threads` or
//!   the daemon's variable, so the bench's `--daemon-set` reaches both);
//!   logs at `RUST_LOG` (warn) to stderr.
//!
//! Not copied, as they are the daemon's own work above the floor: its
//! accept loop's connection caps and idle timeout, the streams layer, the
//! auth interceptor, the reflection and admin services, and TLS.
//!
//! It listens on `--listen`, or `REDLOCKD__SERVER__LISTEN` (the daemon's
//! own variable, so the test kit's `DaemonCommand` starts it as it starts
//! a daemon: a free loopback port, SIGTERM to stop), and exits 0 on
//! SIGTERM or SIGINT.

/// The daemon's allocator, so that allocation costs the same as in the
/// daemon.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod service;

use clap::Parser;
use redlockd::config::Config;
use redlockd_proto::pb::lock_service_server::LockServiceServer;
use std::net::SocketAddr;
use tokio::signal::unix::{signal, SignalKind};
use tonic::transport::server::TcpIncoming;

/// A bare tonic server of redlock.v1.LockService with canned answers: the
/// gRPC floor under the daemon's CPU per call.
#[derive(Debug, Parser)]
struct Args {
    /// Where to listen.
    #[arg(
        long,
        env = "REDLOCKD__SERVER__LISTEN",
        default_value = "127.0.0.1:50051"
    )]
    listen: SocketAddr,
    /// Worker threads, as the daemon's `server.worker_threads` (0: one per
    /// core; 1: the single-threaded runtime).
    #[arg(long, env = "REDLOCKD__SERVER__WORKER_THREADS", default_value_t = 0)]
    worker_threads: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let args = Args::parse();
    let (runtime, _) = redlockd::runtime::build(args.worker_threads)?;
    runtime.block_on(serve(args))
}

async fn serve(args: Args) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let defaults = Config::default();
    let server = &defaults.server;
    let streams = u32::try_from(defaults.limits.max_calls_per_connection)
        .ok()
        .filter(|&n| n > 0);
    let probes =
        redlockd::server::keepalive_probes(server.keepalive_interval, server.keepalive_timeout);
    let incoming = TcpIncoming::bind(args.listen)?
        .with_nodelay(Some(true))
        .with_keepalive(Some(server.keepalive_interval))
        .with_keepalive_interval(Some(server.keepalive_interval))
        .with_keepalive_retries(Some(probes));
    let lock_service = LockServiceServer::new(service::Floor::default())
        .max_decoding_message_size(server.max_request_bytes);
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    let stop = async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = interrupt.recv() => {}
        }
    };
    tonic::transport::Server::builder()
        .initial_connection_window_size(redlockd::server::connection_window(
            defaults.limits.max_calls_per_connection,
        ))
        .max_concurrent_streams(streams)
        .http2_keepalive_interval(Some(server.keepalive_interval))
        .http2_keepalive_timeout(Some(server.keepalive_timeout))
        .add_service(lock_service)
        .serve_with_incoming_shutdown(incoming, stop)
        .await?;
    Ok(())
}
