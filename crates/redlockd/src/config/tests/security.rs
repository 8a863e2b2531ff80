//! The security keys: `[auth]`, `[server.tls]`, `server.max_request_bytes`
//! and the flood limits; and property tests of parsing: any TOML text
//! either loads or is refused with an error, never a panic.

use std::collections::HashMap;

use proptest::prelude::*;

use super::{invalid_key, valid, TempToml};
use crate::config::validate::MAX_REQUEST_BYTES_LIMIT;
use crate::config::{ClientConfig, Config};

const HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

fn client(name: &str, hash: &str, namespaces: &[&str]) -> ClientConfig {
    ClientConfig {
        max_sessions: None,
        max_waiters: None,
        name: name.into(),
        token_sha256: Some(hash.into()),
        certificate_san: None,
        namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
    }
}

/// A client identified by its certificate's subjectAltName.
fn cert_client(name: &str, san: &str, namespaces: &[&str]) -> ClientConfig {
    ClientConfig {
        max_sessions: None,
        max_waiters: None,
        name: name.into(),
        token_sha256: None,
        certificate_san: Some(san.into()),
        namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
    }
}

/// Mutual TLS on, so that certificate identities are allowed.
fn with_mtls(c: &mut Config) {
    c.server.tls.cert = Some("/c.pem".into());
    c.server.tls.key = Some("/k.pem".into());
    c.server.tls.client_ca = Some("/ca.pem".into());
}

/// Each broken security key is refused and named.
#[test]
fn security_rules_name_their_key() {
    type Case = (&'static str, fn(&mut Config));
    let cases: &[Case] = &[
        ("auth.clients.name", |c| {
            c.auth.clients = vec![client("", HASH, &["a/"])]
        }),
        ("auth.clients.name", |c| {
            c.auth.clients = vec![client("has space", HASH, &["a/"])]
        }),
        ("auth.clients.name", |c| {
            c.auth.clients = vec![
                client("a", HASH, &["a/"]),
                client("a", &HASH.replace('9', "8"), &["a/"]),
            ]
        }),
        ("auth.clients.token_sha256", |c| {
            c.auth.clients = vec![client("a", "plain-token", &["a/"])]
        }),
        ("auth.clients.token_sha256", |c| {
            c.auth.clients = vec![client("a", &HASH.to_uppercase(), &["a/"])]
        }),
        ("auth.clients.token_sha256", |c| {
            c.auth.clients = vec![client("a", HASH, &["a/"]), client("b", HASH, &["b/"])]
        }),
        ("auth.clients.namespaces", |c| {
            c.auth.clients = vec![client("a", HASH, &[])]
        }),
        ("auth.clients.namespaces", |c| {
            c.auth.clients = vec![client("a", HASH, &["a\n"])]
        }),
        ("auth.clients.token_sha256", |c| {
            let mut a = client("a", HASH, &["a/"]);
            a.token_sha256 = None;
            c.auth.clients = vec![a]
        }),
        ("auth.clients.certificate_san", |c| {
            with_mtls(c);
            let mut a = client("a", HASH, &["a/"]);
            a.certificate_san = Some("a.clients.test".into());
            c.auth.clients = vec![a]
        }),
        ("auth.clients.certificate_san", |c| {
            c.auth.clients = vec![cert_client("a", "a.clients.test", &["a/"])]
        }),
        ("auth.clients.certificate_san", |c| {
            c.server.tls.cert = Some("/c.pem".into());
            c.server.tls.key = Some("/k.pem".into());
            c.auth.clients = vec![cert_client("a", "a.clients.test", &["a/"])]
        }),
        ("auth.clients.certificate_san", |c| {
            with_mtls(c);
            c.auth.clients = vec![cert_client("a", "", &["a/"])]
        }),
        ("auth.clients.certificate_san", |c| {
            with_mtls(c);
            c.auth.clients = vec![cert_client("a", "has space", &["a/"])]
        }),
        ("auth.clients.certificate_san", |c| {
            with_mtls(c);
            c.auth.clients = vec![
                cert_client("a", "a.clients.test", &["a/"]),
                cert_client("b", "A.Clients.Test", &["b/"]),
            ]
        }),
        ("auth.clients.namespaces", |c| {
            with_mtls(c);
            c.auth.clients = vec![cert_client("a", "a.clients.test", &[])]
        }),
        ("limits.burst", |c| c.limits.rate_per_second = 10),
        ("server.max_request_bytes", |c| {
            c.server.max_request_bytes = MAX_REQUEST_BYTES_LIMIT + 1
        }),
        ("server.max_request_bytes", |c| {
            c.server.max_request_bytes = 100
        }),
        ("server.tls.key", |c| {
            c.server.tls.cert = Some("/c.pem".into())
        }),
        ("server.tls.cert", |c| {
            c.server.tls.key = Some("/k.pem".into())
        }),
        ("server.tls.client_ca", |c| {
            c.server.tls.client_ca = Some("/ca.pem".into())
        }),
    ];
    for (i, (key, break_it)) in cases.iter().enumerate() {
        let mut c = valid();
        break_it(&mut c);
        assert_eq!(invalid_key(&c), *key, "case {i}");
    }
}

/// Token and certificate identities side by side under mutual TLS are a
/// valid configuration, and the error for a missing `client_ca` says what
/// to change.
#[test]
fn certificate_identities_need_mutual_tls() {
    let mut c = valid();
    with_mtls(&mut c);
    c.auth.clients = vec![
        client("orders", HASH, &["orders/"]),
        cert_client("jobs", "spiffe://example.test/jobs", &["jobs/"]),
        cert_client("batch", "batch.clients.test", &["batch/"]),
    ];
    c.validate()
        .expect("token and certificate clients together");
    c.server.tls.client_ca = None;
    let message = c.validate().unwrap_err().to_string();
    assert!(
        message.contains("auth.clients.certificate_san")
            && message.contains("server.tls.client_ca"),
        "{message}"
    );
}

/// A full `[auth]` and `[server.tls]` section loads from TOML, and the
/// `Debug` output never shows a token hash.
#[test]
fn auth_and_tls_load_from_toml() {
    let f = TempToml::new(&format!(
        r#"
        [server]
        max_request_bytes = 8192
        [server.tls]
        cert = "/etc/redlockd/server.crt"
        key = "/etc/redlockd/server.key"
        client_ca = "/etc/redlockd/ca.crt"
        [redlock]
        nodes = ["redis://127.0.0.1:6379"]
        [limits]
        rate_per_second = 100
        burst = 200
        max_calls_per_connection = 10
        [[auth.clients]]
        name = "orders"
        token_sha256 = "{HASH}"
        namespaces = ["orders/", "jobs/orders-"]
        [[auth.clients]]
        name = "jobs"
        certificate_san = "spiffe://example.test/jobs"
        namespaces = ["jobs/"]
        "#
    ));
    let c = Config::load_with_env(Some(f.path()), HashMap::new()).unwrap();
    assert!(c.auth.enabled() && c.server.tls.enabled());
    assert_eq!(c.auth.clients[0].namespaces, ["orders/", "jobs/orders-"]);
    assert_eq!(c.auth.clients[0].certificate_san, None);
    assert_eq!(
        c.auth.clients[1].certificate_san.as_deref(),
        Some("spiffe://example.test/jobs")
    );
    assert_eq!(c.auth.clients[1].token_sha256, None);
    assert_eq!(c.server.max_request_bytes, 8192);
    assert_eq!((c.limits.rate_per_second, c.limits.burst), (100, 200));
    assert!(!format!("{c:?}").contains(HASH));
}

/// A misspelt key inside `[[auth.clients]]` is an error, not ignored.
#[test]
fn unknown_auth_key_is_refused() {
    let f = TempToml::new(
        "[redlock]\nnodes = [\"redis://h:1\"]\n[[auth.clients]]\nname = \"a\"\ntoken = \"x\"\n",
    );
    assert!(Config::load_with_env(Some(f.path()), HashMap::new()).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Arbitrary text as a config file: loads or errors, never panics.
    #[test]
    fn any_text_loads_or_errors(text in "\\PC{0,200}") {
        let f = TempToml::new(&text);
        let _ = Config::load_with_env(Some(f.path()), HashMap::new());
    }

    /// Arbitrary values for every security key: loads or errors, never
    /// panics; what loads has passed validation.
    #[test]
    fn any_security_values_load_or_error(
        rate in any::<i64>(),
        burst in any::<i64>(),
        bytes in any::<i64>(),
        name in "\\PC{0,20}",
        hash in "[0-9a-fA-F]{0,70}",
        namespace in "\\PC{0,10}",
    ) {
        let toml = format!(
            "[server]\nmax_request_bytes = {bytes}\n[redlock]\nnodes = [\"redis://h:1\"]\n\
             [limits]\nrate_per_second = {rate}\nburst = {burst}\n\
             [[auth.clients]]\nname = {name:?}\ntoken_sha256 = {hash:?}\nnamespaces = [{namespace:?}]\n"
        );
        let f = TempToml::new(&toml);
        if let Ok(c) = Config::load_with_env(Some(f.path()), HashMap::new()) {
            prop_assert!(c.validate().is_ok());
        }
    }

    /// Arbitrary credentials for one client, with or without mutual TLS:
    /// loads or errors, never panics; what loads has exactly one credential
    /// and, for a certificate identity, a client CA.
    #[test]
    fn any_client_credentials_load_or_error(
        hash in proptest::option::of("[0-9a-f]{64}"),
        san in proptest::option::of("\\PC{0,40}"),
        mtls in any::<bool>(),
    ) {
        let mut toml = String::from("[redlock]\nnodes = [\"redis://h:1\"]\n");
        if mtls {
            toml.push_str(
                "[server.tls]\ncert = \"/c.pem\"\nkey = \"/k.pem\"\nclient_ca = \"/ca.pem\"\n",
            );
        }
        toml.push_str("[[auth.clients]]\nname = \"a\"\nnamespaces = [\"a/\"]\n");
        if let Some(hash) = &hash {
            toml.push_str(&format!("token_sha256 = {hash:?}\n"));
        }
        if let Some(san) = &san {
            toml.push_str(&format!("certificate_san = {san:?}\n"));
        }
        let f = TempToml::new(&toml);
        if let Ok(c) = Config::load_with_env(Some(f.path()), HashMap::new()) {
            prop_assert!(c.validate().is_ok());
            let client = &c.auth.clients[0];
            prop_assert!(client.token_sha256.is_some() != client.certificate_san.is_some());
            prop_assert!(client.certificate_san.is_none() || c.server.tls.client_ca.is_some());
        }
    }

    /// Environment overrides with arbitrary values never panic either.
    #[test]
    fn any_env_values_load_or_error(value in "\\PC{0,30}") {
        let env: HashMap<String, String> = [
            ("REDLOCKD__REDLOCK__NODES", "redis://h:1"),
            ("REDLOCKD__LIMITS__BURST", value.as_str()),
            ("REDLOCKD__SERVER__MAX_REQUEST_BYTES", value.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let _ = Config::load_with_env(None, env);
    }
}
