//! W1's `library` mode: the `rslock` crate in-process over the same masters,
//! what a service would link instead of calling the daemon. Built only with
//! the `bench-library` feature (rslock brings the `redis` crate and rustls).

use crate::BoxError;
use std::time::Duration;

/// An rslock lock manager over the masters.
pub(crate) struct Library {
    #[cfg(feature = "bench-library")]
    manager: rslock::LockManager,
}

#[cfg(feature = "bench-library")]
impl Library {
    /// A manager over `nodes`, one attempt per acquisition (W1 never
    /// contends, and the other modes do not retry either).
    pub(crate) fn new(nodes: &[String]) -> Result<Library, BoxError> {
        let urls = nodes.to_vec();
        // rslock unwraps its URL parsing; keep a bad URL an error, not a crash.
        let mut manager = std::panic::catch_unwind(|| rslock::LockManager::new(urls))
            .map_err(|_| "rslock rejected a master URL")?;
        manager.set_retry(1, Duration::from_millis(10));
        Ok(Library { manager })
    }

    /// One lock + unlock of `resource`: their latencies.
    pub(crate) async fn cycle(
        &self,
        resource: &str,
        ttl: Duration,
    ) -> Result<(Duration, Duration), BoxError> {
        let start = std::time::Instant::now();
        let lock = self
            .manager
            .lock(resource.as_bytes(), ttl)
            .await
            .map_err(|e| format!("rslock: {e:?}"))?;
        let acquired = start.elapsed();
        self.manager.unlock(&lock).await;
        Ok((acquired, start.elapsed() - acquired))
    }
}

#[cfg(not(feature = "bench-library"))]
impl Library {
    /// Always an error: this build has no rslock.
    pub(crate) fn new(_nodes: &[String]) -> Result<Library, BoxError> {
        Err("built without the bench-library feature (cargo ... --features bench-library)".into())
    }

    /// Never called: [`Library::new`] fails in this build.
    pub(crate) async fn cycle(
        &self,
        _resource: &str,
        _ttl: Duration,
    ) -> Result<(Duration, Duration), BoxError> {
        Err("built without the bench-library feature".into())
    }
}
