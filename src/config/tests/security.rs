//! The security keys: `[auth]`, `[server.tls]`, `server.max_request_bytes`
//! and the flood limits; and property tests of parsing: any TOML text
//! either loads or is refused with an error, never a panic.

use std::collections::HashMap;

use proptest::prelude::*;

use super::{invalid_key, valid, TempToml};
use crate::config::{ClientConfig, Config, MAX_REQUEST_BYTES_LIMIT};

const HASH: &str = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";

fn client(name: &str, hash: &str, namespaces: &[&str]) -> ClientConfig {
    ClientConfig {
        name: name.into(),
        token_sha256: hash.into(),
        namespaces: namespaces.iter().map(|n| (*n).to_owned()).collect(),
    }
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
        "#
    ));
    let c = Config::load_with_env(Some(f.path()), HashMap::new()).unwrap();
    assert!(c.auth.enabled() && c.server.tls.enabled());
    assert_eq!(c.auth.clients[0].namespaces, ["orders/", "jobs/orders-"]);
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
