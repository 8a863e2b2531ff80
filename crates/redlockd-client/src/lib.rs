//! The Rust client of [redlockd], the Redlock lock service: a gRPC daemon
//! that runs Redlock over N independent Valkey/Redis masters and hands out
//! locks with fencing tokens.
//!
//! - [`Client::connect`] (or [`Client::builder`]: TLS with a private CA,
//!   mutual TLS, a bearer token, timeouts);
//! - [`Client::acquire`] for a [`Lock`], then [`Client::extend`],
//!   [`Client::release`] and [`Client::validate`];
//! - [`Client::hold`] for a [`Lease`]: a Hold session the daemon keeps
//!   alive, with [`Lease::lost`] and [`Lease::check`] to stop the work when
//!   the lock goes away, [`Lease::ended`] to say how, and
//!   [`Lease::events`] for logs; a lease that
//!   [`reattach`](Acquire::reattach)es keeps its lock through a broken
//!   session with Extends of its own;
//! - options on either ([`Acquire`]): a wait, an owner, a request id, a
//!   semaphore's [`limit`](Acquire::limit), a [`shared`](Acquire::shared)
//!   (read) lock, several [`resources`](Acquire::resources) at once,
//!   lock-delay and hold-at-least;
//! - one [`Error`] whose variants are the contract's outcomes;
//! - [`Client::channel`] for the daemon's other services (its admin
//!   service, the health service) through their generated clients.
//!
//! Every lock carries a **fence**: strictly greater than the fence of every
//! earlier holder it excludes. Pass it with every write made under the lock
//! and let the resource reject smaller ones: that is what keeps a holder
//! that was paused past its validity from doing harm.
//!
//! # A first call
//!
//! With the dev daemon running (`scripts/dev.sh` in a checkout):
//!
//! ```no_run
//! use std::time::Duration;
//! use redlockd_client::Client;
//!
//! #[tokio::main]
//! async fn main() -> Result<(), redlockd_client::Error> {
//!     let client = Client::connect("127.0.0.1:50051").await?;
//!     let lock = client
//!         .acquire("orders/42", Duration::from_secs(10))
//!         .wait(Duration::from_secs(5))
//!         .await?;
//!     println!("fence {} valid for {:?}", lock.fence(), lock.validity());
//!     // ... the critical section, passing lock.fence() with every write ...
//!     client.release(&lock).await?;
//!     Ok(())
//! }
//! ```
//!
//! # Holding a lock while working
//!
//! ```no_run
//! # async fn step(_: u64) {}
//! # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
//! use std::time::Duration;
//!
//! let lease = client
//!     .hold("jobs/nightly", Duration::from_secs(10))
//!     .wait(Duration::from_secs(60))
//!     .await?;
//! let work = async {
//!     for _ in 0..100 {
//!         step(lease.fence()).await;
//!     }
//! };
//! tokio::select! {
//!     () = work => {}
//!     lost = lease.lost() => return Err(lost), // stop: the lock is gone
//! }
//! lease.release().await?;
//! # Ok(()) }
//! ```
//!
//! # Time
//!
//! A lock's validity counts from when its request was *sent*, on the
//! monotonic clock ([`Lock::valid_until`] is an [`Instant`](std::time::Instant)),
//! so the answer's time in transit never counts in the holder's favour. A
//! lease counts itself lost [`stop_margin`] before its last known validity
//! ends when no extension came.
//!
//! # Cancellation
//!
//! Every future here may be dropped. Dropping an acquire mid-wait leaves
//! nothing locked: the client releases, in the background and bounded by a
//! second, the token its request id derives (see [`Acquire`]). Dropping a
//! [`Lease`] ends its session, and the daemon releases the lock. No task
//! outlives its bound: a background release takes a second at most, a
//! dropped lease's session waits at most the call timeout for the daemon's
//! answer; [`Client::close`] waits for the releases under way.
//!
//! Tokens are secrets: no `Debug` output and no error message of this crate
//! contains one.
//!
//! [redlockd]: https://github.com/redlockd/redlockd

#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod acquire;
mod address;
mod auth;
mod client;
mod connect;
mod end;
mod error;
mod events;
mod lease;
mod lock;
mod reattach;
mod session;
mod tls;
mod unanswered;
mod unary;
mod validity;
mod watch;
mod wire;

pub use acquire::{Acquire, BoxFuture};
pub use auth::{AuthChannel, BearerAuth};
pub use client::{Client, DEFAULT_CALL_TIMEOUT};
pub use connect::ClientBuilder;
pub use error::Error;
pub use events::{LeaseEnd, LeaseEvent, LeaseEvents};
pub use lease::Lease;
pub use lock::{Lock, LockedResource, Validation};
pub use unanswered::new_request_id;
pub use validity::stop_margin;

/// The status type every [`Error`] carries, and its code (tonic's).
pub use tonic::{Code, Status};

#[cfg(test)]
mod tests {
    /// What a caller shares between tasks can be.
    #[test]
    fn send_and_sync() {
        fn shareable<T: Send + Sync>() {}
        shareable::<super::Client>();
        shareable::<super::Lease>();
        shareable::<super::Lock>();
        shareable::<super::Error>();
        shareable::<super::Acquire<super::Lock>>();
        shareable::<super::Acquire<super::Lease>>();
        shareable::<super::LeaseEvents>();
        shareable::<super::AuthChannel>();
    }
}
