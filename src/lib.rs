//! redlockd: a lock-service daemon. Services in any language call its gRPC
//! API; inside, it runs the Redlock algorithm against N independent
//! Valkey/Redis masters.
//!
//! Module map:
//! - [`redlock`]: the algorithm (quorum, validity, fencing, retry), no gRPC, no
//!   Valkey client: masters are a trait;
//! - [`node`]: one Valkey/Redis master over fred (scripts, server detection);
//! - [`service`]: the gRPC layer: validate, call the engine, map the outcome;
//! - [`server`]: wiring and serving ([`run`]), used by the binary and tests;
//! - [`config`]: the one typed configuration, loaded once;
//! - [`metrics`], [`metrics_endpoint`], [`health`]: what operators see;
//! - [`masters`]: local master processes for `--dev` and the test suite;
//! - [`signal`](mod@signal): SIGTERM/SIGINT;
//! - [`tls`]: TLS material for the gRPC port and for `rediss://` masters.

pub mod codec;
pub mod config;
pub mod health;
pub mod masters;
pub mod metrics;
pub mod metrics_endpoint;
pub mod node;
pub mod redlock;
pub mod server;
pub mod service;
pub mod signal;
pub mod tls;

pub use server::run;

/// Code generated from `proto/redlock/v1/lock.proto` at build time.
pub mod pb {
    #![allow(missing_docs, clippy::all, clippy::pedantic)]
    tonic::include_proto!("redlock.v1");
}
