//! Putting a held lock back on masters that lost its key (a restart), in
//! the background after an Extend, and getting out of the way of its
//! release.
//!
//! A re-creation waits up to `node_timeout` for late Extend answers, then
//! sends `SET NX` to the masters that lost the key. A Release of the same
//! lock sent in between would find nothing to delete on such a master, and
//! the re-creation would then put the released token back for a whole ttl:
//! one master fewer could fail before nobody can acquire the resource, and
//! `was_held` would be answered for a lock that lives on. So a release
//! first cancels the lock's pending re-creations and waits until they have
//! stopped: a `SET NX` already handed to a master's queue reaches it before
//! the release's delete (a master's commands go out in submission order,
//! see `crate::valkey::batch`), and the delete removes it.

use super::round::{self, Reply, Subject};
use super::{ExtendVote, Master, Token};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::task::JoinHandle;

/// One pending re-creation.
struct Entry {
    resource: String,
    token: Token,
    task: JoinHandle<()>,
}

/// The re-creations in progress, so that a release can cancel its lock's.
#[derive(Default)]
pub(crate) struct Recreations {
    next: AtomicU64,
    pending: Mutex<HashMap<u64, Entry>>,
}

impl Recreations {
    /// Puts the lock of `subject` back (for `ttl`, see [`Lease`]), in the
    /// background, on the masters in `missing` and on those whose late
    /// answer (among `stragglers`, heard for up to `timeout`) says they
    /// lost it.
    pub(crate) fn start(
        self: &Arc<Self>,
        nodes: Vec<Arc<dyn Master>>,
        subject: &Arc<Subject>,
        lease: Lease,
        timeout: Duration,
        missing: Vec<usize>,
        stragglers: round::Pending,
    ) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let registry = Arc::downgrade(self);
        let work = recreate(
            nodes,
            Arc::clone(subject),
            lease,
            timeout,
            missing,
            stragglers,
        );
        // Registered before the task can finish and remove itself.
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let task = tokio::spawn(async move {
            work.await;
            if let Some(registry) = registry.upgrade() {
                registry
                    .pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&id);
            }
        });
        pending.insert(
            id,
            Entry {
                resource: subject.resource.clone(),
                token: subject.token.clone(),
                task,
            },
        );
    }

    /// Cancels the pending re-creations of `token`'s lock on `resource`
    /// and waits until none of them can send anything more.
    pub(crate) async fn cancel(&self, resource: &str, token: &Token) {
        let tasks: Vec<JoinHandle<()>> = {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            if pending.is_empty() {
                return;
            }
            let ids: Vec<u64> = pending
                .iter()
                .filter(|(_, e)| e.resource == resource && &e.token == token)
                .map(|(id, _)| *id)
                .collect();
            ids.iter()
                .filter_map(|id| pending.remove(id))
                .map(|entry| entry.task)
                .collect()
        };
        for task in &tasks {
            task.abort();
        }
        for task in tasks {
            // Cancelled (or finished): it sends nothing more.
            let _ = task.await;
        }
    }
}

/// How long a re-created key lives: the Extend's `ttl`, and the fence
/// hash's `fence_ttl` (a permit's key comes back with its semaphore's
/// limit record there, see `Master::recreate`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lease {
    pub(crate) ttl: Duration,
    pub(crate) fence_ttl: Duration,
}

/// The re-creation itself: late answers first, then one master at a time.
async fn recreate(
    nodes: Vec<Arc<dyn Master>>,
    subject: Arc<Subject>,
    lease: Lease,
    timeout: Duration,
    missing: Vec<usize>,
    stragglers: round::Pending,
) {
    use futures::StreamExt;
    let late = stragglers.filter_map(|(index, reply)| async move {
        matches!(reply, Ok(Reply::Extend(ExtendVote::Missing))).then_some(index)
    });
    let late = late.take_until(tokio::time::sleep(timeout));
    let lost: Vec<usize> = futures::stream::iter(missing).chain(late).collect().await;
    for index in lost {
        let put_back =
            nodes[index].recreate(&subject.keys, &subject.token, lease.ttl, lease.fence_ttl);
        if let Ok(Ok(true)) = tokio::time::timeout(timeout, put_back).await {
            tracing::info!(node = nodes[index].name(), resource = %subject.resource,
                "put a held lock back on a master that had lost it");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake::{self, Behaviour};
    use super::super::{LockKeys, Redlock, Settings};
    use std::time::Duration;

    const NODE_TIMEOUT: Duration = Duration::from_millis(50);
    const TTL: Duration = Duration::from_secs(10);

    fn settings() -> Settings {
        super::super::fake::settings(NODE_TIMEOUT)
    }

    /// A release right after an extend is not overtaken by its re-creation: master 2 lost the key (a restart), master 3 hangs;
    /// the client extends (a majority still holds it, so master 2 is due a
    /// re-creation once master 3's answer is given up on) and releases at
    /// once. The release is answered `was_held`, and the released token
    /// must not come back on master 2 afterwards.
    #[tokio::test(start_paused = true)]
    async fn a_release_right_after_an_extend_is_not_overtaken() {
        let fakes = fake::five();
        let engine = Redlock::new(fake::as_nodes(&fakes), settings()).expect("five masters");
        let keys = LockKeys::new("t:", "orders/42");
        let lock = engine
            .acquire("orders/42", TTL, Duration::ZERO)
            .await
            .expect("granted");
        fakes[2].state().locks.clear();
        fakes[3].set(Behaviour::Slow(Duration::from_secs(60)));
        engine
            .extend(&lock.resource, &lock.token, TTL)
            .await
            .expect("extended on a majority");
        let was_held = engine
            .release(&lock.resource, &lock.token)
            .await
            .expect("a majority answered");
        assert!(was_held);
        // Well past the moment the re-creation would have written.
        tokio::time::sleep(NODE_TIMEOUT * 20).await;
        for (i, fake) in fakes.iter().enumerate() {
            assert_eq!(
                fake.holder(&keys),
                None,
                "the released lock is back on master {i}"
            );
        }
    }

    /// Without a release, the re-creation does its job: the key is back on
    /// the master that lost it.
    #[tokio::test(start_paused = true)]
    async fn an_extend_puts_a_lost_key_back() {
        let fakes = fake::five();
        let engine = Redlock::new(fake::as_nodes(&fakes), settings()).expect("five masters");
        let keys = LockKeys::new("t:", "orders/42");
        let lock = engine
            .acquire("orders/42", TTL, Duration::ZERO)
            .await
            .expect("granted");
        fakes[2].state().locks.clear();
        fakes[3].set(Behaviour::Slow(Duration::from_secs(60)));
        engine
            .extend(&lock.resource, &lock.token, TTL)
            .await
            .expect("extended on a majority");
        tokio::time::sleep(NODE_TIMEOUT * 20).await;
        assert_eq!(fakes[2].holder(&keys).as_deref(), Some(lock.token.expose()));
    }
}
