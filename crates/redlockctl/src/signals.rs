//! The signals `run` catches and forwards to its command's process group.
//! Catching them also keeps redlockctl alive (and the lock held) until the
//! command has reacted, instead of dying and leaving the command unlocked.

use futures::future::poll_fn;
use nix::sys::signal::Signal;
use std::task::Poll;
use tokio::signal::unix::{signal, SignalKind};

/// The signals forwarded: the ones whose default action would end
/// redlockctl and that a user or supervisor commonly sends.
const FORWARDED: [(Signal, SignalKind); 6] = [
    (Signal::SIGINT, SignalKind::interrupt()),
    (Signal::SIGTERM, SignalKind::terminate()),
    (Signal::SIGHUP, SignalKind::hangup()),
    (Signal::SIGQUIT, SignalKind::quit()),
    (Signal::SIGUSR1, SignalKind::user_defined1()),
    (Signal::SIGUSR2, SignalKind::user_defined2()),
];

/// Handlers for the forwarded signals, installed once.
pub(crate) struct Signals {
    streams: Vec<(Signal, tokio::signal::unix::Signal)>,
}

impl Signals {
    /// Installs the handlers (needs a running tokio runtime).
    pub(crate) fn install() -> std::io::Result<Signals> {
        let mut streams = Vec::with_capacity(FORWARDED.len());
        for (name, kind) in FORWARDED {
            streams.push((name, signal(kind)?));
        }
        Ok(Signals { streams })
    }

    /// The next signal received (cancel-safe).
    pub(crate) async fn recv(&mut self) -> Signal {
        poll_fn(|cx| {
            for (name, stream) in &mut self.streams {
                if let Poll::Ready(Some(())) = stream.poll_recv(cx) {
                    return Poll::Ready(*name);
                }
            }
            Poll::Pending
        })
        .await
    }
}
