//! The unary Acquire an `Acquire<Lock>` sends when awaited, and what it
//! does when the answer does not come (`unanswered.rs`).

use crate::acquire::{Acquire, BoxFuture};
use crate::client::missing;
use crate::error::Error;
use crate::lock::Lock;
use crate::unanswered::{answered_by_daemon, token_of, Unanswered};
use std::future::IntoFuture;
use std::time::Instant;

impl IntoFuture for Acquire<Lock> {
    type Output = Result<Lock, Error>;
    type IntoFuture = BoxFuture<Lock>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(acquire(self))
    }
}

/// One unary Acquire; see [`Acquire`] for what dropping it does.
async fn acquire(call: Acquire<Lock>) -> Result<Lock, Error> {
    let request = call.request()?;
    let limit = call.limit_of_call();
    let deadline = tokio::time::Instant::now() + limit;
    let inner = &call.client.inner;
    let token = token_of(&request);
    if let Some(token) = &token {
        // A retry with the same request id waits for the release of the
        // unanswered call before it, which would otherwise release the
        // retry's lock (same request id, same token).
        if tokio::time::timeout_at(deadline, inner.releases.settled(token))
            .await
            .is_err()
        {
            return Err(Error::local_deadline("Acquire", limit));
        }
    }
    let resource = request.resource.clone();
    let unanswered = Unanswered::new(&inner.releases, &inner.stub, &resource, token);
    let mut stub = inner.stub.clone();
    let mut message = tonic::Request::new(request);
    message.set_timeout(deadline.saturating_duration_since(tokio::time::Instant::now()));
    let sent = Instant::now();
    match tokio::time::timeout_at(deadline, stub.acquire(message)).await {
        Ok(Ok(response)) => {
            let wire = response.into_inner().lock;
            // An answer without its lock leaves `unanswered` armed: release.
            let wire = wire.ok_or_else(|| missing("Acquire", "lock"))?;
            unanswered.answered();
            Ok(Lock::from_wire(wire, sent))
        }
        Ok(Err(status)) => {
            if answered_by_daemon(&status) {
                unanswered.answered();
            }
            Err(Error::from_call("Acquire", limit, status))
        }
        // `unanswered` drops armed: the derived token is released.
        Err(_) => Err(Error::local_deadline("Acquire", limit)),
    }
}
