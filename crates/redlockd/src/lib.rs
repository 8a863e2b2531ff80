//! redlockd: a lock-service daemon. Services in any language call its gRPC
//! API; inside, it runs the Redlock algorithm against N independent
//! Valkey/Redis masters.
//!
//! Module map:
//! - [`redlock`]: the algorithm (quorum, validity, fencing, retry), no gRPC, no
//!   Valkey client: masters are a trait;
//! - [`valkey`]: one Valkey/Redis master over fred (scripts, server detection);
//! - [`service`]: the gRPC layer: validate, call the engine, map the outcome;
//! - `conn`: client connections on the gRPC port (caps, idle timeout);
//! - [`server`]: wiring and serving ([`run`]), used by the binary and tests;
//! - [`config`]: the one typed configuration, loaded once;
//! - [`metrics`], [`metrics_endpoint`], [`health`]: what operators see;
//! - [`runtime`]: the async runtime, sized by `server.worker_threads`;
//! - [`signal`](mod@signal): SIGTERM/SIGINT;
//! - [`tls`]: TLS material for the gRPC port and for `rediss://` masters.
//!
//! The generated gRPC code lives in the `redlockd-proto` crate (re-exported
//! as [`pb`]); local master processes for `--dev` in `redlockd-masters`.

pub(crate) mod campaigns;
pub mod config;
pub(crate) mod conn;
pub(crate) mod fd_limit;
pub(crate) mod gateway;
pub(crate) mod health;
pub(crate) mod metrics;
pub(crate) mod metrics_endpoint;
pub mod redlock;
pub mod runtime;
pub mod server;
pub mod service;
pub mod signal;
pub(crate) mod tls;
pub mod valkey;

pub use redlockd_proto::pb;
pub use server::run;
