//! Property tests of request validation: any request, valid or not, either
//! passes or is refused with INVALID_ARGUMENT naming one of its fields (or
//! PERMISSION_DENIED for a foreign namespace); nothing panics, and what
//! passes keeps every rule.

use crate::pb;
use crate::service::auth::Identity;
use crate::service::inbound::{to_command, Rpc};
use crate::service::request::RequestBounds;
use proptest::prelude::*;
use std::time::Duration;
use tonic::Code;

fn limits() -> RequestBounds {
    RequestBounds {
        min_ttl: Duration::from_millis(10),
        max_ttl: Duration::from_secs(3600),
        max_wait: Duration::from_secs(300),
        max_resource_len: 64,
        max_semaphore_limit: 64,
        max_resources_per_lock: 16,
        max_lock_delay: Duration::from_secs(60),
        max_hold_at_least: Duration::from_secs(3600),
    }
}

const FIELDS: [&str; 5] = ["resource", "ttl", "wait", "owner", "token"];

fn duration() -> impl Strategy<Value = Option<prost_types::Duration>> {
    prop_oneof![
        Just(None),
        (any::<i64>(), any::<i32>())
            .prop_map(|(seconds, nanos)| Some(prost_types::Duration { seconds, nanos })),
        (0i64..4000, 0i32..1_000_000_000)
            .prop_map(|(seconds, nanos)| Some(prost_types::Duration { seconds, nanos })),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "\\PC{0,80}",
        any::<String>(),
        "[a-z/]{1,70}",
        "[0-9a-f]{32}",
        Just(String::new()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// An Acquire passes with every rule kept, or names its field.
    #[test]
    fn acquire_validates_or_names_a_field(
        resource in text(), ttl in duration(), wait in duration(), owner in text(),
    ) {
        let request = pb::AcquireRequest {
            resource,
            ttl,
            wait,
            owner,
            ..Default::default()
        };
        match limits().acquire(request) {
            Ok(args) => {
                prop_assert!(!args.resource.is_empty() && args.resource.len() <= 64);
                prop_assert!(!args.resource.chars().any(char::is_control));
                prop_assert!(args.ttl >= limits().min_ttl && args.ttl <= limits().max_ttl);
                prop_assert!(args.wait <= limits().max_wait);
            }
            Err(e) => {
                prop_assert!(FIELDS.contains(&e.field));
                prop_assert_eq!(tonic::Status::from(e).code(), Code::InvalidArgument);
            }
        }
    }

    /// Extend, Release and Validate: the same, and a token that passes has
    /// the shape the daemon issues.
    #[test]
    fn lock_refs_validate_or_name_a_field(
        resource in text(), token in text(), ttl in duration(),
    ) {
        match limits().extend(pb::ExtendRequest { resource: resource.clone(), token: token.clone(), ttl }) {
            Ok(args) => prop_assert_eq!(args.token.expose(), token.as_str()),
            Err(e) => prop_assert!(FIELDS.contains(&e.field)),
        }
        match limits().lock_ref(resource, &token) {
            Ok(r) => prop_assert!(r.token.expose().len() == 32),
            Err(e) => prop_assert!(FIELDS.contains(&e.field)),
        }
    }

    /// Raw bytes as any request type: a command, INTERNAL (not protobuf),
    /// INVALID_ARGUMENT or PERMISSION_DENIED; a command only inside the
    /// namespaces.
    #[test]
    fn raw_bytes_never_panic(
        rpc in 0usize..5, bytes in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let identity = Identity::with_namespaces("t", vec!["a".into()]);
        let rpc = Rpc::ALL[rpc];
        match to_command(rpc, &bytes, &limits(), &identity, "redlock:") {
            Ok(command) => prop_assert!(command.keys.lock.starts_with("redlock:lock:a")),
            Err(status) => prop_assert!(matches!(
                status.code(),
                Code::Internal | Code::InvalidArgument | Code::PermissionDenied
            )),
        }
    }
}
