//! Rust's row of `scripts/bench-clients.sh`: what `redlockd-client` costs
//! beside the raw generated stub (`redlockd-proto`'s `LockServiceClient`
//! over one tonic channel of its own), against a running daemon. It prints
//! one JSON line per way and asserts nothing. The method is
//! `clients/fourway/bench/bench.py`'s: a warm-up, then ROUNDS alternating
//! runs of C=1 (p50 of a cycle) and of C=64 (64 tasks on a multi-threaded
//! runtime, each on its own resource; cycles/s), medians reported.
//!
//! Usage: `bench-rust ADDRESS SECONDS ROUNDS`

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

use redlockd_client::Client;
use redlockd_proto::pb;
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// Every cycle's lock lives this long (it is released at once).
const TTL: Duration = Duration::from_secs(10);
/// Callers of the C=64 figure.
const CALLERS: usize = 64;

type Error = Box<dyn std::error::Error + Send + Sync>;
type Cycle = Pin<Box<dyn Future<Output = Result<(), Error>> + Send>>;

/// One way to run an acquire+release cycle on a resource.
#[derive(Clone)]
enum Way {
    /// The raw generated stub.
    Raw(LockServiceClient<Channel>),
    /// The client library.
    Client(Client),
}

impl Way {
    fn name(&self) -> &'static str {
        match self {
            Way::Raw(_) => "raw",
            Way::Client(_) => "client",
        }
    }

    fn cycle(&self, resource: String) -> Cycle {
        match self.clone() {
            Way::Raw(mut stub) => Box::pin(async move {
                let mut request = tonic::Request::new(pb::AcquireRequest {
                    resource: resource.clone(),
                    ttl: Some(prost_types::Duration {
                        seconds: TTL.as_secs() as i64,
                        nanos: 0,
                    }),
                    ..Default::default()
                });
                request.set_timeout(TTL);
                let lock = stub.acquire(request).await?.into_inner().lock;
                let token = lock.map(|lock| lock.token).unwrap_or_default();
                let mut request = tonic::Request::new(pb::ReleaseRequest { resource, token });
                request.set_timeout(TTL);
                stub.release(request).await?;
                Ok(())
            }),
            Way::Client(client) => Box::pin(async move {
                let lock = client.acquire(resource, TTL).await?;
                client.release(&lock).await?;
                Ok(())
            }),
        }
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => xs[n / 2],
        _ => (xs[n / 2 - 1] + xs[n / 2]) / 2.0,
    }
}

/// The p50 of one caller's cycles, in milliseconds.
async fn c1(way: &Way, resource: &str, seconds: Duration) -> Result<f64, Error> {
    let mut took = Vec::new();
    let end = Instant::now() + seconds;
    while Instant::now() < end {
        let start = Instant::now();
        way.cycle(resource.to_owned()).await?;
        took.push(start.elapsed().as_secs_f64() * 1e3);
    }
    Ok(median(took))
}

/// Cycles per second of [`CALLERS`] callers, and how many failed.
async fn c64(way: &Way, prefix: &str, seconds: Duration) -> Result<(f64, u64), Error> {
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let end = start + seconds;
    let mut callers = Vec::with_capacity(CALLERS);
    for i in 0..CALLERS {
        let (way, done, failed) = (way.clone(), done.clone(), failed.clone());
        let resource = format!("{prefix}/{i}");
        callers.push(tokio::spawn(async move {
            while Instant::now() < end {
                let counter = match way.cycle(resource.clone()).await {
                    Ok(()) => &done,
                    Err(_) => &failed, // counted, not hidden
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for caller in callers {
        caller.await?;
    }
    let rate = done.load(Ordering::Relaxed) as f64 / start.elapsed().as_secs_f64();
    Ok((rate, failed.load(Ordering::Relaxed)))
}

async fn run() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [address, seconds, rounds] = args.as_slice() else {
        return Err("usage: bench-rust ADDRESS SECONDS ROUNDS".into());
    };
    let seconds = Duration::from_secs_f64(seconds.parse()?);
    let rounds: usize = rounds.parse()?;
    let url = format!("http://{address}");
    let stub = LockServiceClient::new(Channel::from_shared(url.clone())?.connect().await?);
    let client = Client::connect(url).await?;
    let ways = [Way::Raw(stub), Way::Client(client)];
    for way in &ways {
        for _ in 0..50 {
            way.cycle(format!("bench/rust/warm/{}", way.name())).await?;
        }
    }
    let mut p50 = [Vec::new(), Vec::new()];
    let mut rate = [Vec::new(), Vec::new()];
    let mut failed = [0u64; 2];
    for _ in 0..rounds {
        for (i, way) in ways.iter().enumerate() {
            p50[i].push(c1(way, &format!("bench/rust/c1/{}", way.name()), seconds).await?);
        }
    }
    for _ in 0..rounds {
        for (i, way) in ways.iter().enumerate() {
            let (r, f) = c64(way, &format!("bench/rust/c64/{}", way.name()), seconds).await?;
            rate[i].push(r);
            failed[i] += f;
        }
    }
    for (i, way) in ways.iter().enumerate() {
        println!(
            "{{\"lang\": \"rust\", \"way\": \"{}\", \"c1_p50_ms\": {}, \"c64_cycles_per_s\": {}, \"c64_failed\": {}}}",
            way.name(),
            median(std::mem::take(&mut p50[i])),
            median(std::mem::take(&mut rate[i])),
            failed[i]
        );
    }
    Ok(())
}

#[tokio::main(flavor = "multi_thread")]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("rust bench: {error}");
            ExitCode::FAILURE
        }
    }
}
