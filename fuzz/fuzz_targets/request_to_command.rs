//! Fuzz target: the request-to-command path (`redlockd::service::inbound`).
//! The first byte picks the request type, the rest is the protobuf message
//! as a client could send it. Any input must give a command or a status,
//! never a panic; a command only for a resource inside the namespaces.
//!
//! `cargo +nightly fuzz run request_to_command` fuzzes; on stable,
//! `cargo run --no-default-features -- FILE...` replays files.

#![cfg_attr(feature = "libfuzzer", no_main)]

use redlockd::service::Identity;
use redlockd::service::inbound::{to_command, Rpc};
use redlockd::service::RequestBounds;
use std::time::Duration;

fn check(data: &[u8]) {
    let Some((&selector, message)) = data.split_first() else {
        return;
    };
    let limits = RequestBounds {
        min_ttl: Duration::from_millis(10),
        max_ttl: Duration::from_secs(3600),
        max_wait: Duration::from_secs(300),
        max_resource_len: 512,
        max_semaphore_limit: 1024,
        max_resources_per_lock: 16,
        max_lock_delay: Duration::from_secs(60),
        max_hold_at_least: Duration::from_secs(300),
    };
    let identity = Identity::with_namespaces("fuzz", vec!["orders/".into()]);
    let rpc = Rpc::ALL[usize::from(selector) % Rpc::ALL.len()];
    if let Ok(command) = to_command(rpc, message, &limits, &identity, "redlock:") {
        assert!(command.keys.lock.starts_with("redlock:lock:orders/"));
    }
}

#[cfg(feature = "libfuzzer")]
libfuzzer_sys::fuzz_target!(|data: &[u8]| check(data));

#[cfg(not(feature = "libfuzzer"))]
fn main() {
    let mut n = 0;
    for path in std::env::args().skip(1) {
        match std::fs::read(&path) {
            Ok(data) => {
                check(&data);
                n += 1;
            }
            Err(e) => eprintln!("{path}: {e}"),
        }
    }
    println!("{n} inputs replayed without a panic");
}
