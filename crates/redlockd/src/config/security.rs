//! The security settings: client identities and their namespaces
//! (`[auth]`), per-identity and per-connection limits (`[limits]`, in
//! `limits.rs`), and TLS for the gRPC port (`[server.tls]`).
//!
//! Client tokens are stored as SHA-256 hashes, never in plain text. A slow
//! password hash (argon2, bcrypt) is unnecessary here: those protect
//! *low-entropy* human passwords against offline guessing. A client token is
//! meant to be a random string of at least 128 bits (e.g. `openssl rand -hex
//! 32`), so inverting its SHA-256 by brute force is out of reach no matter
//! how fast one hash is, and a fast hash keeps every call cheap.

use super::validate::invalid;
use super::ConfigError;
use serde::Deserialize;
use std::fmt;
use std::path::PathBuf;

/// The `[auth]` section: who may call, and on which resources.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// The known clients (`[[auth.clients]]`). Empty (the default): no
    /// authentication, every caller may use every resource. Non-empty:
    /// every call must carry `authorization: Bearer <token>` of one of them,
    /// or come over a connection whose verified client certificate names
    /// one of them (`certificate_san`).
    pub clients: Vec<ClientConfig>,
    /// Names of clients (`auth.clients.name`) with the admin role: only
    /// they may call `LockAdmin` (Inspect, List, ForceRelease) when
    /// authentication is on. Empty (the default): nobody may. Without
    /// authentication every caller may.
    pub admins: Vec<String>,
}

/// One client identity: `[[auth.clients]]`. A client proves who it is in
/// exactly one way: a bearer token (`token_sha256`) or its mutual-TLS
/// client certificate (`certificate_san`).
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientConfig {
    /// A short name for logs and metrics (the only identity ever shown).
    pub name: String,
    /// Lower-case hex SHA-256 of the client's bearer token
    /// (`printf %s "$TOKEN" | sha256sum`). The token itself is never stored.
    /// Exactly one of this and `certificate_san` is set.
    #[serde(default)]
    pub token_sha256: Option<String>,
    /// A subjectAltName of the client's certificate, DNS
    /// (`orders.clients.example.com`, compared without regard to case) or
    /// URI (`spiffe://example.com/orders`, compared exactly): a call over a
    /// connection whose client certificate, verified against
    /// `server.tls.client_ca`, carries this name is this client, without a
    /// bearer token. Lets services that already have mTLS certificates skip
    /// distributing tokens. Needs `server.tls.client_ca`.
    #[serde(default)]
    pub certificate_san: Option<String>,
    /// Resource prefixes this client may lock, e.g. `["orders/", "jobs/"]`.
    /// A call on any other resource gets PERMISSION_DENIED. `""` allows
    /// everything (an administrator).
    pub namespaces: Vec<String>,
    /// This client's own `limits.max_sessions_per_identity`: a batch
    /// service that holds many sessions can be given more than the
    /// default share, a small one less. Unset: the default.
    #[serde(default)]
    pub max_sessions: Option<usize>,
    /// This client's own `limits.max_waiters_per_identity`. Unset: the
    /// default.
    #[serde(default)]
    pub max_waiters: Option<usize>,
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A hash of a random token is not a secret, but there is no reason
        // to spread it through logs either.
        f.debug_struct("ClientConfig")
            .field("name", &self.name)
            .field("token_sha256", &self.token_sha256.as_ref().map(|_| "***"))
            .field("certificate_san", &self.certificate_san)
            .field("namespaces", &self.namespaces)
            .field("max_sessions", &self.max_sessions)
            .field("max_waiters", &self.max_waiters)
            .finish()
    }
}

/// Tokens a careless operator might use; a `token_sha256` of one of them
/// gets a start-up warning. Only these can be recognised: the hash hides
/// everything else, including the length of the original.
const WEAK_TOKENS: [&str; 16] = [
    "password",
    "secret",
    "token",
    "changeme",
    "admin",
    "test",
    "123456",
    "12345678",
    "qwerty",
    "letmein",
    "redlock",
    "redlockd",
    "default",
    "root",
    "guest",
    "Password1",
];

/// Whether `hash` (hex SHA-256) is that of a [`WEAK_TOKENS`] word: cheap
/// (16 hashes), and catches the obvious mistake; a random token cannot be
/// told from a weak one by its hash otherwise.
pub(crate) fn is_weak_token_hash(hash: &str) -> bool {
    use sha2::{Digest, Sha256};
    let hash = hash.to_ascii_lowercase();
    WEAK_TOKENS
        .iter()
        .any(|t| hex::encode(Sha256::digest(t.as_bytes())) == hash)
}

/// Longest accepted `auth.clients.name`: it becomes a metrics label.
pub(crate) const CLIENT_NAME_LIMIT: usize = 64;

/// Longest accepted `auth.clients.certificate_san`: longer than any DNS
/// name (253) and any sensible URI identity; bounds the per-call compare.
pub(crate) const CERTIFICATE_SAN_LIMIT: usize = 1024;

impl AuthConfig {
    /// Whether calls must authenticate.
    pub fn enabled(&self) -> bool {
        !self.clients.is_empty()
    }

    /// Checks every client; `tls` is needed because certificate identities
    /// only exist under mutual TLS.
    pub(super) fn validate(&self, tls: &TlsConfig) -> Result<(), ConfigError> {
        if let Some(unknown) = self
            .admins
            .iter()
            .find(|name| !self.clients.iter().any(|c| &c.name == *name))
        {
            return Err(invalid(
                "auth.admins",
                format!("{unknown:?} is not the name of a client in auth.clients"),
            ));
        }
        for (i, client) in self.clients.iter().enumerate() {
            let name_ok = !client.name.is_empty()
                && client.name.len() <= CLIENT_NAME_LIMIT
                && client
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            if !name_ok {
                return Err(invalid(
                    "auth.clients.name",
                    format!(
                        "client #{} ({:?}): 1 to {CLIENT_NAME_LIMIT} characters of [A-Za-z0-9._-] \
                         (it is a metrics label)",
                        i + 1,
                        client.name
                    ),
                ));
            }
            if self.clients[..i].iter().any(|c| c.name == client.name) {
                return Err(invalid(
                    "auth.clients.name",
                    format!("{:?} is listed twice", client.name),
                ));
            }
            match (&client.token_sha256, &client.certificate_san) {
                (Some(hash), None) => self.validate_token(i, hash)?,
                (None, Some(san)) => self.validate_certificate_san(i, san, tls)?,
                (None, None) => {
                    return Err(invalid(
                        "auth.clients.token_sha256",
                        format!(
                            "client {:?} has no credential: set token_sha256 (bearer token) \
                             or certificate_san (mutual-TLS client certificate)",
                            client.name
                        ),
                    ))
                }
                (Some(_), Some(_)) => {
                    return Err(invalid(
                        "auth.clients.certificate_san",
                        format!(
                            "client {:?} sets both token_sha256 and certificate_san: keep \
                             exactly one (list the client twice, under two names, to \
                             accept both)",
                            client.name
                        ),
                    ))
                }
            }
            if client.namespaces.is_empty() {
                return Err(invalid(
                    "auth.clients.namespaces",
                    format!(
                        "client {:?} has no namespace: it could not lock anything \
                         (use [\"\"] for every resource)",
                        client.name
                    ),
                ));
            }
            if client
                .namespaces
                .iter()
                .any(|n| n.chars().any(char::is_control))
            {
                return Err(invalid(
                    "auth.clients.namespaces",
                    format!("client {:?}: control characters", client.name),
                ));
            }
            for (key, value) in [
                ("auth.clients.max_sessions", client.max_sessions),
                ("auth.clients.max_waiters", client.max_waiters),
            ] {
                if value == Some(0) {
                    return Err(invalid(
                        key,
                        format!(
                            "client {:?}: must be at least 1 (remove it for the default)",
                            client.name
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

impl AuthConfig {
    fn validate_token(&self, i: usize, hash: &str) -> Result<(), ConfigError> {
        let name = &self.clients[i].name;
        let hash_ok = hash.len() == 64
            && hash
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase());
        if !hash_ok {
            return Err(invalid(
                "auth.clients.token_sha256",
                format!(
                    "client {name:?}: must be 64 lower-case hex digits (the SHA-256 of the \
                     token, never the token itself)"
                ),
            ));
        }
        if self.clients[..i]
            .iter()
            .any(|c| c.token_sha256.as_deref() == Some(hash))
        {
            return Err(invalid(
                "auth.clients.token_sha256",
                format!("client {name:?} has the same token as another client"),
            ));
        }
        Ok(())
    }

    fn validate_certificate_san(
        &self,
        i: usize,
        san: &str,
        tls: &TlsConfig,
    ) -> Result<(), ConfigError> {
        let name = &self.clients[i].name;
        if san.is_empty()
            || san.len() > CERTIFICATE_SAN_LIMIT
            || !san.chars().all(|c| c.is_ascii_graphic())
        {
            return Err(invalid(
                "auth.clients.certificate_san",
                format!(
                    "client {name:?}: 1 to {CERTIFICATE_SAN_LIMIT} printable ASCII characters \
                     without spaces: a DNS name or a URI from the certificate's subjectAltName"
                ),
            ));
        }
        if self.clients[..i].iter().any(|c| {
            c.certificate_san
                .as_deref()
                .is_some_and(|other| other.eq_ignore_ascii_case(san))
        }) {
            return Err(invalid(
                "auth.clients.certificate_san",
                format!("client {name:?} has the same certificate_san as another client"),
            ));
        }
        if tls.client_ca.is_none() {
            return Err(invalid(
                "auth.clients.certificate_san",
                format!(
                    "client {name:?} is identified by its certificate, but client \
                     certificates are only verified under mutual TLS: set \
                     server.tls.client_ca (with server.tls.cert and key), or give the client \
                     a token_sha256 instead"
                ),
            ));
        }
        Ok(())
    }
}

/// The `[server.tls]` section: TLS on the gRPC port.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsConfig {
    /// PEM certificate chain of the server. With `key`, turns TLS on.
    pub cert: Option<PathBuf>,
    /// PEM private key of `cert`.
    pub key: Option<PathBuf>,
    /// PEM CA bundle: when set, clients must present a certificate signed
    /// by it (mutual TLS); the handshake fails otherwise.
    pub client_ca: Option<PathBuf>,
}

impl TlsConfig {
    /// Whether the gRPC port speaks TLS.
    pub fn enabled(&self) -> bool {
        self.cert.is_some()
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        match (&self.cert, &self.key) {
            (Some(_), None) => Err(invalid(
                "server.tls.key",
                "is required with server.tls.cert",
            )),
            (None, Some(_)) => Err(invalid(
                "server.tls.cert",
                "is required with server.tls.key",
            )),
            (None, None) if self.client_ca.is_some() => Err(invalid(
                "server.tls.client_ca",
                "needs server.tls.cert and server.tls.key: client certificates are only \
                 checked over TLS",
            )),
            _ => Ok(()),
        }
    }
}

/// The `[masters]` section: how the daemon proves itself to the masters,
/// for every URL in `redlock.nodes` that does not carry its own
/// credentials. Secrets are read at start-up from a file or an environment
/// variable, so the config file itself holds none.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MastersConfig {
    /// ACL user name (Valkey/Redis 6+ `AUTH user password`); unset: the
    /// `default` user.
    pub username: Option<String>,
    /// File whose content (less a trailing newline) is the password, e.g. a
    /// mounted Kubernetes secret.
    pub password_file: Option<PathBuf>,
    /// Name of an environment variable holding the password.
    pub password_env: Option<String>,
    /// PEM CA bundle that `rediss://` masters' certificates must chain to;
    /// unset: the system's roots.
    pub tls_ca: Option<PathBuf>,
}

impl MastersConfig {
    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        if self.password_file.is_some() && self.password_env.is_some() {
            return Err(invalid(
                "masters.password_env",
                "set either masters.password_file or masters.password_env, not both",
            ));
        }
        if let Some(user) = &self.username {
            if user.is_empty() || user.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return Err(invalid(
                    "masters.username",
                    "must be non-empty, without whitespace or control characters",
                ));
            }
        }
        if self.password_env.as_deref() == Some("") {
            return Err(invalid("masters.password_env", "must name a variable"));
        }
        Ok(())
    }
}
