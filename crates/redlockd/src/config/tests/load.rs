//! Loading: built-in defaults, the TOML file, environment overrides, load
//! errors, and the example config shipped with the daemon.

use std::collections::HashMap;
use std::time::Duration;

use super::{env, invalid_key, load_err, valid, TempToml, FIVE};
use crate::config::{Config, ConfigError, RestartQuarantine, ServerConfig};

/// The example config shipped with the daemon.
const SHIPPED: &str = include_str!("../../../../../config/redlockd.toml");

#[test]
fn defaults_are_the_documented_ones() {
    let c = Config::default();
    assert_eq!(c.server.listen, "127.0.0.1:50051".parse().unwrap());
    assert_eq!(c.server.shutdown_grace, Duration::from_secs(20));
    let r = &c.redlock;
    assert!(r.nodes.is_empty());
    assert_eq!(r.key_prefix, "redlock:");
    assert_eq!(r.node_timeout, Duration::from_millis(50));
    assert_eq!(r.drift_factor, 0.01);
    assert_eq!(r.min_ttl, Duration::from_millis(10));
    assert_eq!(r.max_ttl, Duration::from_secs(3600));
    assert_eq!(r.max_wait, Duration::from_secs(300));
    assert_eq!(r.max_resource_len, 512);
    assert_eq!(r.retry_delay_min, Duration::from_millis(5));
    assert_eq!(r.retry_delay_max, Duration::from_millis(50));
    assert_eq!(r.fence_ttl, Duration::from_secs(7 * 24 * 3600));
    assert_eq!(r.quarantine, RestartQuarantine::Horizon);
    assert_eq!(r.quarantine, RestartQuarantine::Horizon);
    assert_eq!(c.http.listen, None, "the HTTP gateway is off by default");
}

/// `redlock.restart_quarantine` takes the three names, in TOML and in the
/// environment, and still the booleans it used to be: `true` is the
/// default (`horizon`), `false` is `off`.
#[test]
fn restart_quarantine_names_and_old_booleans() {
    use RestartQuarantine::{Horizon, MaxTtl, Off};
    for (toml, expected) in [
        ("\"horizon\"", Horizon),
        ("\"max_ttl\"", MaxTtl),
        ("\"off\"", Off),
        ("true", Horizon),
        ("false", Off),
    ] {
        let f = TempToml::new(&format!(
            "[redlock]\nnodes = [\"redis://a:1\"]\nrestart_quarantine = {toml}\n"
        ));
        let c = Config::load_with_env(Some(f.path()), HashMap::new()).unwrap();
        assert_eq!(c.redlock.quarantine, expected, "{toml}");
    }
    for (text, expected) in [
        ("horizon", Horizon),
        ("max_ttl", MaxTtl),
        ("off", Off),
        ("true", Horizon),
        ("false", Off),
        ("Off", Off),
    ] {
        let c = Config::load_with_env(
            None,
            env(&[
                ("REDLOCKD__REDLOCK__NODES", "redis://a:1"),
                ("REDLOCKD__REDLOCK__RESTART_QUARANTINE", text),
            ]),
        )
        .unwrap();
        assert_eq!(c.redlock.quarantine, expected, "{text}");
        assert_eq!(RestartQuarantine::parse(expected.as_str()), Some(expected));
    }
    let f = TempToml::new("[redlock]\nnodes = [\"redis://a:1\"]\nrestart_quarantine = \"1h\"\n");
    let err = load_err(Some(f.path()), &[]);
    assert!(
        err.contains("redlock.restart_quarantine") && err.contains("max_ttl"),
        "{err}"
    );
    let err = load_err(
        None,
        &[
            ("REDLOCKD__REDLOCK__NODES", "redis://a:1"),
            ("REDLOCKD__REDLOCK__RESTART_QUARANTINE", "sometimes"),
        ],
    );
    assert!(err.contains("redlock.restart_quarantine"), "{err}");
}

#[test]
fn defaults_need_only_nodes() {
    assert_eq!(invalid_key(&Config::default()), "redlock.nodes");
    let err = load_err(None, &[]);
    assert!(err.contains("redlock.nodes") && err.contains("at least one master"));

    let c = Config::load_with_env(
        None,
        env(&[("REDLOCKD__REDLOCK__NODES", "redis://10.0.0.1:6379")]),
    )
    .unwrap();
    assert_eq!(c.redlock.nodes, vec!["redis://10.0.0.1:6379"]);
    assert_eq!(c.server, ServerConfig::default());
    assert_eq!(c.redlock.nodes.len(), 1);
    valid().validate().unwrap();
}

#[test]
fn file_overrides_defaults_and_partial_file_works() {
    let f = TempToml::new(
        r#"
        [server]
        listen = "0.0.0.0:6000"

        [redlock]
        nodes = ["redis://a:1", "rediss://b:2"]
        node_timeout = "80ms"
        drift_factor = 0.02
        max_resource_len = 100
        "#,
    );
    let c = Config::load_with_env(Some(f.path()), HashMap::new()).unwrap();
    assert_eq!(c.server.listen, "0.0.0.0:6000".parse().unwrap());
    assert_eq!(c.server.shutdown_grace, Duration::from_secs(20));
    assert_eq!(c.redlock.nodes, vec!["redis://a:1", "rediss://b:2"]);
    assert_eq!(c.redlock.node_timeout, Duration::from_millis(80));
    assert_eq!(c.redlock.drift_factor, 0.02);
    assert_eq!(c.redlock.max_resource_len, 100);
    assert_eq!(c.redlock.key_prefix, "redlock:");
    assert_eq!(c.redlock.max_ttl, Duration::from_secs(3600));
}

#[test]
fn env_overrides_file() {
    let f = TempToml::new(
        r#"
        [server]
        listen = "0.0.0.0:6000"
        shutdown_grace = "25s"
        [redlock]
        nodes = ["redis://a:1", "redis://b:2", "redis://c:3"]
        node_timeout = "80ms"
        key_prefix = "file:"
        "#,
    );
    let c = Config::load_with_env(
        Some(f.path()),
        env(&[
            ("REDLOCKD__SERVER__LISTEN", "127.0.0.1:7000"),
            ("REDLOCKD__REDLOCK__NODE_TIMEOUT", "120ms"),
            ("REDLOCKD__REDLOCK__NODES", "redis://x:1"),
            ("REDLOCKD__REDLOCK__DRIFT_FACTOR", "0.02"),
            ("REDLOCKD__REDLOCK__MAX_RESOURCE_LEN", "100"),
            ("REDLOCKD__REDLOCK__FENCE_TTL", "30days"),
        ]),
    )
    .unwrap();
    assert_eq!(c.server.listen, "127.0.0.1:7000".parse().unwrap());
    assert_eq!(c.server.shutdown_grace, Duration::from_secs(25));
    assert_eq!(c.redlock.node_timeout, Duration::from_millis(120));
    assert_eq!(c.redlock.nodes, vec!["redis://x:1"]);
    assert_eq!(c.redlock.key_prefix, "file:");
    assert_eq!(c.redlock.drift_factor, 0.02);
    assert_eq!(c.redlock.max_resource_len, 100);
    assert_eq!(c.redlock.fence_ttl, Duration::from_secs(30 * 24 * 3600));
}

#[test]
fn env_nodes_comma_list() {
    let c = Config::load_with_env(
        None,
        env(&[(
            "REDLOCKD__REDLOCK__NODES",
            "redis://127.0.0.1:7001,redis://127.0.0.1:7002, rediss://u:p@h:7003 ,",
        )]),
    )
    .unwrap();
    assert_eq!(
        c.redlock.nodes,
        vec![
            "redis://127.0.0.1:7001",
            "redis://127.0.0.1:7002",
            "rediss://u:p@h:7003"
        ]
    );
    assert_eq!(c.redlock.nodes.len(), 3);
    let err = load_err(None, &[("REDLOCKD__REDLOCK__NODES", "")]);
    assert!(err.contains("redlock.nodes"), "{err}");
}

#[test]
fn env_strings_are_kept_verbatim() {
    let c = Config::load_with_env(
        None,
        env(&[
            ("REDLOCKD__REDLOCK__NODES", "redis://a:1"),
            ("REDLOCKD__REDLOCK__KEY_PREFIX", "007"),
        ]),
    )
    .unwrap();
    assert_eq!(c.redlock.key_prefix, "007");
    let c = Config::load_with_env(
        None,
        env(&[
            ("REDLOCKD__REDLOCK__NODES", "redis://a:1"),
            ("REDLOCKD__REDLOCK__KEY_PREFIX", ""),
        ]),
    )
    .unwrap();
    assert_eq!(c.redlock.key_prefix, "");
}

#[test]
fn env_names_are_case_insensitive_and_others_ignored() {
    let c = Config::load_with_env(
        None,
        env(&[
            ("redlockd__redlock__nodes", "redis://a:1"),
            ("REDLOCKD_LOG", "debug"),
            ("REDLOCKD_CONFIG", "/nowhere.toml"),
            ("REDLOCK__SERVER__LISTEN", "garbage"),
            ("PATH", "/usr/bin"),
            ("XREDLOCKD__SERVER__LISTEN", "garbage"),
        ]),
    )
    .unwrap();
    assert_eq!(c.redlock.nodes, vec!["redis://a:1"]);
    assert_eq!(c.server, ServerConfig::default());
}

#[test]
fn unknown_key_is_an_error_naming_it() {
    let f = TempToml::new("[redlock]\nnodes = [\"redis://a:1\"]\nnode_timout = \"5ms\"\n");
    let err = load_err(Some(f.path()), &[]);
    assert!(err.contains("node_timout"), "{err}");

    let f = TempToml::new("[servr]\nlisten = \"127.0.0.1:1\"\n");
    let err = load_err(Some(f.path()), &[]);
    assert!(err.contains("servr"), "{err}");

    let err = load_err(
        None,
        &[
            ("REDLOCKD__REDLOCK__NODES", "redis://a:1"),
            ("REDLOCKD__REDLOCK__DRIFT", "0.1"),
        ],
    );
    assert!(err.contains("drift"), "{err}");
}

#[test]
fn bad_values_are_errors_naming_the_key() {
    let f = TempToml::new("[redlock]\nnodes = [\"redis://a:1\"]\nmin_ttl = \"5 parsecs\"\n");
    let err = load_err(Some(f.path()), &[]);
    assert!(err.contains("redlock.min_ttl"), "{err}");

    let err = load_err(
        None,
        &[
            ("REDLOCKD__REDLOCK__NODES", "redis://a:1"),
            ("REDLOCKD__REDLOCK__NODE_TIMEOUT", "fast"),
        ],
    );
    assert!(err.contains("redlock.node_timeout"), "{err}");

    let err = load_err(
        None,
        &[
            ("REDLOCKD__REDLOCK__NODES", "redis://a:1"),
            ("REDLOCKD__REDLOCK__MAX_RESOURCE_LEN", "-3"),
        ],
    );
    assert!(err.contains("redlock.max_resource_len"), "{err}");

    let err = load_err(None, &[("REDLOCKD__SERVER__LISTEN", "not-an-address")]);
    assert!(err.contains("server.listen"), "{err}");

    // A duration must be a string with a unit, not a bare number.
    let f = TempToml::new("[redlock]\nnodes = [\"redis://a:1\"]\nmax_ttl = 60\n");
    let err = load_err(Some(f.path()), &[]);
    assert!(err.contains("redlock.max_ttl"), "{err}");
}

#[test]
fn missing_or_broken_file_is_a_load_error() {
    let missing = std::env::temp_dir().join("redlockd-config-test-does-not-exist.toml");
    let r = Config::load_with_env(Some(&missing), HashMap::new());
    assert!(matches!(r, Err(ConfigError::Load(_))), "{r:?}");

    let f = TempToml::new("[redlock\nnodes = 1");
    let r = Config::load_with_env(Some(f.path()), HashMap::new());
    assert!(matches!(r, Err(ConfigError::Load(_))), "{r:?}");
}

#[test]
fn shipped_example_parses_and_documents_the_defaults() {
    let f = TempToml::new(SHIPPED);
    let c = Config::load_with_env(Some(f.path()), HashMap::new()).unwrap();
    assert_eq!(c.redlock.nodes, FIVE);
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
    // Apart from the example nodes, the file states exactly the defaults.
    assert_eq!(c, valid());
    for key in [
        "listen",
        "shutdown_grace",
        "nodes",
        "key_prefix",
        "node_timeout",
        "drift_factor",
        "min_ttl",
        "max_ttl",
        "max_wait",
        "max_resource_len",
        "retry_delay_min",
        "retry_delay_max",
        "fence_ttl",
        "wake_on_release",
        "wait_fallback",
        "restart_quarantine",
        "max_waiters_per_resource",
        "max_waiters",
        "max_sessions",
        "extend_at",
        "first_message_timeout",
        "enabled",
        "format",
        "max_request_bytes",
        "rate_per_second",
        "burst",
        "max_calls_per_connection",
        "cert",
        "key",
        "client_ca",
        "name",
        "token_sha256",
        "certificate_san",
        "namespaces",
        "username",
        "password_file",
        "password_env",
        "tls_ca",
    ] {
        // Keys without a useful default are documented as commented examples.
        let documented = SHIPPED.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with(&format!("{key} =")) || l.starts_with(&format!("# {key} ="))
        });
        assert!(documented, "{key} is missing from config/redlockd.toml");
    }
}

/// `[testing] counterfactuals` parse from the environment's comma-separated
/// string and from a TOML list; an unknown name is an error, never ignored;
/// none is on by default, and any that is on is warned about at start-up.
#[test]
fn counterfactual_names() {
    let nodes = FIVE.join(",");
    let loaded = Config::load_with_env(
        None,
        env(&[
            ("REDLOCKD__REDLOCK__NODES", &nodes),
            (
                "REDLOCKD__TESTING__COUNTERFACTUALS",
                "recreate-without-limit, per-kind-fences",
            ),
        ]),
    )
    .expect("loads");
    let cf = loaded.testing.counterfactuals;
    assert!(cf.recreate_without_limit && cf.per_kind_fences);
    assert!(loaded
        .warnings()
        .iter()
        .any(|w| w.contains("per-kind-fences")));
    let file = TempToml::new("[testing]\ncounterfactuals = [\"per-kind-fences\"]\n");
    let loaded = Config::load_with_env(
        Some(file.path()),
        env(&[("REDLOCKD__REDLOCK__NODES", &nodes)]),
    )
    .expect("loads");
    assert_eq!(
        loaded.testing.counterfactuals.names(),
        vec!["per-kind-fences"]
    );
    assert!(!Config::default().testing.counterfactuals.any());
    assert!(valid()
        .warnings()
        .iter()
        .all(|w| !w.contains("counterfactual")));
    let error = load_err(
        None,
        &[
            ("REDLOCKD__REDLOCK__NODES", &nodes),
            ("REDLOCKD__TESTING__COUNTERFACTUALS", "no-quorum"),
        ],
    );
    assert!(error.contains("no-quorum"), "{error}");
}
