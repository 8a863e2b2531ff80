//! SIGTERM and SIGINT as futures: the first starts the daemon's draining
//! stop, a second ends the drain at once (an operator who does not want to
//! wait for the grace).

use tokio::sync::watch;

/// The stop signals received so far; cheap to clone.
#[derive(Debug, Clone)]
pub struct StopSignals {
    count: watch::Receiver<u32>,
}

impl StopSignals {
    /// Starts listening for SIGTERM and SIGINT (Ctrl-C) on a task of its
    /// own, which ends when every clone of the returned value is gone.
    pub fn listen() -> StopSignals {
        let (count, view) = watch::channel(0u32);
        tokio::spawn(async move {
            let mut signals = Signals::register();
            loop {
                tokio::select! {
                    () = signals.next() => count.send_modify(|n| *n = n.saturating_add(1)),
                    () = count.closed() => return,
                }
            }
        });
        StopSignals { count: view }
    }

    /// Completes once `n` stop signals have been received.
    pub async fn nth(&self, n: u32) {
        let mut count = self.count.clone();
        if count.wait_for(|received| *received >= n).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The signal streams, registered once so that a signal arriving between
/// two waits is not missed.
struct Signals {
    #[cfg(unix)]
    unix: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl Signals {
    fn register() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let unix = match (
                signal(SignalKind::terminate()),
                signal(SignalKind::interrupt()),
            ) {
                (Ok(term), Ok(int)) => Some((term, int)),
                (Err(error), _) | (_, Err(error)) => {
                    tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops the daemon");
                    None
                }
            };
            Signals { unix }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    /// The next SIGTERM or SIGINT.
    async fn next(&mut self) {
        #[cfg(unix)]
        if let Some((term, int)) = &mut self.unix {
            tokio::select! {
                _ = term.recv() => {}
                _ = int.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}
