//! `redlock.v1.LockAdminService`: the operator's view. Each handler
//! checks the caller's admin role (`auth.admins`, when authentication is
//! on), validates the request, calls the engine (`crate::redlock::admin`)
//! and maps the outcome (`super::status`). Every ForceRelease is logged
//! with who did it (never with the token).

use super::auth::Gatekeeper;
use super::election::messages::{name_of, resource_of};
use super::hold::SessionRegistry;
use super::request::{invalid, InvalidRequest, RequestBounds};
use super::{observed, proto_duration, record_resource};
use crate::pb;
use crate::pb::lock_admin_service_server::LockAdminService;
use crate::redlock::{HeldLock, ListCursor, Redlock, SessionKind};
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// Locks per List page when the request says 0.
const DEFAULT_PAGE_SIZE: u32 = 100;
/// Most locks a List page may ask for: bounds one call's work.
const MAX_PAGE_SIZE: u32 = 1000;

/// The `redlock.v1.LockAdminService` implementation.
pub(crate) struct AdminApi {
    engine: Arc<Redlock>,
    limits: RequestBounds,
    gate: Gatekeeper,
    sessions: SessionRegistry,
}

impl AdminApi {
    /// Serves `engine` to the admins `gate` knows; `sessions` are this
    /// replica's Hold sessions, which ForceRelease ends.
    pub(crate) fn new(
        engine: Arc<Redlock>,
        limits: RequestBounds,
        gate: Gatekeeper,
        sessions: SessionRegistry,
    ) -> AdminApi {
        AdminApi {
            engine,
            limits,
            gate,
            sessions,
        }
    }

    /// The caller, if it has the admin role: its name, for the logs.
    fn admin<T>(&self, request: &Request<T>) -> Result<Arc<str>, Status> {
        let identity = self.gate.identity_of(request)?;
        identity.permit_admin()?;
        Ok(identity.name)
    }
}

/// The lock an Inspect or ForceRelease names, checked: `resource`, or the
/// leadership of `election` (its resource, a key family apart from every
/// lock's, `super::election::messages`); exactly one of the two. Also the
/// name to log.
fn named(
    limits: &RequestBounds,
    resource: String,
    election: String,
) -> Result<(String, String), InvalidRequest> {
    match (resource.is_empty(), election.is_empty()) {
        (_, true) => limits.resource(resource).map(|r| (r.clone(), r)),
        (true, false) => {
            let name = limits
                .resource(election)
                .map_err(|error| invalid("election", error.reason))?;
            Ok((resource_of(&name), format!("election {name}")))
        }
        (false, false) => Err(invalid("election", "give resource or election, not both")),
    }
}

/// A List request's fields, checked.
fn list_args(
    limits: &RequestBounds,
    request: pb::ListRequest,
) -> Result<(String, usize, ListCursor), InvalidRequest> {
    if request.prefix.len() > limits.max_resource_len {
        return Err(invalid(
            "prefix",
            format!("longer than {} bytes", limits.max_resource_len),
        ));
    }
    if request.prefix.chars().any(char::is_control) {
        return Err(invalid("prefix", "contains control characters"));
    }
    let page_size = match request.page_size {
        0 => DEFAULT_PAGE_SIZE,
        n if n > MAX_PAGE_SIZE => {
            return Err(invalid("page_size", format!("at most {MAX_PAGE_SIZE}")));
        }
        n => n,
    };
    let from = match request.page_token.as_str() {
        "" => ListCursor::default(),
        token => ListCursor::parse(token)
            .ok_or_else(|| invalid("page_token", "not a token from a previous page"))?,
    };
    let page_size = usize::try_from(page_size).unwrap_or(usize::MAX);
    Ok((request.prefix, page_size, from))
}

impl From<HeldLock> for pb::LockInfo {
    fn from(lock: HeldLock) -> pb::LockInfo {
        let (kind, replica) = match lock.kind {
            SessionKind::Unary => (pb::SessionKind::Unary, String::new()),
            SessionKind::Hold { replica } => (pb::SessionKind::Hold, replica),
        };
        // An election's leadership shows as the election, not as its
        // internal resource name.
        let (resource, election) = match name_of(&lock.resource) {
            Some(name) => (String::new(), name.to_owned()),
            None => (lock.resource, String::new()),
        };
        pb::LockInfo {
            resource,
            election,
            owner: lock.owner,
            fence: lock.fence,
            acquired_at: lock.acquired_at.map(prost_types::Timestamp::from),
            remaining: Some(proto_duration(lock.remaining)),
            session_kind: kind.into(),
            replica,
        }
    }
}

#[tonic::async_trait]
impl LockAdminService for AdminApi {
    async fn inspect(
        &self,
        request: Request<pb::InspectRequest>,
    ) -> Result<Response<pb::InspectResponse>, Status> {
        observed("Inspect", async {
            self.admin(&request)?;
            let request = request.into_inner();
            let (resource, name) = named(&self.limits, request.resource, request.election)?;
            record_resource(&name);
            let lock = self.engine.inspect(&resource).await?;
            Ok(Response::new(pb::InspectResponse {
                held: lock.is_some(),
                lock: lock.map(pb::LockInfo::from),
            }))
        })
        .await
    }

    async fn list(
        &self,
        request: Request<pb::ListRequest>,
    ) -> Result<Response<pb::ListResponse>, Status> {
        observed("List", async {
            self.admin(&request)?;
            let (prefix, page_size, from) = list_args(&self.limits, request.into_inner())?;
            let page = self.engine.list(&prefix, page_size, from).await?;
            Ok(Response::new(pb::ListResponse {
                locks: page.locks.into_iter().map(pb::LockInfo::from).collect(),
                next_page_token: page.next.map(|at| at.to_string()).unwrap_or_default(),
            }))
        })
        .await
    }

    async fn force_release(
        &self,
        request: Request<pb::ForceReleaseRequest>,
    ) -> Result<Response<pb::ForceReleaseResponse>, Status> {
        observed("ForceRelease", async {
            let by = self.admin(&request)?;
            let request = request.into_inner();
            let (resource, name) = named(&self.limits, request.resource, request.election)?;
            record_resource(&name);
            let released = self.engine.force_release(&resource).await?;
            let session_ended = released
                .as_ref()
                .is_some_and(|lock| self.sessions.end(&lock.token));
            tracing::warn!(
                resource = %name,
                by = %by,
                was_held = released.is_some(),
                owner = released.as_ref().map_or("", |l| l.owner.as_str()),
                fence = released.as_ref().map_or(0, |l| l.fence),
                session_ended,
                "force-release by an operator"
            );
            Ok(Response::new(pb::ForceReleaseResponse {
                was_held: released.is_some(),
                lock: released.map(pb::LockInfo::from),
            }))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn limits() -> RequestBounds {
        RequestBounds {
            min_ttl: Duration::from_millis(10),
            max_ttl: Duration::from_secs(60),
            max_wait: Duration::from_secs(60),
            max_resource_len: 16,
            max_semaphore_limit: 64,
            max_resources_per_lock: 16,
            max_lock_delay: Duration::from_secs(60),
            max_hold_at_least: Duration::from_secs(60),
        }
    }

    fn list(prefix: &str, page_size: u32, page_token: &str) -> pb::ListRequest {
        pb::ListRequest {
            prefix: prefix.into(),
            page_size,
            page_token: page_token.into(),
        }
    }

    /// Bad List fields are refused, naming the field.
    #[test]
    fn list_fields_named() {
        let l = limits();
        let field = |r| list_args(&l, r).err().map(|e| e.field);
        assert_eq!(field(list(&"x".repeat(17), 0, "")), Some("prefix"));
        assert_eq!(field(list("a\nb", 0, "")), Some("prefix"));
        assert_eq!(field(list("", 1001, "")), Some("page_size"));
        assert_eq!(field(list("", 10, "nonsense")), Some("page_token"));
        let (prefix, size, from) = list_args(&l, list("", 0, "")).expect("valid");
        assert_eq!(
            (prefix.as_str(), size, from),
            ("", 100, ListCursor::default())
        );
    }
}
