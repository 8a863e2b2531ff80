//! A granted lock and a validation, as this client hands them out: the
//! daemon's validity placed on this process's monotonic clock, counted from
//! when the request was sent.

use crate::wire::std_duration;
use redlockd_proto::pb;
use std::fmt;
use std::time::{Duration, Instant};

/// A granted lock: its resource(s), secret token, fence and validity.
///
/// The validity is counted from the moment the request was *sent* (a
/// monotonic [`Instant`]), not from when the answer arrived, so the
/// answer's time in transit is never counted in the holder's favour.
/// `Debug` leaves the token out: printing a `Lock` never logs it.
///
/// # Examples
///
/// ```no_run
/// # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
/// use std::time::Duration;
///
/// let lock = client.acquire("orders/42", Duration::from_secs(10)).await?;
/// println!("{lock:?}"); // Lock { resource: "orders/42", fence: 17, .. } without the token
/// assert!(lock.remaining() <= lock.validity());
/// client.release(&lock).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Lock {
    resource: String,
    token: String,
    fence: u64,
    validity: Duration,
    valid_until: Instant,
    permit: u32,
    resources: Vec<LockedResource>,
}

/// One resource of a lock on several resources at once, with its own fence.
///
/// ```no_run
/// # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
/// # use std::time::Duration;
/// let lock = client
///     .acquire("accounts/1", Duration::from_secs(10))
///     .resources(["accounts/2"])
///     .await?;
/// for r in lock.resources() {
///     println!("{} fence {}", r.resource, r.fence);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LockedResource {
    /// The resource's name.
    pub resource: String,
    /// Its fence: strictly greater than every earlier holder's of it.
    pub fence: u64,
}

impl Lock {
    /// A lock known only by its resource and token, for [`Client::extend`],
    /// [`Client::release`] and [`Client::validate`] in a process that did
    /// not acquire it (a resource server checking a client's claim, a
    /// command-line tool given a token). Its fence and validity are
    /// unknown: 0, and already run out.
    ///
    /// [`Client::extend`]: crate::Client::extend
    /// [`Client::release`]: crate::Client::release
    /// [`Client::validate`]: crate::Client::validate
    ///
    /// ```no_run
    /// # use redlockd_client::{Client, Error};
    /// # async fn demo(client: Client, token: String) -> Result<(), Error> {
    /// use redlockd_client::Lock;
    /// let claim = Lock::from_parts("orders/42", token);
    /// if client.validate(&claim).await?.held {
    ///     println!("the caller still holds orders/42");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn from_parts(resource: impl Into<String>, token: impl Into<String>) -> Lock {
        Lock {
            resource: resource.into(),
            token: token.into(),
            fence: 0,
            validity: Duration::ZERO,
            valid_until: Instant::now(),
            permit: 0,
            resources: Vec::new(),
        }
    }

    /// The contract's lock, its validity counted from `sent`.
    pub(crate) fn from_wire(wire: pb::Lock, sent: Instant) -> Lock {
        let validity = std_duration(wire.validity);
        Lock {
            resource: wire.resource,
            token: wire.token,
            fence: wire.fence,
            validity,
            valid_until: sent + validity,
            permit: wire.permit,
            resources: wire
                .resources
                .into_iter()
                .map(|r| LockedResource {
                    resource: r.resource,
                    fence: r.fence,
                })
                .collect(),
        }
    }

    /// This lock with another validity (a Hold session's extension).
    pub(crate) fn with_validity(&self, validity: Duration, valid_until: Instant) -> Lock {
        Lock {
            validity,
            valid_until,
            ..self.clone()
        }
    }

    /// The resource locked (the first one of a lock on several resources).
    ///
    /// ```no_run
    /// # fn demo(lock: redlockd_client::Lock) {
    /// println!("holding {}", lock.resource());
    /// # }
    /// ```
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The secret token that proves ownership, for a resource server's
    /// [`Client::validate`](crate::Client::validate). Never log it.
    ///
    /// ```no_run
    /// # fn send_to_resource_server(_: &str, _: u64) {}
    /// # fn demo(lock: redlockd_client::Lock) {
    /// send_to_resource_server(lock.token(), lock.fence());
    /// # }
    /// ```
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The fencing token: strictly greater than the fence of every earlier
    /// holder this grant excludes. Pass it with every write made under the
    /// lock and let the resource reject smaller ones.
    ///
    /// ```no_run
    /// # fn demo(lock: redlockd_client::Lock) {
    /// println!("writing with fence {}", lock.fence());
    /// # }
    /// ```
    pub fn fence(&self) -> u64 {
        self.fence
    }

    /// The guaranteed validity the daemon reported.
    ///
    /// ```no_run
    /// # fn demo(lock: redlockd_client::Lock) {
    /// println!("valid for {:?}", lock.validity());
    /// # }
    /// ```
    pub fn validity(&self) -> Duration {
        self.validity
    }

    /// When that validity ends on this process's monotonic clock: the
    /// request's send time plus [`Lock::validity`].
    ///
    /// ```no_run
    /// # fn demo(lock: redlockd_client::Lock) {
    /// if std::time::Instant::now() < lock.valid_until() {
    ///     println!("still guaranteed");
    /// }
    /// # }
    /// ```
    pub fn valid_until(&self) -> Instant {
        self.valid_until
    }

    /// The guaranteed validity left now (zero once it ran out).
    ///
    /// ```no_run
    /// # fn demo(lock: redlockd_client::Lock) {
    /// println!("{:?} left", lock.remaining());
    /// # }
    /// ```
    pub fn remaining(&self) -> Duration {
        self.valid_until.saturating_duration_since(Instant::now())
    }

    /// A semaphore's permit (an acquire with a limit above 1): which of its
    /// permits this grant holds, `0` to `limit - 1`; 0 for a plain lock.
    ///
    /// ```no_run
    /// # async fn demo(client: redlockd_client::Client) -> Result<(), redlockd_client::Error> {
    /// # use std::time::Duration;
    /// let permit = client.acquire("gpus", Duration::from_secs(30)).limit(4).await?;
    /// println!("GPU slot {}", permit.permit());
    /// # Ok(()) }
    /// ```
    pub fn permit(&self) -> u32 {
        self.permit
    }

    /// A lock on several resources at once: each with its fence, in the
    /// order asked for (the first is also [`Lock::resource`] and
    /// [`Lock::fence`]). Empty for a lock on one resource.
    ///
    /// ```no_run
    /// # fn demo(lock: redlockd_client::Lock) {
    /// let names: Vec<&str> = lock.resources().iter().map(|r| r.resource.as_str()).collect();
    /// # }
    /// ```
    pub fn resources(&self) -> &[LockedResource] {
        &self.resources
    }
}

impl fmt::Debug for Lock {
    /// Everything but the token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Lock");
        d.field("resource", &self.resource)
            .field("fence", &self.fence)
            .field("validity", &self.validity);
        if self.permit != 0 {
            d.field("permit", &self.permit);
        }
        if !self.resources.is_empty() {
            d.field("resources", &self.resources);
        }
        d.finish_non_exhaustive()
    }
}

/// [`Client::validate`](crate::Client::validate)'s answer.
///
/// ```no_run
/// # use redlockd_client::{Client, Error, Lock};
/// # async fn demo(client: Client, lock: Lock) -> Result<(), Error> {
/// let v = client.validate(&lock).await?;
/// if v.held {
///     println!("held for at least {:?} more", v.validity);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Validation {
    /// Whether the token is still the current holder on a majority.
    pub held: bool,
    /// The remaining guaranteed validity when held (zero otherwise).
    pub validity: Duration,
    /// When that validity ends, counted from the request's send time.
    pub valid_until: Instant,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Debug never shows the token; the validity counts from the send time.
    #[test]
    fn debug_hides_the_token() {
        let sent = Instant::now();
        let lock = Lock::from_wire(
            pb::Lock {
                resource: "orders/42".into(),
                token: "0123456789abcdef0123456789abcdef".into(),
                fence: 17,
                validity: Some(prost_types::Duration {
                    seconds: 9,
                    nanos: 0,
                }),
                permit: 0,
                resources: Vec::new(),
            },
            sent,
        );
        let shown = format!("{lock:?}");
        assert!(!shown.contains("0123456789abcdef"), "{shown}");
        assert!(
            shown.contains("orders/42") && shown.contains("17"),
            "{shown}"
        );
        assert_eq!(lock.valid_until(), sent + Duration::from_secs(9));
        assert_eq!(lock.token(), "0123456789abcdef0123456789abcdef");
    }
}
