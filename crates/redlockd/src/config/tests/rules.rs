//! Validation rules and their limits, password redaction, and start-up
//! warnings.

use std::time::Duration;

use proptest::prelude::*;

use super::{invalid_key, load_err, valid, TempToml, FIVE};
use crate::config::redact::redact_text;
use crate::config::validate::{
    check_drift_factor, MAX_RESOURCE_LEN_LIMIT, MAX_TTL_LIMIT, NODE_TIMEOUT_LIMIT,
    SHUTDOWN_GRACE_LIMIT,
};
use crate::config::{redact_url, Config, ConfigError, RestartQuarantine};

#[test]
fn every_rule_names_its_key() {
    type Case = (&'static str, fn(&mut Config));
    let cases: &[Case] = &[
        ("redlock.nodes", |c| c.redlock.nodes.clear()),
        ("redlock.nodes", |c| {
            c.redlock.nodes[0] = "127.0.0.1:6379".into()
        }),
        ("redlock.nodes", |c| {
            c.redlock.nodes[0] = "http://h:1".into()
        }),
        ("redlock.nodes", |c| c.redlock.nodes[0] = "redis://".into()),
        ("redlock.nodes", |c| {
            c.redlock.nodes[0] = "redis://:pw@/0".into()
        }),
        ("redlock.nodes", |c| {
            c.redlock.nodes[0] = "redis://h:port".into()
        }),
        ("redlock.nodes", |c| {
            c.redlock.nodes[0] = "redis://h:0".into()
        }),
        ("redlock.nodes", |c| {
            c.redlock.nodes[0] = "redis://[::1".into()
        }),
        ("redlock.nodes", |c| c.redlock.nodes[1] = FIVE[0].into()),
        ("redlock.nodes", |c| {
            c.redlock.nodes = vec!["redis://h".into(), "rediss://u:p@H:6379/2".into()];
        }),
        ("redlock.key_prefix", |c| {
            c.redlock.key_prefix = "a b".into()
        }),
        ("redlock.key_prefix", |c| {
            c.redlock.key_prefix = "a\u{7}".into()
        }),
        ("redlock.node_timeout", |c| {
            c.redlock.node_timeout = Duration::ZERO
        }),
        ("redlock.node_timeout", |c| {
            c.redlock.node_timeout = NODE_TIMEOUT_LIMIT + Duration::from_millis(1);
        }),
        ("redlock.drift_factor", |c| {
            c.redlock.drift_factor = f64::NAN
        }),
        ("redlock.drift_factor", |c| c.redlock.drift_factor = -0.01),
        ("redlock.drift_factor", |c| c.redlock.drift_factor = 0.5),
        ("redlock.drift_factor", |c| {
            c.redlock.drift_factor = f64::INFINITY
        }),
        ("redlock.min_ttl", |c| c.redlock.min_ttl = Duration::ZERO),
        ("redlock.min_ttl", |c| {
            c.redlock.min_ttl = c.redlock.max_ttl + Duration::from_millis(1);
        }),
        ("redlock.max_ttl", |c| {
            c.redlock.max_ttl = MAX_TTL_LIMIT + Duration::from_secs(1);
            c.redlock.fence_ttl = MAX_TTL_LIMIT * 10;
        }),
        ("redlock.max_resource_len", |c| {
            c.redlock.max_resource_len = 0
        }),
        ("redlock.max_resource_len", |c| {
            c.redlock.max_resource_len = MAX_RESOURCE_LEN_LIMIT + 1;
        }),
        ("redlock.retry_delay_min", |c| {
            c.redlock.retry_delay_min = c.redlock.retry_delay_max + Duration::from_millis(1);
        }),
        ("redlock.retry_delay_max", |c| {
            c.redlock.retry_delay_min = Duration::ZERO;
            c.redlock.retry_delay_max = Duration::ZERO;
        }),
        ("redlock.fence_ttl", |c| {
            c.redlock.fence_ttl = c.redlock.max_ttl
        }),
        ("redlock.fence_ttl", |c| {
            c.redlock.fence_ttl = Duration::from_secs(60)
        }),
        ("redlock.fence_ttl", |c| {
            // Outlives every lock, but not a lock-delay after the longest.
            c.redlock.fence_ttl = c.redlock.max_ttl + Duration::from_secs(1);
            c.redlock.max_hold_at_least = Duration::ZERO;
            c.redlock.max_lock_delay = Duration::from_secs(2);
        }),
        ("server.shutdown_grace", |c| {
            c.server.shutdown_grace = SHUTDOWN_GRACE_LIMIT + Duration::from_secs(1);
        }),
    ];
    for (i, (key, break_it)) in cases.iter().enumerate() {
        let mut c = valid();
        break_it(&mut c);
        assert_eq!(invalid_key(&c), *key, "case {i}");
        let msg = c.validate().unwrap_err().to_string();
        assert!(msg.contains(key), "case {i}: {msg}");
    }
}

#[test]
fn limits_themselves_are_accepted() {
    type Case = fn(&mut Config);
    let cases: &[Case] = &[
        |c| c.redlock.node_timeout = NODE_TIMEOUT_LIMIT,
        |c| c.redlock.drift_factor = 0.0,
        |c| c.redlock.max_ttl = MAX_TTL_LIMIT,
        |c| c.redlock.min_ttl = c.redlock.max_ttl,
        |c| c.redlock.max_resource_len = 1,
        |c| {
            c.redlock.max_resource_len = MAX_RESOURCE_LEN_LIMIT;
            c.server.max_request_bytes = MAX_RESOURCE_LEN_LIMIT + 1024;
        },
        |c| c.redlock.retry_delay_min = c.redlock.retry_delay_max,
        |c| c.redlock.retry_delay_min = Duration::ZERO,
        |c| {
            c.redlock.max_lock_delay = Duration::ZERO;
            c.redlock.max_hold_at_least = Duration::ZERO;
            c.redlock.fence_ttl = c.redlock.max_ttl + Duration::from_millis(1);
        },
        |c| {
            c.redlock.fence_ttl = c.redlock.max_ttl.max(c.redlock.max_hold_at_least)
                + c.redlock.max_lock_delay
                + Duration::from_millis(1);
        },
        |c| c.redlock.key_prefix = String::new(),
        |c| c.redlock.key_prefix = "app:locks/é:".into(),
        |c| c.server.shutdown_grace = SHUTDOWN_GRACE_LIMIT,
        |c| c.server.shutdown_grace = Duration::ZERO,
        |c| {
            c.redlock.nodes = vec![
                "redis://h:1/0".into(),
                "rediss://u:p@h:2".into(),
                "redis://[::1]:1".into(),
                "redis://[::1]".into(),
                "REDIS://other".into(),
            ];
        },
    ];
    for (i, tweak) in cases.iter().enumerate() {
        let mut c = valid();
        tweak(&mut c);
        assert!(c.validate().is_ok(), "case {i}: {:?}", c.validate());
    }
}

#[test]
fn duplicate_node_message_explains_the_quorum() {
    let mut c = valid();
    c.redlock.nodes[1] = "redis://127.0.0.1:6379/1".into();
    let msg = c.validate().unwrap_err().to_string();
    assert!(msg.contains("twice") && msg.contains("quorum"), "{msg}");
}

#[test]
fn redact_url_hides_passwords_only() {
    let r = redact_url("redis://user:secret@host:1");
    assert!(!r.contains("secret"), "{r}");
    assert_eq!(r, "redis://user:***@host:1");
    assert_eq!(redact_url("rediss://:secret@h/0"), "rediss://:***@h/0");
    assert_eq!(redact_url("redis://u:se@cr/et@h:1"), "redis://u:***@h:1");
    assert_eq!(redact_url("u:secret@h:1"), "u:***@h:1");
    for plain in [
        "redis://host:1",
        "redis://127.0.0.1:6379/0",
        "rediss://user@host",
        "redis://[::1]:6379",
        "",
        "not a url",
    ] {
        assert_eq!(redact_url(plain), plain);
    }
}

#[test]
fn no_password_in_errors_warnings_or_debug() {
    let secret = "s3cr3t-pw";
    let url = format!("redis://admin:{secret}@db.example:6379");
    let mut c = valid();
    c.redlock.nodes = vec![url.clone(), url.clone()];
    let msg = c.validate().unwrap_err().to_string();
    assert!(
        msg.contains("redlock.nodes") && !msg.contains(secret),
        "{msg}"
    );

    c.redlock.nodes = vec![format!("http://admin:{secret}@h:1")];
    let msg = c.validate().unwrap_err().to_string();
    assert!(!msg.contains(secret), "{msg}");

    c.redlock.nodes = vec![url.clone()];
    let warnings = c.warnings().join("\n");
    assert!(warnings.contains("unencrypted"), "{warnings}");
    assert!(!warnings.contains(secret), "{warnings}");
    let debug = format!("{c:?}");
    assert!(debug.contains("admin:***@db.example"), "{debug}");
    assert!(!debug.contains(secret), "{debug}");

    // A TOML syntax error quotes the broken line.
    let f = TempToml::new(&format!("[redlock]\nnodes = [\"{url}\" \"x\"]\n"));
    let msg = load_err(Some(f.path()), &[]);
    assert!(!msg.contains(secret), "{msg}");
}

#[test]
fn redact_text_finds_urls_in_prose() {
    let t = "bad: nodes = [\"redis://u:pw1@a:1\", 'rediss://:pw2@b'] at redis://u:pw3@c\n";
    let r = redact_text(t);
    assert!(
        !r.contains("pw1") && !r.contains("pw2") && !r.contains("pw3"),
        "{r}"
    );
    assert!(
        r.contains("redis://u:***@a:1") && r.contains("rediss://:***@b"),
        "{r}"
    );
    assert_eq!(redact_text("no urls here é"), "no urls here é");
}

/// Passwords with spaces and quotes never leak from a parse error's quote
/// of the line.
#[test]
fn redact_text_hides_passwords_with_spaces_and_quotes() {
    for line in [
        "nodes = [\"redis://u:pa ssSecret@h:1\" ,, ]",
        "nodes = [\"redis://u:pa\"ssSecret@h:1\" ,, ]",
        "nodes = ['redis://:pa'ss Secret@h:1' ,, ]",
        "nodes = [\"redis://u:pa ss\\\"Secret@h:1\", \"redis://v:other Secret@g:2\"]",
    ] {
        let r = redact_text(line);
        assert!(!r.contains("Secret") && !r.contains("ss"), "{line} -> {r}");
        assert!(r.contains(":***@h:1"), "{line} -> {r}");
    }
}

/// The same through the loader: a broken config file's error message.
#[test]
fn parse_errors_hide_passwords_with_spaces() {
    let f = TempToml::new("[redlock]\nnodes = [\"redis://u:pa ssSecret@h:1\" ,, ]\n");
    let msg = load_err(Some(f.path()), &[]);
    assert!(!msg.contains("Secret"), "{msg}");
}

#[test]
fn warnings_give_advice() {
    let mut c = valid();
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());

    c.redlock.nodes.truncate(2);
    let w = c.warnings();
    assert_eq!(w.len(), 1);
    assert!(
        w[0].contains("redlock.nodes has 2 masters")
            && w[0].contains("cannot survive the loss of any master"),
        "{w:?}"
    );

    c.redlock.nodes.truncate(1);
    assert!(
        c.warnings()[0].contains("has 1 master:"),
        "{:?}",
        c.warnings()
    );

    let mut c = valid();
    c.redlock.nodes.truncate(4);
    assert!(c.warnings()[0].contains("even"), "{:?}", c.warnings());

    let mut c = valid();
    c.redlock.drift_factor = 0.0;
    assert!(
        c.warnings()[0].contains("drift_factor"),
        "{:?}",
        c.warnings()
    );

    // A password to a loopback master does not leave the host.
    let mut c = valid();
    c.redlock.nodes[0] = "redis://u:pw@127.0.0.1:6379".into();
    c.redlock.nodes[1] = "redis://u:pw@localhost:6380".into();
    c.redlock.nodes[2] = "rediss://u:pw@db.example:6381".into();
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
}

/// Turning the restart quarantine off is allowed, with a warning; the
/// deprecated boolean turns it off too.
#[test]
fn quarantine_off_is_warned_about() {
    let mut c = valid();
    c.redlock.quarantine = RestartQuarantine::MaxTtl;
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
    c.redlock.quarantine = RestartQuarantine::Off;
    let w = c.warnings();
    assert!(
        w.len() == 1 && w[0].contains("restart_quarantine is off"),
        "{w:?}"
    );
    let mut c = valid();
    c.redlock.quarantine = RestartQuarantine::Off;
    assert!(format!("{c:?}").contains("restart_quarantine: Off"));
}

proptest! {
    #[test]
    fn drift_factor_accepted_iff_finite_in_range(d in proptest::num::f64::ANY) {
        let mut c = valid();
        c.redlock.drift_factor = d;
        let ok = d.is_finite() && (0.0..0.5).contains(&d);
        match c.validate() {
            Ok(()) => prop_assert!(ok, "{d} accepted"),
            Err(ConfigError::Invalid { key, .. }) => {
                prop_assert!(!ok, "{d} rejected");
                prop_assert_eq!(key, "redlock.drift_factor");
            }
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }

    #[test]
    fn drift_factor_in_range_is_accepted(d in 0.0f64..0.5) {
        let mut c = valid();
        c.redlock.drift_factor = d;
        prop_assert!(c.validate().is_ok());
    }

    #[test]
    fn drift_factor_out_of_range_is_rejected(
        d in prop_oneof![
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            0.5f64..1e300,
            -1e300f64..-1e-300,
        ]
    ) {
        prop_assert!(check_drift_factor(d).is_err());
    }
}

#[test]
fn waiting_and_session_rules_name_their_keys() {
    let mut c = valid();
    c.limits.max_waiters = 0;
    assert_eq!(invalid_key(&c), "limits.max_waiters");
    let mut c = valid();
    c.limits.max_sessions = 0;
    assert_eq!(invalid_key(&c), "limits.max_sessions");
    let mut c = valid();
    c.limits.max_waiters_per_resource = 0;
    assert_eq!(invalid_key(&c), "limits.max_waiters_per_resource");
    let mut c = valid();
    c.session.extend_at = 0.9;
    assert_eq!(invalid_key(&c), "session.extend_at");
    let mut c = valid();
    c.redlock.wait_fallback = Duration::from_millis(1);
    assert_eq!(invalid_key(&c), "redlock.wait_fallback");
}

/// A password from `[masters]` sent over `redis://` to a non-loopback
/// master is warned about like one in the URL; a client token that is a
/// common word is warned about.
#[test]
fn plaintext_shared_password_and_weak_token_warned() {
    use sha2::{Digest, Sha256};
    let mut c = valid();
    c.redlock.nodes = (1..=5)
        .map(|i| format!("redis://10.0.0.{i}:6379"))
        .collect();
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
    c.masters.password_file = Some("/run/secrets/masters".into());
    let w = c.warnings();
    assert_eq!(w.len(), 5, "{w:?}");
    assert!(w[0].contains("masters.password_file"), "{w:?}");
    c.redlock.nodes = (1..=5)
        .map(|i| format!("rediss://10.0.0.{i}:6379"))
        .collect();
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());

    c.auth.clients = vec![crate::config::ClientConfig {
        max_sessions: None,
        max_waiters: None,
        name: "weak".into(),
        token_sha256: Some(hex::encode(Sha256::digest(b"password"))),
        certificate_san: None,
        namespaces: vec![String::new()],
    }];
    let w = c.warnings();
    assert!(w.len() == 1 && w[0].contains("common word"), "{w:?}");
    c.auth.clients[0].token_sha256 = Some(hex::encode(Sha256::digest(
        b"7f3a9c2e4b6d8f0a1c3e5b7d9f2a4c6e",
    )));
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
}

/// The connection and session bounds name their key when out
/// of range.
#[test]
fn connection_and_quota_bounds_name_their_key() {
    type Breaks = fn(&mut Config);
    let cases: [(&str, Breaks); 9] = [
        ("limits.max_connections", |c| c.limits.max_connections = 0),
        ("limits.max_connections_per_peer", |c| {
            c.limits.max_connections_per_peer = 0
        }),
        ("limits.max_unauthenticated_calls", |c| {
            c.limits.max_unauthenticated_calls = 0
        }),
        ("limits.max_sessions_per_identity", |c| {
            c.limits.max_sessions_per_identity = 0
        }),
        ("limits.max_waiters_per_identity", |c| {
            c.limits.max_waiters_per_identity = 0
        }),
        ("server.idle_timeout", |c| {
            c.server.idle_timeout = Duration::from_millis(10)
        }),
        ("server.tls_handshake_timeout", |c| {
            c.server.tls_handshake_timeout = Duration::from_secs(7200)
        }),
        ("session.min_ttl", |c| {
            c.session.min_ttl = Duration::from_secs(61)
        }),
        ("server.worker_threads", |c| c.server.worker_threads = 1025),
    ];
    for (key, breaks) in cases {
        let mut c = valid();
        assert!(c.validate().is_ok());
        breaks(&mut c);
        assert_eq!(invalid_key(&c), key);
    }
}
