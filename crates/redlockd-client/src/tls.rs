//! TLS to the daemon: a private CA (or the system's CA bundle, found as
//! OpenSSL finds it), a client certificate for mutual TLS, the name the
//! daemon's certificate must carry. Settings are checked here, naming the
//! one that is wrong, before any connection.

use crate::error::Error;
use std::path::{Path, PathBuf};
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

/// Where the system's CA bundle usually is (Debian/Ubuntu/Alpine, Fedora/
/// RHEL, macOS/BSD, SUSE); `SSL_CERT_FILE` overrides them, as in OpenSSL.
const SYSTEM_BUNDLES: [&str; 4] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
];

/// The TLS settings: the CA given (`ca_pem`, else the system's bundle), the
/// client identity (certificate and key), the server's name.
pub(crate) fn config(
    ca_pem: Option<&[u8]>,
    identity: Option<(&[u8], &[u8])>,
    domain_name: Option<&str>,
) -> Result<ClientTlsConfig, Error> {
    let ca = match ca_pem {
        Some(pem) => pem.to_vec(),
        None => system_bundle()?,
    };
    if !holds_pem(&ca, "CERTIFICATE") {
        return Err(Error::invalid("ca_certificate", "no PEM CERTIFICATE in it"));
    }
    let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca));
    if let Some((cert, key)) = identity {
        if !holds_pem(cert, "CERTIFICATE") {
            return Err(Error::invalid(
                "client_identity",
                "no PEM CERTIFICATE in the certificate",
            ));
        }
        if !holds_pem(key, "PRIVATE KEY") {
            return Err(Error::invalid(
                "client_identity",
                "no PEM PRIVATE KEY in the key",
            ));
        }
        config = config.identity(Identity::from_pem(cert, key));
    }
    if let Some(name) = domain_name {
        config = config.domain_name(name);
    }
    Ok(config)
}

/// Whether `pem` holds a `-----BEGIN ...{label}-----` block.
fn holds_pem(pem: &[u8], label: &str) -> bool {
    String::from_utf8_lossy(pem)
        .lines()
        .any(|line| line.starts_with("-----BEGIN ") && line.contains(label))
}

/// The system's CA bundle, for `https://` without a CA certificate.
fn system_bundle() -> Result<Vec<u8>, Error> {
    let path = match std::env::var_os("SSL_CERT_FILE") {
        Some(path) => PathBuf::from(path),
        None => SYSTEM_BUNDLES
            .iter()
            .map(Path::new)
            .find(|p| p.is_file())
            .map(Path::to_path_buf)
            .ok_or_else(|| {
                Error::invalid(
                    "ca_certificate",
                    format!(
                        "TLS without a CA certificate trusts the system's CA bundle, but there is \
                         none (looked for SSL_CERT_FILE and {})",
                        SYSTEM_BUNDLES.join(", ")
                    ),
                )
            })?,
    };
    std::fs::read(&path)
        .map_err(|e| Error::invalid("ca_certificate", format!("{}: {e}", path.display())))
}
