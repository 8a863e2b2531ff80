//! An election's messages as the lock engine's: its name as a resource of
//! a key family no lock reaches, a Campaign's opening as an acquisition,
//! and a granted lock as a leadership. Apart from the service, so that the
//! session code (`super::super::hold`) can use them.

use crate::pb;
use crate::redlock::Lock;
use crate::service::proto_duration;
use crate::service::request::{invalid, AcquireArgs, InvalidRequest, RequestBounds};

pub(crate) use crate::redlock::keys::{election_name as name_of, election_resource as resource_of};

/// A Campaign's opening as the acquisition it is: its name checked as a
/// resource, its value as an owner label, its ttl as a Hold's; it waits
/// (`max_wait` at a time, again until elected).
pub(crate) fn campaign_args(
    bounds: &RequestBounds,
    start: pb::campaign_request::Start,
) -> Result<AcquireArgs, InvalidRequest> {
    let request = pb::AcquireRequest {
        resource: start.name,
        ttl: start.ttl,
        wait: Some(proto_duration(bounds.max_wait)),
        owner: start.value,
        ..pb::AcquireRequest::default()
    };
    let mut args = bounds.acquire(request).map_err(election_field)?;
    args.resource = resource_of(&args.resource);
    Ok(args)
}

/// An election's name, checked as a resource name is.
pub(super) fn checked_name(bounds: &RequestBounds, name: String) -> Result<String, InvalidRequest> {
    bounds.resource(name).map_err(election_field)
}

/// A field error in an election's words (`name`, `value`).
pub(super) fn election_field(error: InvalidRequest) -> InvalidRequest {
    let field = match error.field {
        "resource" => "name",
        "owner" => "value",
        field => field,
    };
    invalid(field, error.reason)
}

/// A leadership as its leader is told it.
pub(crate) fn leadership(lock: Lock, value: &str) -> pb::Leadership {
    let validity = proto_duration(lock.deadline.left());
    pb::Leadership {
        name: name_of(&lock.resource).unwrap_or_default().to_owned(),
        term: lock.fence,
        token: lock.token.expose().to_owned(),
        validity: Some(validity),
        value: value.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names map to a key family no resource can reach, and back.
    #[test]
    fn election_resources_are_apart_from_locks() {
        let resource = resource_of("jobs");
        assert_eq!(name_of(&resource), Some("jobs"));
        assert_eq!(name_of("jobs"), None);
        assert_eq!(name_of("election/jobs"), None);
        let bounds = RequestBounds::from(&crate::config::RedlockConfig::default());
        assert!(
            bounds.resource(resource).is_err(),
            "a client could name an election's resource"
        );
    }
}
