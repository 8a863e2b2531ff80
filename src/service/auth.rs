//! Who is calling, and on which resources they may act.
//!
//! [`Gatekeeper::check`] runs as a tonic interceptor, on the request's
//! headers only, before the message is even decoded: it authenticates the
//! bearer token (UNAUTHENTICATED), then charges the identity's rate limit
//! (RESOURCE_EXHAUSTED), and leaves the [`Identity`] in the request's
//! extensions. Each handler then checks the validated resource against the
//! identity's namespaces ([`Identity::permit`], PERMISSION_DENIED) before
//! the engine, and so any master, is asked.
//!
//! Tokens are compared as SHA-256 hashes in constant time, against every
//! configured client, so the time taken tells nothing about which byte or
//! which client almost matched.

use super::rate::RateLimits;
use crate::config::{AuthConfig, LimitsConfig};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use subtle::ConstantTimeEq;
use tonic::metadata::MetadataMap;
use tonic::{Request, Status};

/// Why a caller is turned away before its request is looked at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// No `authorization` metadata, or not `Bearer <token>`.
    #[error("missing credentials: send `authorization: Bearer <token>`")]
    NoCredentials,
    /// A bearer token no configured client has.
    #[error("invalid credentials")]
    BadCredentials,
    /// The identity may not act on this resource.
    #[error("resource: outside the namespaces of client {client:?}")]
    OutsideNamespaces {
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
}

/// The caller of one request: a configured client, or anyone when
/// authentication is off.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The configured short name, or `anonymous`.
    pub name: Arc<str>,
    /// Resource prefixes it may use; `None`: every resource.
    namespaces: Option<Arc<[String]>>,
}

impl Identity {
    /// The identity of every caller when authentication is off.
    pub fn anonymous() -> Identity {
        Identity {
            name: Arc::from("anonymous"),
            namespaces: None,
        }
    }

    /// A client named `name` limited to resources starting with one of
    /// `namespaces`.
    pub fn with_namespaces(name: &str, namespaces: Vec<String>) -> Identity {
        Identity {
            name: Arc::from(name),
            namespaces: Some(namespaces.into()),
        }
    }

    /// Whether this identity may act on `resource`.
    pub fn permit(&self, resource: &str) -> Result<(), Denied> {
        match &self.namespaces {
            None => Ok(()),
            Some(prefixes) if prefixes.iter().any(|p| resource.starts_with(p.as_str())) => Ok(()),
            Some(_) => Err(Denied::OutsideNamespaces {
                client: self.name.to_string(),
            }),
        }
    }
}

/// One configured client, as checked at run time.
#[derive(Debug)]
struct Client {
    token_sha256: [u8; 32],
    identity: Identity,
}

/// Authenticates and rate-limits every call; cheap to clone (shared state).
#[derive(Clone)]
pub struct Gatekeeper {
    clients: Arc<[Client]>,
    rates: Arc<RateLimits>,
}

impl Gatekeeper {
    /// From the validated configuration.
    pub fn new(auth: &AuthConfig, limits: &LimitsConfig) -> Gatekeeper {
        let clients = auth
            .clients
            .iter()
            .filter_map(|c| {
                let mut hash = [0u8; 32];
                // Validated as 64 hex digits by `Config::validate`.
                hex::decode_to_slice(&c.token_sha256, &mut hash).ok()?;
                Some(Client {
                    token_sha256: hash,
                    identity: Identity::with_namespaces(&c.name, c.namespaces.clone()),
                })
            })
            .collect();
        Gatekeeper {
            clients,
            rates: Arc::new(RateLimits::new(limits.rate_per_second, limits.burst)),
        }
    }

    /// Whether calls must authenticate.
    pub fn enabled(&self) -> bool {
        !self.clients.is_empty()
    }

    /// The caller's identity from its metadata.
    pub fn authenticate(&self, metadata: &MetadataMap) -> Result<Identity, Denied> {
        if !self.enabled() {
            return Ok(Identity::anonymous());
        }
        let token = bearer(metadata).ok_or(Denied::NoCredentials)?;
        let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        // Every client is compared, whichever matches, in constant time.
        let mut found = None;
        for client in self.clients.iter() {
            if bool::from(client.token_sha256.ct_eq(&presented)) {
                found = Some(&client.identity);
            }
        }
        found.cloned().ok_or(Denied::BadCredentials)
    }

    /// The interceptor: authenticates, charges the rate limit and stores the
    /// [`Identity`] in the request's extensions for the handler.
    pub fn check(&self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let identity = self.authenticate(request.metadata())?;
        // Without authentication each peer address is its own identity.
        let key = if self.enabled() {
            identity.name.to_string()
        } else {
            request
                .remote_addr()
                .map_or_else(|| "unknown".to_owned(), |a| a.ip().to_string())
        };
        self.rates.take(&key).map_err(|rate| Denied::RateLimited {
            client: identity.name.to_string(),
            rate,
        })?;
        request.extensions_mut().insert(identity);
        Ok(request)
    }

    /// The identity the interceptor stored; without one (a handler called
    /// directly, not through the server), anonymous if authentication is
    /// off, and refused if it is on: fail closed.
    pub fn identity_of<T>(&self, request: &Request<T>) -> Result<Identity, Denied> {
        match request.extensions().get::<Identity>() {
            Some(identity) => Ok(identity.clone()),
            None if self.enabled() => Err(Denied::NoCredentials),
            None => Ok(Identity::anonymous()),
        }
    }
}

/// The token of `authorization: Bearer <token>`, if well formed.
fn bearer(metadata: &MetadataMap) -> Option<&str> {
    let value = metadata.get("authorization")?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The hex SHA-256 of a token, as `auth.clients.token_sha256` expects it.
pub fn token_sha256(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClientConfig;

    fn keeper() -> Gatekeeper {
        let auth = AuthConfig {
            clients: vec![ClientConfig {
                name: "orders".into(),
                token_sha256: token_sha256("secret-orders"),
                namespaces: vec!["orders/".into()],
            }],
        };
        Gatekeeper::new(&auth, &LimitsConfig::default())
    }

    fn with_auth(value: &str) -> MetadataMap {
        let mut m = MetadataMap::new();
        m.insert("authorization", value.parse().expect("ascii"));
        m
    }

    /// The right token gives the client's identity; others are refused.
    #[test]
    fn bearer_tokens() {
        let k = keeper();
        let id = k.authenticate(&with_auth("Bearer secret-orders")).unwrap();
        assert_eq!(&*id.name, "orders");
        assert_eq!(
            k.authenticate(&MetadataMap::new()).unwrap_err(),
            Denied::NoCredentials
        );
        assert_eq!(
            k.authenticate(&with_auth("Basic x")).unwrap_err(),
            Denied::NoCredentials
        );
        assert_eq!(
            k.authenticate(&with_auth("Bearer nope")).unwrap_err(),
            Denied::BadCredentials
        );
    }

    /// Namespaces are prefixes; off means everything.
    #[test]
    fn namespaces() {
        let id = keeper()
            .authenticate(&with_auth("bearer secret-orders"))
            .unwrap();
        assert!(id.permit("orders/42").is_ok());
        assert!(id.permit("ordersX").is_err());
        assert!(id.permit("jobs/1").is_err());
        assert!(Identity::anonymous().permit("anything").is_ok());
    }
}
