//! The draining stop: on SIGTERM the daemon stops taking new work but keeps
//! the locks of open `Hold` sessions alive until their clients are done or
//! `server.shutdown_grace` runs out. An application that got the same
//! SIGTERM (a sidecar pod) may still be inside its critical section; taking
//! its lock away at once would let another holder in beside it.
//!
//! Phases, in order: serving; draining (new Acquire and Hold calls and
//! waiting acquisitions get UNAVAILABLE, sessions are told and kept);
//! stopping (the grace is over or every session has ended: what is left is
//! no longer extended, its sessions are told `lost`, and the server ends).
//! Unary Extend, Release and Validate are served in every phase, so that a
//! client can still give its lock back.

use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Where the daemon is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Taking work.
    Serving,
    /// Stopping gracefully: sessions are kept until `until`.
    Draining {
        /// When the grace runs out and the rest is left to expire.
        until: Instant,
    },
    /// Releasing what is left and ending.
    Stopping,
}

/// New work refused, or an acquisition cut short, because the daemon is
/// draining: the client should call another replica (UNAVAILABLE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("draining: the daemon is stopping; call another replica")]
pub(crate) struct Draining;

/// The side that moves the phase on: the server.
#[derive(Debug)]
pub(crate) struct DrainControl {
    phase: watch::Sender<Phase>,
}

/// A view of the phase, for handlers and sessions; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct Drain {
    phase: watch::Receiver<Phase>,
}

/// A new control, serving, and a view of it.
pub(crate) fn channel() -> (DrainControl, Drain) {
    let (phase, view) = watch::channel(Phase::Serving);
    (DrainControl { phase }, Drain { phase: view })
}

impl DrainControl {
    /// Starts draining for `grace`; returns when it runs out. A second
    /// call keeps the first deadline.
    pub(crate) fn start(&self, grace: Duration) -> Instant {
        let until = Instant::now() + grace;
        let mut deadline = until;
        self.phase.send_modify(|phase| match *phase {
            Phase::Serving => *phase = Phase::Draining { until },
            Phase::Draining { until } => deadline = until,
            Phase::Stopping => {}
        });
        deadline
    }

    /// The grace is over: whatever is left is no longer extended.
    pub(crate) fn stop(&self) {
        self.phase.send_replace(Phase::Stopping);
    }
}

impl Drain {
    /// The current phase.
    pub(crate) fn phase(&self) -> Phase {
        *self.phase.borrow()
    }

    /// Refuses new work unless the daemon is serving.
    pub(crate) fn refuse_new(&self) -> Result<(), Draining> {
        match self.phase() {
            Phase::Serving => Ok(()),
            Phase::Draining { .. } | Phase::Stopping => Err(Draining),
        }
    }

    /// Completes once the daemon is no longer serving (at once if it is
    /// not); never if the control is gone while serving.
    pub(crate) async fn started(&self) {
        let mut phase = self.phase.clone();
        if phase.wait_for(|p| *p != Phase::Serving).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Completes once the daemon is stopping, or its control is gone.
    pub(crate) async fn stopping(&self) {
        let mut phase = self.phase.clone();
        let _ = phase.wait_for(|p| *p == Phase::Stopping).await;
    }

    /// Runs `work` unless the daemon drains before it is done, in which
    /// case `work` is dropped and the answer is [`Draining`].
    pub(crate) async fn unless_draining<F: Future>(&self, work: F) -> Result<F::Output, Draining> {
        tokio::select! {
            biased;
            () = self.started() => Err(Draining),
            output = work => Ok(output),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serving -> draining (deadline kept on a second start) -> stopping;
    /// new work is refused from draining on, and work in progress is cut
    /// short when draining starts.
    #[tokio::test(start_paused = true)]
    async fn phases_in_order() {
        let (control, drain) = channel();
        assert_eq!(drain.refuse_new(), Ok(()));
        let waiting = drain.unless_draining(std::future::pending::<()>());
        let first = control.start(Duration::from_secs(20));
        assert_eq!(waiting.await, Err(Draining));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(control.start(Duration::from_secs(20)), first);
        assert_eq!(drain.phase(), Phase::Draining { until: first });
        assert_eq!(drain.refuse_new(), Err(Draining));
        assert_eq!(drain.unless_draining(async { 7 }).await, Err(Draining));
        control.stop();
        drain.stopping().await;
        assert_eq!(drain.refuse_new(), Err(Draining));
    }
}
