//! A daemon served in-process by `redlockd::run`, the seam the binary
//! uses too. It listens on a listener bound before it starts (port 0), so
//! no other process can take its port in between.

use crate::BoxError;
use redlockd::config::ValidConfig;
use redlockd::server::ServeError;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// One daemon running in-process; stopped (abruptly) when dropped, or
/// gracefully with [`Daemon::stop`].
pub struct Daemon {
    /// Where it listens (loopback, ephemeral port).
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ServeError>>>,
}

impl Daemon {
    /// Serves `config` on a loopback ephemeral port.
    pub async fn start(config: ValidConfig) -> Result<Daemon, BoxError> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(redlockd::run(config, listener, async {
            let _ = stopped.await;
        }));
        Ok(Daemon {
            addr,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// Asks it to stop and waits (at most `limit`) until it has; what it
    /// ended with.
    pub async fn stop(mut self, limit: Duration) -> Result<(), BoxError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Some(mut task) = self.task.take() else {
            return Ok(());
        };
        match tokio::time::timeout(limit, &mut task).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(error))) => Err(error.into()),
            Ok(Err(join)) => Err(join.into()),
            Err(_) => {
                task.abort();
                Err(format!("the daemon did not stop within {limit:?}").into())
            }
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
