//! Changes of a resource's holder that this replica hears of: every
//! replica's elections' grants and releases ([`super::notices`]). An observer (an election's `Observe`) re-reads the
//! holder when one names its resource, rather than on a timer.
//!
//! A broadcast of resource names: cheap when nobody listens (nothing is
//! sent), and a listener that falls behind is told it lagged, which it
//! treats as a change (it re-reads).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::broadcast;

/// Announcements buffered per listener before it lags.
const BUFFERED: usize = 256;

/// The replica's announcements of holder changes.
pub(crate) struct Changes {
    sender: broadcast::Sender<Arc<str>>,
    /// Listeners alive: read on every release without the broadcast's
    /// lock, so that a replica nobody observes pays one atomic load.
    listening: Arc<AtomicUsize>,
}

impl Default for Changes {
    fn default() -> Changes {
        Changes {
            sender: broadcast::channel(BUFFERED).0,
            listening: Arc::default(),
        }
    }
}

impl Changes {
    /// Tells every listener that `resource`'s holder may have changed.
    pub(crate) fn announce(&self, resource: &str) {
        if self.listening.load(Ordering::Relaxed) > 0 {
            let _ = self.sender.send(Arc::from(resource));
        }
    }

    /// A listener, hearing announcements made from now on.
    pub(crate) fn listen(&self) -> Listener {
        self.listening.fetch_add(1, Ordering::Relaxed);
        Listener {
            receiver: self.sender.subscribe(),
            listening: Arc::clone(&self.listening),
        }
    }
}

/// One listener of [`Changes`].
pub(crate) struct Listener {
    receiver: broadcast::Receiver<Arc<str>>,
    listening: Arc<AtomicUsize>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.listening.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Listener {
    /// Completes when `resource` may have changed: announced, or some
    /// announcements were missed (this listener lagged). Never completes
    /// once the engine is gone.
    pub(crate) async fn changed(&mut self, resource: &str) {
        loop {
            match self.receiver.recv().await {
                Ok(announced) if &*announced == resource => return,
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => return,
                Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Changes;
    use std::time::Duration;

    /// A listener wakes for its resource only, and for a lag; nobody
    /// listening, nothing is sent.
    #[tokio::test]
    async fn wakes_for_its_resource() {
        let changes = Changes::default();
        changes.announce("unheard");
        assert_eq!(changes.sender.len(), 0, "sent with nobody listening");
        let mut listener = changes.listen();
        changes.announce("other");
        changes.announce("mine");
        tokio::time::timeout(Duration::from_secs(5), listener.changed("mine"))
            .await
            .expect("woken by its resource");
        changes.announce("other");
        let quiet = tokio::time::timeout(Duration::from_millis(20), listener.changed("mine")).await;
        assert!(quiet.is_err(), "another resource's change woke it");
        for _ in 0..super::BUFFERED + 1 {
            changes.announce("other");
        }
        tokio::time::timeout(Duration::from_secs(5), listener.changed("mine"))
            .await
            .expect("a lagging listener re-reads");
        drop(listener);
        assert_eq!(changes.listening.load(super::Ordering::Relaxed), 0);
    }
}
