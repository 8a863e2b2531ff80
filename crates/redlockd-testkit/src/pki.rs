//! Certificates for TLS tests, generated per test (rcgen): a private CA
//! and a certificate it signed for `localhost` and `127.0.0.1`, usable as a
//! daemon's server certificate or as a client's mutual-TLS identity.

use std::path::{Path, PathBuf};

/// A CA and one certificate it signed, all in PEM.
pub struct Pki {
    /// The CA's certificate: what a peer must trust.
    pub ca: String,
    /// The signed certificate (SANs `localhost`, `127.0.0.1`).
    pub cert: String,
    /// The signed certificate's private key.
    pub key: String,
}

impl Pki {
    /// A fresh CA and certificate.
    pub fn new() -> Pki {
        let ca_key = rcgen::KeyPair::generate().expect("key");
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        // Distinct subject names: with rcgen's one default name on both,
        // OpenSSL (curl, PHP) takes the leaf for self-signed and refuses it.
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "redlockd test CA");
        let ca = ca_params.self_signed(&ca_key).expect("CA");
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
            .expect("params");
        let mut params = params;
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "localhost");
        let cert = params.signed_by(&key, &issuer).expect("signed");
        Pki {
            ca: ca.pem(),
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    /// Writes `NAME-ca.pem`, `NAME.pem` and `NAME.key` into `dir`.
    pub fn write(&self, dir: &Path, name: &str) -> PkiFiles {
        let file = |suffix: &str, text: &str| {
            let path = dir.join(format!("{name}{suffix}"));
            std::fs::write(&path, text).expect("write a PEM file");
            path
        };
        PkiFiles {
            ca: file("-ca.pem", &self.ca),
            cert: file(".pem", &self.cert),
            key: file(".key", &self.key),
        }
    }
}

impl Default for Pki {
    fn default() -> Pki {
        Pki::new()
    }
}

/// Where [`Pki::write`] put the files.
pub struct PkiFiles {
    /// The CA's certificate.
    pub ca: PathBuf,
    /// The signed certificate.
    pub cert: PathBuf,
    /// Its private key.
    pub key: PathBuf,
}
