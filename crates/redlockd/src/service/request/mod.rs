//! Checking requests at the door: every field is validated here, with a
//! message naming it, before anything reaches the engine (and so a master).
//! A lock on several resources' list is checked in `multi.rs`.

mod multi;

use crate::config::RedlockConfig;
use crate::pb;
use crate::redlock::{RequestId, Token, TokenError};
use std::time::Duration;

/// Longest accepted `owner` (it is only a label for logs).
const MAX_OWNER_LEN: usize = 128;

/// A request field that breaks a rule; becomes INVALID_ARGUMENT.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub(crate) struct InvalidRequest {
    /// The offending field, as named in the proto.
    pub field: &'static str,
    /// What is wrong with it.
    pub reason: String,
}

pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> InvalidRequest {
    InvalidRequest {
        field,
        reason: reason.into(),
    }
}

/// The bounds requests are checked against, from the `redlock` configuration.
#[derive(Debug, Clone)]
pub struct RequestBounds {
    /// Shortest ttl accepted.
    pub min_ttl: Duration,
    /// Longest ttl accepted.
    pub max_ttl: Duration,
    /// Longest wait accepted.
    pub max_wait: Duration,
    /// Longest resource name, in bytes.
    pub max_resource_len: usize,
    /// `redlock.max_semaphore_limit`.
    pub max_semaphore_limit: u32,
    /// Most resources in one `AcquireRequest.resources`.
    pub max_resources_per_lock: usize,
    /// Longest `lock_delay` accepted.
    pub max_lock_delay: Duration,
    /// Longest `hold_at_least` accepted.
    pub max_hold_at_least: Duration,
}

impl From<&RedlockConfig> for RequestBounds {
    fn from(config: &RedlockConfig) -> RequestBounds {
        RequestBounds {
            min_ttl: config.min_ttl,
            max_ttl: config.max_ttl,
            max_wait: config.max_wait,
            max_resource_len: config.max_resource_len,
            max_semaphore_limit: config.max_semaphore_limit,
            max_resources_per_lock: config.max_resources_per_lock,
            max_lock_delay: config.max_lock_delay,
            max_hold_at_least: config.max_hold_at_least,
        }
    }
}

/// A valid Acquire.
#[derive(Debug, Clone)]
pub(crate) struct AcquireArgs {
    /// Non-empty, bounded, no control characters. For a lock on several
    /// resources, the first of them.
    pub resource: String,
    /// `AcquireRequest.resources`: empty for a lock on `resource` alone,
    /// else every resource (each as valid as `resource`, no duplicates,
    /// at most `max_resources_per_lock`), in the order asked.
    pub resources: Vec<String>,
    /// Within [min_ttl, max_ttl].
    pub ttl: Duration,
    /// Within [0, max_wait].
    pub wait: Duration,
    /// The caller's free-form label (may be empty).
    pub owner: String,
    /// Within [0, max_lock_delay]; zero: none.
    pub lock_delay: Duration,
    /// Within [0, max_hold_at_least]; zero: none.
    pub hold_at_least: Duration,
    /// The idempotency key, if the caller sent one (see
    /// [`crate::redlock::Redlock::acquire_detached_as`]).
    pub request_id: Option<RequestId>,
    /// `mode` is SHARED: a read lock (`crate::redlock::kinds::rw`).
    pub shared: bool,
    /// `limit`: above 1, a permit of a semaphore.
    pub limit: u32,
}

/// A valid Extend.
#[derive(Debug, Clone)]
pub(crate) struct ExtendArgs {
    /// As for Acquire.
    pub resource: String,
    /// Has the shape of a token this daemon issues.
    pub token: Token,
    /// Within [min_ttl, max_ttl].
    pub ttl: Duration,
}

/// A valid Release or Validate: the lock's identity.
#[derive(Debug, Clone)]
pub(crate) struct LockRef {
    /// As for Acquire.
    pub resource: String,
    /// Has the shape of a token this daemon issues.
    pub token: Token,
}

/// A checked request that names one held lock (Extend, Release,
/// Validate): its resource and token, for the handlers' shared prologue.
pub(crate) trait NamesLock {
    /// The lock's resource and token.
    fn lock(&self) -> (&str, &Token);
}

impl NamesLock for ExtendArgs {
    fn lock(&self) -> (&str, &Token) {
        (&self.resource, &self.token)
    }
}

impl NamesLock for LockRef {
    fn lock(&self) -> (&str, &Token) {
        (&self.resource, &self.token)
    }
}

/// Checks an owner label (an election's value): it is shown to operators
/// and observers, so it is short and printable.
pub(crate) fn owner(owner: String) -> Result<String, InvalidRequest> {
    if owner.len() > MAX_OWNER_LEN {
        return Err(invalid(
            "owner",
            format!("longer than {MAX_OWNER_LEN} bytes"),
        ));
    }
    if owner.chars().any(char::is_control) {
        return Err(invalid("owner", "contains control characters"));
    }
    Ok(owner)
}

impl RequestBounds {
    /// Checks an Acquire.
    pub(crate) fn acquire(
        &self,
        mut request: pb::AcquireRequest,
    ) -> Result<AcquireArgs, InvalidRequest> {
        let owner = owner(std::mem::take(&mut request.owner))?;
        let request_id = match request.request_id.as_str() {
            "" => None,
            text => Some(RequestId::parse(text).map_err(|e| invalid("request_id", e.to_string()))?),
        };
        if request.limit > self.max_semaphore_limit {
            return Err(invalid(
                "limit",
                format!(
                    "{} is over redlock.max_semaphore_limit {}",
                    request.limit, self.max_semaphore_limit
                ),
            ));
        }
        if request.limit > 1 && request_id.is_some() {
            return Err(invalid(
                "request_id",
                "not supported with a limit above 1 (a semaphore's permit)",
            ));
        }
        let shared = shared_mode(&request)?;
        let (resource, resources) = match request.resources.is_empty() {
            true => (self.resource(request.resource)?, Vec::new()),
            false => self.resources(&request.resource, request.resources)?,
        };
        if !resources.is_empty() && request_id.is_some() {
            return Err(invalid(
                "request_id",
                "not supported with resources (a lock on several resources)",
            ));
        }
        if !resources.is_empty() && request.limit > 1 {
            return Err(invalid(
                "limit",
                "a semaphore is on one resource: not with resources",
            ));
        }
        if !resources.is_empty() && shared {
            return Err(invalid(
                "mode",
                "SHARED is on one resource: not with resources",
            ));
        }
        Ok(AcquireArgs {
            shared,
            limit: request.limit,
            request_id,
            ttl: self.ttl("ttl", request.ttl)?,
            wait: self.wait(request.wait)?,
            resource,
            resources,
            owner,
            lock_delay: at_most("lock_delay", request.lock_delay, self.max_lock_delay)?,
            hold_at_least: at_most(
                "hold_at_least",
                request.hold_at_least,
                self.max_hold_at_least,
            )?,
        })
    }

    /// Checks an Extend.
    pub(crate) fn extend(&self, request: pb::ExtendRequest) -> Result<ExtendArgs, InvalidRequest> {
        Ok(ExtendArgs {
            ttl: self.ttl("ttl", request.ttl)?,
            token: self.lock_token(&request.token)?,
            resource: self.resource(request.resource)?,
        })
    }

    /// Checks a Release or Validate.
    pub(crate) fn lock_ref(
        &self,
        resource: String,
        token_text: &str,
    ) -> Result<LockRef, InvalidRequest> {
        Ok(LockRef {
            token: self.lock_token(token_text)?,
            resource: self.resource(resource)?,
        })
    }

    /// A token, and for a lock on several resources the names it carries,
    /// within the limits an Acquire would have been held to: a forged
    /// token naming thousands of resources is refused before any master
    /// is asked (it could not match a key anyway).
    fn lock_token(&self, text: &str) -> Result<Token, InvalidRequest> {
        let token = token(text)?;
        if let Some(members) = crate::redlock::token::members(&token) {
            let too_many = members.len() > self.max_resources_per_lock;
            if too_many || members.iter().any(|r| r.len() > self.max_resource_len) {
                return Err(invalid("token", TokenError::Malformed.to_string()));
            }
        }
        Ok(token)
    }

    pub(crate) fn resource(&self, resource: String) -> Result<String, InvalidRequest> {
        if resource.is_empty() {
            return Err(invalid("resource", "must not be empty"));
        }
        if resource.len() > self.max_resource_len {
            return Err(invalid(
                "resource",
                format!("longer than {} bytes", self.max_resource_len),
            ));
        }
        if resource.chars().any(char::is_control) {
            return Err(invalid("resource", "contains control characters"));
        }
        Ok(resource)
    }

    fn ttl(
        &self,
        field: &'static str,
        ttl: Option<prost_types::Duration>,
    ) -> Result<Duration, InvalidRequest> {
        let ttl = duration(field, ttl.ok_or_else(|| invalid(field, "is required"))?)?;
        if ttl < self.min_ttl || ttl > self.max_ttl {
            return Err(invalid(
                field,
                format!(
                    "{} is outside [{}, {}]",
                    humantime::format_duration(ttl),
                    humantime::format_duration(self.min_ttl),
                    humantime::format_duration(self.max_ttl)
                ),
            ));
        }
        Ok(ttl)
    }

    fn wait(&self, wait: Option<prost_types::Duration>) -> Result<Duration, InvalidRequest> {
        let wait = wait
            .map(|w| duration("wait", w))
            .transpose()?
            .unwrap_or_default();
        if wait > self.max_wait {
            return Err(invalid(
                "wait",
                format!(
                    "{} is over max_wait {}",
                    humantime::format_duration(wait),
                    humantime::format_duration(self.max_wait)
                ),
            ));
        }
        Ok(wait)
    }
}

/// An optional, non-negative duration no longer than `max`, named `field`
/// (absent: zero). For the lock's terms `lock_delay` and `hold_at_least`.
fn at_most(
    field: &'static str,
    value: Option<prost_types::Duration>,
    max: Duration,
) -> Result<Duration, InvalidRequest> {
    let value = value
        .map(|v| duration(field, v))
        .transpose()?
        .unwrap_or_default();
    if value > max {
        return Err(invalid(
            field,
            format!(
                "{} is over the maximum {}",
                humantime::format_duration(value),
                humantime::format_duration(max)
            ),
        ));
    }
    Ok(value)
}

fn duration(field: &'static str, value: prost_types::Duration) -> Result<Duration, InvalidRequest> {
    if value.seconds < 0 || value.nanos < 0 {
        return Err(invalid(field, "must not be negative"));
    }
    Duration::try_from(value).map_err(|e| invalid(field, e.to_string()))
}

/// `mode`: EXCLUSIVE (false) or SHARED (true); an unknown value, or SHARED
/// with lock terms a shared grant does not keep (`crate::redlock::kinds::rw`), is
/// refused naming `mode`.
fn shared_mode(request: &pb::AcquireRequest) -> Result<bool, InvalidRequest> {
    match pb::LockMode::try_from(request.mode) {
        Ok(pb::LockMode::Exclusive) => Ok(false),
        Ok(pb::LockMode::Shared) => {
            let has_terms = |d: &Option<prost_types::Duration>| {
                d.is_some_and(|d| d.seconds != 0 || d.nanos != 0)
            };
            if has_terms(&request.lock_delay) || has_terms(&request.hold_at_least) {
                return Err(invalid(
                    "mode",
                    "SHARED takes no lock_delay or hold_at_least",
                ));
            }
            if request.limit > 1 {
                return Err(invalid("mode", "SHARED takes no limit above 1"));
            }
            Ok(true)
        }
        Err(_) => Err(invalid(
            "mode",
            format!("unknown lock mode {}", request.mode),
        )),
    }
}

fn token(text: &str) -> Result<Token, InvalidRequest> {
    Token::parse(text).map_err(|e: TokenError| invalid("token", e.to_string()))
}

#[cfg(test)]
mod tests;
