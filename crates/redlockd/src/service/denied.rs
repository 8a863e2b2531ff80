//! Why a caller is turned away before its request is served: [`Denied`],
//! the refusals of authentication, namespaces, the admin role, the rate
//! limit, the per-connection and unauthenticated-call caps and the
//! per-identity quotas. Each is counted in `redlock_auth_denied_total` by
//! its [`Denied::reason`] where it is decided; `super::status` gives its
//! gRPC code.

/// Why a caller is turned away before its request is looked at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Denied {
    /// No `authorization` metadata, or not `Bearer <token>`, and no client
    /// certificate that identifies a client.
    #[error(
        "missing credentials: send `authorization: Bearer <token>`, or connect with a client \
         certificate named in auth.clients.certificate_san"
    )]
    NoCredentials,
    /// A bearer token no configured client has, or a client certificate
    /// whose subjectAltNames name no configured client (or several).
    #[error("invalid credentials")]
    BadCredentials,
    /// The identity may not act on this resource.
    #[error("resource: outside the namespaces of client {client:?}")]
    OutsideNamespaces {
        /// The identity's configured short name.
        client: String,
    },
    /// The identity lacks the admin role `LockAdmin` needs.
    #[error("client {client:?} has no admin role (auth.admins); LockAdmin needs one")]
    NotAdmin {
        /// The identity's configured short name.
        client: String,
    },
    /// The identity's token bucket is empty.
    #[error("rate limit of {client:?} exceeded (limits.rate_per_second = {rate}); retry later")]
    RateLimited {
        /// The identity's short name (`anonymous` without auth).
        client: String,
        /// The configured rate.
        rate: u32,
    },
    /// Too many calls in progress on this connection.
    #[error(
        "too many calls in progress on this connection (limits.max_calls_per_connection = {max})"
    )]
    TooManyCalls {
        /// The configured cap.
        max: usize,
    },
    /// Too many health or reflection calls open (they come before
    /// authentication, so they share one bound instead of a per-identity one).
    #[error("limits.max_unauthenticated_calls reached: too many health or reflection calls open")]
    UnauthenticatedCalls {
        /// The configured cap (`limits.max_unauthenticated_calls`).
        max: usize,
    },
    /// The identity has its quota of open sessions or waiting
    /// acquisitions (`super::quota`).
    #[error("{client:?} has {max} {what} open already (limits.max_{what}_per_identity)")]
    IdentityQuota {
        /// The identity's short name (`anonymous` without auth).
        client: String,
        /// `sessions` or `waiters`.
        what: &'static str,
        /// The configured quota.
        max: usize,
    },
}

impl Denied {
    /// The `reason` label of `redlock_auth_denied_total`: a fixed, short
    /// kind, never a client, token or resource.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Denied::NoCredentials | Denied::BadCredentials => "unauthenticated",
            Denied::OutsideNamespaces { .. } | Denied::NotAdmin { .. } => "permission_denied",
            Denied::RateLimited { .. } => "rate_limited",
            Denied::TooManyCalls { .. } => "too_many_calls",
            Denied::UnauthenticatedCalls { .. } => "unauthenticated_calls",
            Denied::IdentityQuota { .. } => "identity_quota",
        }
    }

    /// Counts this refusal and hands it back, for `map_err`/`Err(..)`
    /// at the point where it is decided.
    pub(crate) fn counted(self) -> Denied {
        crate::metrics::auth_denied(self.reason());
        self
    }
}
