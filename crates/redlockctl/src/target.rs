//! The daemon to talk to, from the command line: `--addr`, the TLS flags
//! (`--cacert`, and `--cert`/`--key` for mutual TLS), the bearer token
//! (`--token-file` or `REDLOCK_AUTH_TOKEN`), `--timeout`; as the client
//! crate's builder (`redlockd_client::ClientBuilder`), which does the TLS,
//! the token's header and the connection; and as the environment that
//! `run`'s command inherits, so that it can call redlockctl the same way.
//! Files are read here, so that a bad one is named by its flag; the token
//! is never printed.

use crate::args::SecurityArgs;
use crate::error::{chain, CtlError};
use redlockd_client::{Client, ClientBuilder, Error};
use std::cell::RefCell;
use std::path::Path;
use std::time::Duration;

/// The environment variable holding the bearer token (`REDLOCK_TOKEN` is
/// the lock's token, as `acquire` prints it).
pub(crate) const TOKEN_ENV: &str = "REDLOCK_AUTH_TOKEN";

/// Longest a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The daemon to talk to, and how (TLS, token).
#[derive(Debug, Clone)]
pub(crate) struct Target {
    /// The URL, as connected to and as passed to `run`'s command.
    pub url: String,
    /// The TLS and token-file settings as environment variables, so that
    /// `run`'s command can call redlockctl the same way.
    pub env: Vec<(&'static str, String)>,
    /// Everything needed to connect; `Debug` redacts the token and key.
    builder: ClientBuilder,
}

impl Target {
    /// Parses `--addr`: `http://HOST:PORT`, or `HOST:PORT` meaning the same,
    /// or `https://HOST:PORT` with the TLS flags; reads the files and the
    /// token, and checks every setting (no connection yet). Call it inside
    /// the runtime.
    pub(crate) fn parse(
        addr: &str,
        timeout: Duration,
        security: &SecurityArgs,
    ) -> Result<Target, CtlError> {
        let url = if addr.contains("://") {
            addr.to_owned()
        } else {
            format!("http://{addr}")
        };
        let https = url.starts_with("https://");
        if !https && !url.starts_with("http://") {
            return Err(CtlError::Usage(format!(
                "--addr {addr}: give http://HOST:PORT or https://HOST:PORT"
            )));
        }
        let mut builder = Client::builder(url.as_str())
            .call_timeout(timeout)
            .connect_timeout(timeout.min(CONNECT_TIMEOUT));
        builder = tls(builder, https, security)?;
        let token = token(security)?;
        if let Some((token, _)) = &token {
            builder = builder.bearer_token(token.as_str());
        }
        // Every setting checked now, before anything is sent.
        if let Err(error) = builder.clone().connect_lazy() {
            return Err(refused(error, token.as_ref().map(|(_, source)| source)));
        }
        let host = url
            .parse::<tonic::codegen::http::Uri>()
            .ok()
            .and_then(|uri| uri.host().map(str::to_owned))
            .unwrap_or_default();
        if token.is_some() && !https && !is_loopback(&host) {
            eprintln!(
                "redlockctl: warning: sending the bearer token to {host} over plaintext \
                 http:// (use https:// so that it cannot be read on the way)"
            );
        }
        Ok(Target {
            url,
            env: env(security),
            builder,
        })
    }

    /// A new connection for one round of a wait, kept in `last` for
    /// [`interrupted`].
    pub(crate) async fn connect_round(
        &self,
        last: &RefCell<Option<Client>>,
    ) -> Result<Client, CtlError> {
        let client = self.connect().await?;
        last.replace(Some(client.clone()));
        Ok(client)
    }

    /// A new connection to the daemon (every service of it goes through
    /// it, with the token).
    pub(crate) async fn connect(&self) -> Result<Client, CtlError> {
        self.builder
            .clone()
            .connect()
            .await
            .map_err(|error| match error {
                Error::Unavailable(status) => CtlError::Connect {
                    addr: self.url.clone(),
                    reason: std::error::Error::source(&status)
                        .map_or_else(|| status.message().to_owned(), chain),
                },
                Error::InvalidArgument(_) => refused(error, None),
                other => CtlError::Local(other.to_string()),
            })
    }
}

/// After a wait interrupted by a signal: waits for the background releases
/// of the last round's client (the client crate releases, bounded by a
/// second, what a call dropped mid-wait may have got an instant before).
pub(crate) async fn interrupted(last: &RefCell<Option<Client>>) {
    if let Some(client) = last.take() {
        client.close().await;
    }
}

/// A setting the client crate refused, as a usage error naming the flag
/// it came from (`token_source`: where the token came from).
fn refused(error: Error, token_source: Option<&String>) -> CtlError {
    let field = error.field().map(str::to_owned);
    let message = error.status().message();
    let reason = message
        .split_once(": ")
        .map_or(message, |(_, reason)| reason);
    CtlError::Usage(match (field.as_deref(), token_source) {
        (Some("bearer_token"), Some(source)) => format!("{source}: the token {reason}"),
        (Some("ca_certificate"), _) => {
            format!("https:// without --cacert: {reason}; give --cacert FILE")
        }
        (Some("client_identity"), _) => format!("--cert, --key: {reason}"),
        (Some("addr"), _) => format!("--addr: {reason}"),
        _ => message.to_owned(),
    })
}

/// The TLS settings for an `https://` address (the system's CA bundle
/// unless `--cacert`); for `http://` the TLS flags are a usage error,
/// rather than a token sent in the clear that the user meant to protect.
fn tls(
    builder: ClientBuilder,
    https: bool,
    args: &SecurityArgs,
) -> Result<ClientBuilder, CtlError> {
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
        return Ok(builder);
    }
    let mut builder = builder;
    if let Some(path) = &args.cacert {
        builder = builder.ca_certificate(pem("--cacert", path, "CERTIFICATE")?);
    }
    match (&args.cert, &args.key) {
        (Some(cert), Some(key)) => Ok(builder.client_identity(
            pem("--cert", cert, "CERTIFICATE")?,
            pem("--key", key, "PRIVATE KEY")?,
        )),
        (None, None) => Ok(builder),
        (Some(_), None) => Err(CtlError::Usage("--cert needs --key".into())),
        (None, Some(_)) => Err(CtlError::Usage("--key needs --cert".into())),
    }
}

/// The token from `--token-file`, else from [`TOKEN_ENV`], else none;
/// with where it came from, for messages (never the token itself).
fn token(args: &SecurityArgs) -> Result<Option<(String, String)>, CtlError> {
    let (token, source) = match &args.token_file {
        Some(path) => (
            read("--token-file", path)?,
            format!("--token-file {}", path.display()),
        ),
        None => match std::env::var(TOKEN_ENV) {
            Ok(token) => (token, TOKEN_ENV.to_owned()),
            Err(std::env::VarError::NotPresent) => return Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => {
                return Err(CtlError::Usage(format!("{TOKEN_ENV} is not valid UTF-8")))
            }
        },
    };
    Ok(Some((token.trim().to_owned(), source)))
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

/// The flags given, as the variables that stand for them (absolute paths:
/// the command `run` starts may change directory).
fn env(args: &SecurityArgs) -> Vec<(&'static str, String)> {
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

    /// Unreadable or wrong files are named with their flag; a token the
    /// client crate refuses is named by its source, never quoted.
    #[tokio::test]
    async fn file_errors_name_the_flag() {
        let dir = std::env::temp_dir().join(format!("redlockctl-target-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let not_pem = dir.join("not.pem");
        std::fs::write(&not_pem, "hello").expect("write");
        let https = "https://127.0.0.1:1";
        let parse = |a: &SecurityArgs| Target::parse(https, Duration::from_secs(1), a);
        let mut a = args();
        a.cacert = Some(dir.join("missing.pem"));
        let error = parse(&a).expect_err("missing");
        assert!(error.to_string().starts_with("--cacert "), "{error}");
        a.cacert = Some(not_pem.clone());
        let error = parse(&a).expect_err("not PEM");
        assert!(error.to_string().contains("no PEM CERTIFICATE"), "{error}");
        let mut a = args();
        a.token_file = Some(dir.join("missing-token"));
        let error = parse(&a).expect_err("missing");
        assert!(error.to_string().starts_with("--token-file "), "{error}");
        let spaced = dir.join("spaced-token");
        std::fs::write(&spaced, "s3cr3t words\n").expect("write");
        a.token_file = Some(spaced);
        let error = parse(&a).expect_err("a token with a space");
        let shown = error.to_string();
        assert!(shown.starts_with("--token-file "), "{shown}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
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

    /// TLS flags with an http:// address are a mistake, not ignored; a
    /// bare HOST:PORT is http://.
    #[tokio::test]
    async fn tls_flags_need_https() {
        let mut a = args();
        let plain = Target::parse("127.0.0.1:1", Duration::from_secs(1), &a).expect("plain");
        assert_eq!(plain.url, "http://127.0.0.1:1");
        a.cacert = Some("ca.pem".into());
        let error = Target::parse("127.0.0.1:1", Duration::from_secs(1), &a)
            .expect_err("http with --cacert");
        assert!(error.to_string().contains("https://"), "{error}");
        let error = Target::parse("unix:///x", Duration::from_secs(1), &args())
            .expect_err("another scheme");
        assert!(error.to_string().starts_with("--addr "), "{error}");
    }
}
