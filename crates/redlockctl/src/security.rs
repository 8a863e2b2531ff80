//! Reaching a secured daemon: TLS for `https://` addresses (a private CA
//! from `--cacert`, else the system's CA bundle; a client certificate for
//! mutual TLS from `--cert`/`--key`), and the bearer token from
//! `--token-file` or `REDLOCK_AUTH_TOKEN`, sent on every call. The token is
//! kept as a sensitive header value: nothing here prints or formats it.

use crate::args::SecurityArgs;
use crate::error::CtlError;
use std::path::{Path, PathBuf};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};
use tonic::{Request, Status};

/// The environment variable holding the bearer token (`REDLOCK_TOKEN` is
/// the lock's token, as `acquire` prints it).
pub(crate) const TOKEN_ENV: &str = "REDLOCK_AUTH_TOKEN";

/// Where the system's CA bundle usually is (Debian/Ubuntu/Alpine, Fedora/
/// RHEL, macOS/BSD, SUSE); `SSL_CERT_FILE` overrides them, as in OpenSSL.
const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
];

/// Adds `authorization: Bearer <token>` to every call, when there is a
/// token.
#[derive(Clone, Default)]
pub(crate) struct Auth {
    header: Option<MetadataValue<Ascii>>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let token = if self.header.is_some() {
            "Some(<redacted>)"
        } else {
            "None"
        };
        write!(f, "Auth {{ token: {token} }}")
    }
}

impl Interceptor for Auth {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(header) = &self.header {
            request
                .metadata_mut()
                .insert("authorization", header.clone());
        }
        Ok(request)
    }
}

impl Auth {
    /// The token from `--token-file`, else from [`TOKEN_ENV`], else none.
    pub(crate) fn from_args(args: &SecurityArgs) -> Result<Auth, CtlError> {
        let (token, source) = match &args.token_file {
            Some(path) => (
                read("--token-file", path)?,
                format!("--token-file {}", path.display()),
            ),
            None => match std::env::var(TOKEN_ENV) {
                Ok(token) => (token, TOKEN_ENV.to_owned()),
                Err(std::env::VarError::NotPresent) => return Ok(Auth::default()),
                Err(std::env::VarError::NotUnicode(_)) => {
                    return Err(CtlError::Usage(format!("{TOKEN_ENV} is not valid UTF-8")))
                }
            },
        };
        Auth::bearer(token.trim()).map_err(|why| CtlError::Usage(format!("{source}: {why}")))
    }

    /// Whether a token will be sent.
    pub(crate) fn has_token(&self) -> bool {
        self.header.is_some()
    }

    /// `authorization: Bearer <token>`; the reason when `token` cannot be
    /// sent (the reason never quotes it).
    fn bearer(token: &str) -> Result<Auth, &'static str> {
        if token.is_empty() {
            return Err("the token is empty");
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err("the token may hold only printable ASCII without spaces");
        }
        let mut header = MetadataValue::try_from(format!("Bearer {token}"))
            .map_err(|_| "the token cannot be sent as a header")?;
        header.set_sensitive(true);
        Ok(Auth {
            header: Some(header),
        })
    }
}

/// Whether `host` (from a URL) is this machine, where plaintext stays
/// local.
pub(crate) fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The TLS settings for an `https://` address; `None` for `http://`, where
/// the TLS flags make no sense (a usage error, rather than sending a token
/// in the clear that the user meant to protect).
pub(crate) fn tls(https: bool, args: &SecurityArgs) -> Result<Option<ClientTlsConfig>, CtlError> {
    if !https {
        let given = [
            ("--cacert", &args.cacert),
            ("--cert", &args.cert),
            ("--key", &args.key),
        ];
        if let Some((flag, _)) = given.iter().find(|(_, path)| path.is_some()) {
            return Err(CtlError::Usage(format!(
                "{flag} is for TLS: give --addr as https://HOST:PORT"
            )));
        }
        return Ok(None);
    }
    let ca = match &args.cacert {
        Some(path) => pem("--cacert", path, "CERTIFICATE")?,
        None => system_bundle()?,
    };
    let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca));
    match (&args.cert, &args.key) {
        (Some(cert), Some(key)) => {
            let cert = pem("--cert", cert, "CERTIFICATE")?;
            let key = pem("--key", key, "PRIVATE KEY")?;
            config = config.identity(Identity::from_pem(cert, key));
        }
        (None, None) => {}
        (Some(_), None) => return Err(CtlError::Usage("--cert needs --key".into())),
        (None, Some(_)) => return Err(CtlError::Usage("--key needs --cert".into())),
    }
    Ok(Some(config))
}

/// The flags given, as the variables that stand for them (absolute paths:
/// the command `run` starts may change directory).
pub(crate) fn env(args: &SecurityArgs) -> Vec<(&'static str, String)> {
    [
        ("REDLOCK_CACERT", &args.cacert),
        ("REDLOCK_CERT", &args.cert),
        ("REDLOCK_KEY", &args.key),
        ("REDLOCK_TOKEN_FILE", &args.token_file),
    ]
    .into_iter()
    .filter_map(|(name, path)| {
        let path = path.as_ref()?;
        let path = std::path::absolute(path).unwrap_or_else(|_| path.clone());
        Some((name, path.to_string_lossy().into_owned()))
    })
    .collect()
}

/// The system's CA bundle, for an `https://` daemon without `--cacert`.
fn system_bundle() -> Result<String, CtlError> {
    if let Some(path) = std::env::var_os("SSL_CERT_FILE") {
        return pem("SSL_CERT_FILE", Path::new(&path), "CERTIFICATE");
    }
    match SYSTEM_BUNDLES
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
    {
        Some(path) => pem("the system CA bundle", &path, "CERTIFICATE"),
        None => Err(CtlError::Usage(format!(
            "https:// without --cacert trusts the system's CA bundle, but there is none \
             (looked for SSL_CERT_FILE and {}): give --cacert FILE",
            SYSTEM_BUNDLES.join(", ")
        ))),
    }
}

/// A PEM file that must hold a `-----BEGIN ...{label}-----` block.
fn pem(flag: &str, path: &Path, label: &str) -> Result<String, CtlError> {
    let text = read(flag, path)?;
    let holds = text
        .lines()
        .any(|line| line.starts_with("-----BEGIN ") && line.contains(label));
    if !holds {
        return Err(CtlError::File {
            flag: flag.to_owned(),
            path: path.to_owned(),
            reason: format!("no PEM {label} in it"),
        });
    }
    Ok(text)
}

/// A file's text, or an error naming the flag it came from.
fn read(flag: &str, path: &Path) -> Result<String, CtlError> {
    std::fs::read_to_string(path).map_err(|error| CtlError::File {
        flag: flag.to_owned(),
        path: path.to_owned(),
        reason: error.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> SecurityArgs {
        SecurityArgs {
            cacert: None,
            cert: None,
            key: None,
            token_file: None,
        }
    }

    /// Tokens go out as `Bearer <token>`, marked sensitive, and Debug
    /// never shows them.
    #[test]
    fn bearer_header() {
        let auth = Auth::bearer("s3cr3t-token").expect("valid");
        let header = auth.header.clone().expect("header");
        assert_eq!(header.to_str().ok(), Some("Bearer s3cr3t-token"));
        assert!(header.is_sensitive());
        assert!(!format!("{auth:?}").contains("s3cr3t"));
        assert!(Auth::bearer("").is_err());
        assert!(Auth::bearer("two words").is_err());
        assert!(Auth::bearer("caf\u{e9}").is_err());
    }

    /// Unreadable or wrong files are named with their flag.
    #[test]
    fn file_errors_name_the_flag() {
        let dir = std::env::temp_dir().join(format!("redlockctl-security-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let not_pem = dir.join("not.pem");
        std::fs::write(&not_pem, "hello").expect("write");
        let mut a = args();
        a.cacert = Some(dir.join("missing.pem"));
        let error = tls(true, &a).expect_err("missing");
        assert!(error.to_string().starts_with("--cacert "), "{error}");
        a.cacert = Some(not_pem.clone());
        let error = tls(true, &a).expect_err("not PEM");
        assert!(error.to_string().contains("no PEM CERTIFICATE"), "{error}");
        let mut a = args();
        a.token_file = Some(dir.join("missing-token"));
        let error = Auth::from_args(&a).expect_err("missing");
        assert!(error.to_string().starts_with("--token-file "), "{error}");
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Loopback hosts as URLs spell them.
    #[test]
    fn loopback_hosts() {
        for host in [
            "127.0.0.1",
            "127.1.2.3",
            "[::1]",
            "::1",
            "localhost",
            "LocalHost",
        ] {
            assert!(is_loopback(host), "{host}");
        }
        for host in ["10.0.0.1", "locks.internal", "[2001:db8::1]", ""] {
            assert!(!is_loopback(host), "{host}");
        }
    }

    /// TLS flags with an http:// address are a mistake, not ignored.
    #[test]
    fn tls_flags_need_https() {
        let mut a = args();
        assert!(tls(false, &a).expect("plain").is_none());
        a.cacert = Some("ca.pem".into());
        let error = tls(false, &a).expect_err("http with --cacert");
        assert!(error.to_string().contains("https://"), "{error}");
    }
}
