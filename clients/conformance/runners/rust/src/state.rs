//! What one scenario's steps share, by the names the scenario gives them:
//! locks, leases, calls under way and fences; the fence checks; and the
//! scenario's end, which leaves nothing of it running or held by a lease.

use crate::spec::{FenceRef, Step};
use redlockd_client::{Error, Lease, Lock};
use std::collections::HashMap;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::timeout;

/// How long the end of a scenario waits for each lease it left open to be
/// released.
const CLEANUP_LIMIT: Duration = Duration::from_secs(5);

/// A call started by `acquire_async` or `hold_async`, awaited by `await`
/// or `await_hold`: a spawned task (the client's futures are `'static`).
pub(crate) enum Pending {
    Lock(JoinHandle<Result<Lock, Error>>),
    Lease(JoinHandle<Result<Lease, Error>>),
}

/// What one scenario's steps share, by name.
#[derive(Default)]
pub(crate) struct State {
    locks: HashMap<String, Lock>,
    pub(crate) leases: HashMap<String, Lease>,
    pub(crate) pending: HashMap<String, Pending>,
    fences: HashMap<String, u64>,
}

impl State {
    pub(crate) fn lock(&self, name: &str) -> Result<&Lock, String> {
        self.locks
            .get(name)
            .ok_or_else(|| format!("no lock saved as {name:?}"))
    }

    pub(crate) fn lease(&self, name: &str) -> Result<&Lease, String> {
        self.leases
            .get(name)
            .ok_or_else(|| format!("no lease {name:?}"))
    }

    fn fence_of(&self, reference: &FenceRef) -> Result<u64, String> {
        match reference {
            FenceRef::Number(fence) => Ok(*fence),
            FenceRef::Saved(name) => self
                .fences
                .get(name)
                .copied()
                .ok_or_else(|| format!("no fence saved as {name:?}")),
        }
    }

    /// Checks `fence_above` and `fence_equal`.
    fn check_fence(&self, step: &Step, fence: u64) -> Result<(), String> {
        if let Some(reference) = &step.fence_above {
            let floor = self.fence_of(reference)?;
            if fence <= floor {
                return Err(format!("fence {fence} not above {floor}"));
            }
        }
        if let Some(reference) = &step.fence_equal {
            let other = self.fence_of(reference)?;
            if fence != other {
                return Err(format!("fence {fence} differs from {other}"));
            }
        }
        Ok(())
    }

    /// A granted lock (if the step expected one): its fence checked, then
    /// saved under `save`.
    pub(crate) fn keep_lock(&mut self, step: &Step, lock: Option<Lock>) -> Result<(), String> {
        let Some(lock) = lock else { return Ok(()) };
        self.check_fence(step, lock.fence())?;
        if let Some(name) = &step.save {
            self.fences.insert(name.clone(), lock.fence());
            self.locks.insert(name.clone(), lock);
        }
        Ok(())
    }

    /// A granted lease (if the step expected one): kept under `lease`
    /// (so that the scenario's end releases it whatever follows), its
    /// fence saved there and checked.
    pub(crate) fn keep_lease(&mut self, step: &Step, lease: Option<Lease>) -> Result<(), String> {
        let Some(lease) = lease else { return Ok(()) };
        let fence = lease.fence();
        self.leases.insert(step.lease.clone(), lease);
        self.fences.insert(step.lease.clone(), fence);
        self.check_fence(step, fence)
    }

    /// Stops the calls still under way (dropping an acquire or a Hold
    /// before its grant leaves nothing locked) and releases the leases
    /// still open.
    pub(crate) async fn close(self) {
        for pending in self.pending.into_values() {
            match pending {
                Pending::Lock(task) => task.abort(),
                Pending::Lease(task) => task.abort(),
            }
        }
        for lease in self.leases.into_values() {
            let _ = timeout(CLEANUP_LIMIT, lease.release()).await;
        }
    }
}
