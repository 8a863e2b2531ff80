//! Who is calling, and on which resources they may act.
//!
//! [`Gatekeeper::check`] runs as a tonic interceptor, on the request's
//! headers only, before the message is even decoded: it authenticates the
//! bearer token, or else the verified mTLS client certificate of the
//! connection (UNAUTHENTICATED), then charges the identity's rate limit
//! (RESOURCE_EXHAUSTED), and leaves the [`Identity`] in the request's
//! extensions. Each handler then checks the validated resource against the
//! identity's namespaces ([`Identity::permit`], PERMISSION_DENIED) before
//! the engine, and so any master, is asked.
//!
//! Tokens are compared as SHA-256 hashes in constant time, against every
//! configured client, so the time taken tells nothing about which byte or
//! which client almost matched. Certificates need no such care: rustls has
//! already verified the chain against `server.tls.client_ca` in the
//! handshake, and the names compared here are public.
//!
//! Every refusal is counted in `redlock_auth_denied_total` by its reason
//! ([`Denied::reason`]), where it is decided.

use super::denied::Denied;
use super::rate::RateLimits;
use crate::config::{AuthConfig, LimitsConfig};
use rustls::pki_types::CertificateDer;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use subtle::ConstantTimeEq;
use tonic::metadata::MetadataMap;
use tonic::{Request, Status};

/// Who a request is charged to for the rate limit and the per-identity
/// quotas: the client's name with authentication, the peer's IP address
/// without (each peer is then its own identity).
#[derive(Debug, Clone)]
pub(crate) struct QuotaKey(pub(crate) Arc<str>);

/// The caller of one request: a configured client, or anyone when
/// authentication is off.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The configured short name, or `anonymous`.
    pub name: Arc<str>,
    /// Resource prefixes it may use; `None`: every resource.
    namespaces: Option<Arc<[String]>>,
    /// Whether it may call `LockAdmin` (`auth.admins`).
    admin: bool,
}

impl Identity {
    /// The identity of every caller when authentication is off.
    pub fn anonymous() -> Identity {
        Identity {
            name: Arc::from("anonymous"),
            namespaces: None,
            admin: true,
        }
    }

    /// A client named `name` limited to resources starting with one of
    /// `namespaces`.
    pub fn with_namespaces(name: &str, namespaces: Vec<String>) -> Identity {
        Identity {
            name: Arc::from(name),
            namespaces: Some(namespaces.into()),
            admin: false,
        }
    }

    /// This identity with the admin role (`auth.admins`).
    pub(crate) fn into_admin(self) -> Identity {
        Identity {
            admin: true,
            ..self
        }
    }

    /// Whether this identity may call `LockAdmin`: an admin, or anyone
    /// when authentication is off.
    pub(crate) fn permit_admin(&self) -> Result<(), Denied> {
        match self.admin {
            true => Ok(()),
            false => Err(Denied::NotAdmin {
                client: self.name.to_string(),
            }
            .counted()),
        }
    }

    /// Whether this identity may act on `resource`.
    pub(crate) fn permit(&self, resource: &str) -> Result<(), Denied> {
        match &self.namespaces {
            None => Ok(()),
            Some(prefixes) if prefixes.iter().any(|p| resource.starts_with(p.as_str())) => Ok(()),
            Some(_) => Err(Denied::OutsideNamespaces {
                client: self.name.to_string(),
            }
            .counted()),
        }
    }
}

/// How a configured client proves who it is.
#[derive(Debug)]
enum Credential {
    /// The SHA-256 of its bearer token.
    Token([u8; 32]),
    /// A DNS or URI subjectAltName of its verified client certificate.
    CertificateSan(String),
}

/// One configured client, as checked at run time.
#[derive(Debug)]
struct Client {
    credential: Credential,
    identity: Identity,
}

/// Authenticates and rate-limits every call; cheap to clone (shared state).
#[derive(Clone)]
pub(crate) struct Gatekeeper {
    clients: Arc<[Client]>,
    rates: Arc<RateLimits>,
    /// Failed authentications are logged at most once per
    /// [`FAILURE_LOG_PERIOD`]: a client guessing tokens cannot flood the log.
    failures: Arc<crate::conn::Throttled>,
}

/// At most one log line per this period for failed authentications (each
/// line says how many were not logged).
const FAILURE_LOG_PERIOD: std::time::Duration = std::time::Duration::from_secs(10);

impl Gatekeeper {
    /// From the validated configuration.
    pub(crate) fn new(auth: &AuthConfig, limits: &LimitsConfig) -> Gatekeeper {
        let clients = auth
            .clients
            .iter()
            .filter_map(|c| {
                // Exactly one credential, a hash of 64 hex digits: checked
                // by `Config::validate`; a client without a usable one is
                // left out (it could never authenticate anyway).
                let credential = match (&c.token_sha256, &c.certificate_san) {
                    (Some(hex_hash), None) => {
                        let mut hash = [0u8; 32];
                        hex::decode_to_slice(hex_hash, &mut hash).ok()?;
                        Credential::Token(hash)
                    }
                    (None, Some(san)) => Credential::CertificateSan(san.clone()),
                    _ => return None,
                };
                let identity = Identity::with_namespaces(&c.name, c.namespaces.clone());
                let identity = match auth.admins.contains(&c.name) {
                    true => identity.into_admin(),
                    false => identity,
                };
                Some(Client {
                    credential,
                    identity,
                })
            })
            .collect();
        Gatekeeper {
            clients,
            rates: Arc::new(RateLimits::new(limits.rate_per_second, limits.burst)),
            failures: Arc::new(crate::conn::Throttled::new(FAILURE_LOG_PERIOD)),
        }
    }

    /// Whether calls must authenticate.
    pub(crate) fn enabled(&self) -> bool {
        !self.clients.is_empty()
    }

    /// The caller's identity from its metadata and the client certificate
    /// chain its connection presented (end-entity first, already verified
    /// by the TLS handshake). A bearer token, when sent, decides alone;
    /// without one, the certificate's subjectAltNames must name exactly one
    /// client configured with `certificate_san`.
    pub(crate) fn authenticate(
        &self,
        metadata: &MetadataMap,
        peer_certs: Option<&[CertificateDer<'_>]>,
    ) -> Result<Identity, Denied> {
        if !self.enabled() {
            return Ok(Identity::anonymous());
        }
        if let Some(token) = bearer(metadata) {
            return self.by_token(token);
        }
        let has_certificate_clients = self
            .clients
            .iter()
            .any(|c| matches!(c.credential, Credential::CertificateSan(_)));
        match peer_certs.and_then(<[_]>::first) {
            Some(leaf) if has_certificate_clients => self.by_certificate(leaf),
            _ => Err(Denied::NoCredentials),
        }
    }

    /// The client whose token hashes to the same SHA-256 as `token`.
    fn by_token(&self, token: &str) -> Result<Identity, Denied> {
        let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        // Every token client is compared, whichever matches, in constant time.
        let mut found = None;
        for client in self.clients.iter() {
            if let Credential::Token(hash) = &client.credential {
                if bool::from(hash.ct_eq(&presented)) {
                    found = Some(&client.identity);
                }
            }
        }
        found.cloned().ok_or(Denied::BadCredentials)
    }

    /// The one client whose `certificate_san` is among the subjectAltNames
    /// of `leaf`; none or several: refused.
    fn by_certificate(&self, leaf: &CertificateDer<'_>) -> Result<Identity, Denied> {
        let names = certificate_names(leaf).ok_or(Denied::BadCredentials)?;
        let mut matching = self
            .clients
            .iter()
            .filter(|client| match &client.credential {
                Credential::CertificateSan(san) => names.iter().any(|name| name.matches(san)),
                Credential::Token(_) => false,
            });
        match (matching.next(), matching.next()) {
            (Some(client), None) => Ok(client.identity.clone()),
            _ => Err(Denied::BadCredentials),
        }
    }

    /// The interceptor: authenticates, charges the rate limit and stores the
    /// [`Identity`] in the request's extensions for the handler.
    pub(crate) fn check(&self, request: Request<()>) -> Result<Request<()>, Status> {
        let peer_certs = request.peer_certs();
        self.check_with_certs(request, peer_certs.as_deref().map(Vec::as_slice))
    }

    /// [`Gatekeeper::check`] with the connection's verified client
    /// certificates given, for the HTTP/JSON gateway, whose connections
    /// tonic does not see.
    pub(crate) fn check_with_certs(
        &self,
        mut request: Request<()>,
        peer_certs: Option<&[CertificateDer<'_>]>,
    ) -> Result<Request<()>, Status> {
        let identity = match self.authenticate(request.metadata(), peer_certs) {
            Ok(identity) => identity,
            Err(denied) => {
                // The peer and the reason only: never the token offered.
                if let Some(not_logged) = self.failures.ready() {
                    tracing::warn!(
                        peer = %request
                            .remote_addr()
                            .map_or_else(|| "unknown".to_owned(), |a| a.to_string()),
                        reason = %denied,
                        not_logged,
                        "authentication failed"
                    );
                }
                return Err(denied.counted().into());
            }
        };
        // Without authentication each peer address is its own identity.
        let key = if self.enabled() {
            identity.name.to_string()
        } else {
            request
                .remote_addr()
                .map_or_else(|| "unknown".to_owned(), |a| a.ip().to_string())
        };
        self.rates.take(&key).map_err(|rate| {
            Denied::RateLimited {
                client: identity.name.to_string(),
                rate,
            }
            .counted()
        })?;
        request.extensions_mut().insert(identity);
        request.extensions_mut().insert(QuotaKey(Arc::from(key)));
        Ok(request)
    }

    /// The key of the caller's per-identity quotas: the one the
    /// interceptor stored (the rate limit's key), else the identity's name.
    pub(crate) fn quota_key_of<T>(request: &Request<T>, identity: &Identity) -> Arc<str> {
        request
            .extensions()
            .get::<QuotaKey>()
            .map_or_else(|| Arc::clone(&identity.name), |k| Arc::clone(&k.0))
    }

    /// The identity the interceptor stored; without one (a handler called
    /// directly, not through the server), anonymous if authentication is
    /// off, and refused if it is on: fail closed.
    pub(crate) fn identity_of<T>(&self, request: &Request<T>) -> Result<Identity, Denied> {
        match request.extensions().get::<Identity>() {
            Some(identity) => Ok(identity.clone()),
            None if self.enabled() => Err(Denied::NoCredentials.counted()),
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

/// One identifying subjectAltName of a client certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
enum SanName {
    /// A DNS name: compared without regard to ASCII case, as DNS does.
    Dns(String),
    /// A URI (e.g. a SPIFFE ID): compared exactly.
    Uri(String),
}

impl SanName {
    /// Whether a configured `certificate_san` names this.
    fn matches(&self, configured: &str) -> bool {
        match self {
            SanName::Dns(name) => name.eq_ignore_ascii_case(configured),
            SanName::Uri(uri) => uri == configured,
        }
    }
}

/// The DNS and URI subjectAltNames of a DER certificate; `None` if it does
/// not parse or its subjectAltName extension is malformed or repeated.
fn certificate_names(der: &CertificateDer<'_>) -> Option<Vec<SanName>> {
    use x509_parser::extensions::GeneralName;
    let (_, certificate) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    let Some(san) = certificate.subject_alternative_name().ok()? else {
        return Some(Vec::new());
    };
    Some(
        san.value
            .general_names
            .iter()
            .filter_map(|name| match name {
                GeneralName::DNSName(dns) => Some(SanName::Dns((*dns).to_owned())),
                GeneralName::URI(uri) => Some(SanName::Uri((*uri).to_owned())),
                _ => None,
            })
            .collect(),
    )
}

/// The hex SHA-256 of a token, as `auth.clients.token_sha256` expects it.
pub fn token_sha256(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests;
