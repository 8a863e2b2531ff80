//! What redlockd's integration tests, benchmark (`redlockd-bench`) and
//! safety checker (`chaos`) share, written once:
//!
//! - [`masters`]: local Valkey/Redis master processes (re-exported from
//!   `redlockd-masters`, which `redlockd --dev` uses too);
//! - [`daemon`]: a daemon served in-process by `redlockd::run` on a
//!   listener it already holds (no port race);
//! - [`process`]: a `redlockd` process started from the workspace's binary
//!   with `REDLOCKD__*` settings, and [`bin`] to find that binary;
//! - [`client`]: connect-with-retry and "wait until SERVING";
//! - [`commandstats`]: a master's `INFO commandstats`, read;
//! - [`proxy`]: the one TCP fault proxy (slow, blackholed, frozen, closed);
//! - [`pki`]: a private CA and certificates for TLS tests;
//! - [`metrics`]: scraping a daemon's Prometheus endpoint;
//! - [`harness`]: five masters plus daemons plus raw master connections,
//!   the integration tests' fixture, and [`ctl`] for tests that run
//!   programs (redlockctl, examples) against it;
//! - [`pause`]: masters hung (SIGSTOP) for as long as a guard lives;
//! - the `redlockd-cluster` binary (`src/bin/`): masters and daemon
//!   processes for the tests of the other languages, driven over its
//!   stdin and stdout.
//!
//! Not for production: nothing in the daemon depends on this crate.

pub mod bin;
pub mod client;
pub mod commandstats;
pub mod ctl;
pub mod daemon;
pub mod harness;
pub mod metrics;
pub mod pause;
pub mod pki;
pub mod process;
pub mod proxy;

/// Local master processes (see `redlockd-masters`).
pub mod masters {
    pub use redlockd_masters::*;
}

/// Any error, for set-up code that only reports it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
