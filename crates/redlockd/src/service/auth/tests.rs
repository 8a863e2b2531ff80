//! The gatekeeper's identities: bearer tokens, certificate subjectAltNames,
//! namespaces.

use super::*;
use crate::config::ClientConfig;

/// The client `orders`, with a bearer token, limited to `orders/`.
fn orders() -> ClientConfig {
    ClientConfig {
        max_sessions: None,
        max_waiters: None,
        name: "orders".into(),
        token_sha256: Some(token_sha256("secret-orders")),
        certificate_san: None,
        namespaces: vec!["orders/".into()],
    }
}

fn keeper() -> Gatekeeper {
    let auth = AuthConfig {
        admins: Vec::new(),
        clients: vec![orders()],
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
    let id = k
        .authenticate(&with_auth("Bearer secret-orders"), None)
        .unwrap();
    assert_eq!(&*id.name, "orders");
    assert_eq!(
        k.authenticate(&MetadataMap::new(), None).unwrap_err(),
        Denied::NoCredentials
    );
    assert_eq!(
        k.authenticate(&with_auth("Basic x"), None).unwrap_err(),
        Denied::NoCredentials
    );
    assert_eq!(
        k.authenticate(&with_auth("Bearer nope"), None).unwrap_err(),
        Denied::BadCredentials
    );
}

/// A self-signed certificate (the chain is the handshake's business)
/// with the given subjectAltNames, as DER.
fn certificate(sans: Vec<rcgen::SanType>) -> CertificateDer<'static> {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.subject_alt_names = sans;
    params.self_signed(&key).expect("certificate").der().clone()
}

fn dns(name: &str) -> rcgen::SanType {
    rcgen::SanType::DnsName(name.try_into().expect("dns"))
}

fn uri(name: &str) -> rcgen::SanType {
    rcgen::SanType::URI(name.try_into().expect("uri"))
}

/// Certificate identities: a DNS SAN matches without regard to case, a
/// URI SAN exactly; an unknown or ambiguous certificate is refused; a
/// bearer token, when sent, decides alone.
#[test]
fn certificate_identities() {
    let client = |name: &str, san: &str| ClientConfig {
        max_sessions: None,
        max_waiters: None,
        name: name.into(),
        token_sha256: None,
        certificate_san: Some(san.into()),
        namespaces: vec![format!("{name}/")],
    };
    let auth = AuthConfig {
        admins: Vec::new(),
        clients: vec![
            client("jobs", "jobs.clients.test"),
            client("batch", "spiffe://example.test/batch"),
            orders(),
        ],
    };
    let k = Gatekeeper::new(&auth, &LimitsConfig::default());
    let name = |certs: &[CertificateDer<'_>], meta: &MetadataMap| {
        k.authenticate(meta, Some(certs))
            .map(|id| id.name.to_string())
    };
    let none = MetadataMap::new();
    let jobs = certificate(vec![dns("other.test"), dns("JOBS.clients.test")]);
    assert_eq!(name(std::slice::from_ref(&jobs), &none).unwrap(), "jobs");
    let batch = certificate(vec![uri("spiffe://example.test/batch")]);
    assert_eq!(name(&[batch], &none).unwrap(), "batch");
    let batch_case = certificate(vec![uri("spiffe://example.test/BATCH")]);
    assert_eq!(name(&[batch_case], &none), Err(Denied::BadCredentials));
    let stranger = certificate(vec![dns("stranger.clients.test")]);
    assert_eq!(name(&[stranger], &none), Err(Denied::BadCredentials));
    let both = certificate(vec![
        dns("jobs.clients.test"),
        uri("spiffe://example.test/batch"),
    ]);
    assert_eq!(name(&[both], &none), Err(Denied::BadCredentials));
    let garbage = CertificateDer::from(vec![0x30, 0x03, 1, 2, 3]);
    assert_eq!(name(&[garbage], &none), Err(Denied::BadCredentials));
    assert_eq!(name(&[], &none), Err(Denied::NoCredentials));
    assert_eq!(
        name(
            std::slice::from_ref(&jobs),
            &with_auth("Bearer secret-orders")
        )
        .unwrap(),
        "orders"
    );
    assert_eq!(
        name(&[jobs], &with_auth("Bearer nope")),
        Err(Denied::BadCredentials)
    );
}

/// Without certificate clients a certificate alone is no credential.
#[test]
fn certificate_without_certificate_clients() {
    let cert = certificate(vec![dns("orders")]);
    assert_eq!(
        keeper()
            .authenticate(&MetadataMap::new(), Some(&[cert]))
            .unwrap_err(),
        Denied::NoCredentials
    );
}

/// Namespaces are prefixes; off means everything.
#[test]
fn namespaces() {
    let id = keeper()
        .authenticate(&with_auth("bearer secret-orders"), None)
        .unwrap();
    assert!(id.permit("orders/42").is_ok());
    assert!(id.permit("ordersX").is_err());
    assert!(id.permit("jobs/1").is_err());
    assert!(Identity::anonymous().permit("anything").is_ok());
}
