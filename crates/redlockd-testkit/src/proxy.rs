//! One TCP fault proxy for every suite: in front of a master (the chaos
//! checker, fault-tolerance tests) or of the daemon (a partition between a
//! client and the daemon), so the network can be made slow or cut without
//! touching either side.
//!
//! Faults for every connection, open or to come ([`Proxy::set`]):
//! - [`Mode::Pass`]: bytes are forwarded as they come.
//! - [`Mode::Slow`]: every chunk is delivered that long after it was read,
//!   in order (latency, not lower bandwidth).
//! - [`Mode::SlowAnswers`]: the same for what the upstream sends only; the
//!   client's bytes pass at once, so a daemon answers in time and the
//!   answer reaches the client after its deadline fired.
//! - [`Mode::Blackhole`]: nothing moves and nothing is closed, as when a
//!   network drops every packet. When the blackhole ends, every connection
//!   that lived through it is closed (the bytes it swallowed are lost, as
//!   dropped packets would be after a reset), so no late command from
//!   before reaches the other side.
//!
//! Faults for the connections open now only ([`Proxy::freeze_existing`],
//! [`Proxy::close_existing`]): later connections still forward, as when one
//! client's link breaks but a reconnection gets through.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// How long connecting upstream may take before the client side is closed
/// (the upstream is down).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward at once.
    Pass,
    /// Deliver every chunk this long after it was read.
    Slow(Duration),
    /// Deliver the upstream's chunks this long after they were read, the
    /// client's at once.
    SlowAnswers(Duration),
    /// Forward nothing; close the connections when it ends.
    Blackhole,
}

impl Mode {
    fn is_blackhole(&self) -> bool {
        *self == Mode::Blackhole
    }

    /// How late a chunk going to the client (`to_client`) or to the
    /// upstream is delivered.
    fn delay(&self, to_client: bool) -> Duration {
        match self {
            Mode::Slow(delay) => *delay,
            Mode::SlowAnswers(delay) if to_client => *delay,
            Mode::SlowAnswers(_) | Mode::Pass | Mode::Blackhole => Duration::ZERO,
        }
    }
}

/// Per-connection faults: connections whose number is at most the value
/// are frozen (`frozen`) or closed (`closed`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Cuts {
    frozen: u64,
    closed: u64,
}

/// One proxy; it stops accepting when dropped (open pipes end with their
/// connections).
#[derive(Debug)]
pub struct Proxy {
    /// Where clients connect.
    addr: SocketAddr,
    /// The mode of every connection, watched by every pipe.
    mode: watch::Sender<Mode>,
    /// Faults of the connections open at the time they were set.
    cuts: watch::Sender<Cuts>,
    /// Connections accepted so far (each one's id is its number).
    opened: Arc<AtomicU64>,
    /// The accept loop.
    task: JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub async fn start(upstream: SocketAddr) -> io::Result<Proxy> {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let (mode, modes) = watch::channel(Mode::Pass);
        let (cuts, cut_rx) = watch::channel(Cuts::default());
        let opened = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&opened);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let id = counter.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::spawn(pipe(client, upstream, id, modes.clone(), cut_rx.clone()));
            }
        });
        Ok(Proxy {
            addr,
            mode,
            cuts,
            opened,
            task,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Switches the mode for every connection, open or to come.
    pub fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }

    /// Freezes every connection open now (silent, never closed); later ones
    /// still forward.
    pub fn freeze_existing(&self) {
        let upto = self.opened.load(Ordering::SeqCst);
        self.cuts.send_modify(|cuts| cuts.frozen = upto);
    }

    /// Closes every connection open now, as a reset would; later ones
    /// still forward.
    pub fn close_existing(&self) {
        let upto = self.opened.load(Ordering::SeqCst);
        self.cuts.send_modify(|cuts| cuts.closed = upto);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Waits until the mode is no longer a blackhole.
async fn blackhole_ends(modes: &mut watch::Receiver<Mode>) {
    let _ = modes.wait_for(|m| !m.is_blackhole()).await;
}

/// How one connection's forwarding stopped.
enum Stopped {
    /// Either side closed, or the connection was closed by a fault.
    Closed,
    /// A blackhole began: silent until it ends, then closed.
    Blackhole,
    /// Frozen for good: silent until the proxy task goes away.
    Frozen,
}

/// One proxied connection, until either side closes or a fault ends it.
async fn pipe(
    client: TcpStream,
    upstream: SocketAddr,
    id: u64,
    mut modes: watch::Receiver<Mode>,
    mut cuts: watch::Receiver<Cuts>,
) {
    if modes.borrow().is_blackhole() {
        // Accepted by the kernel, then silence; closed when it ends.
        let _held = client;
        return blackhole_ends(&mut modes).await;
    }
    let server = tokio::select! {
        connected = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(upstream)) => {
            match connected {
                Ok(Ok(server)) => Some(server),
                _ => return,
            }
        }
        _ = modes.wait_for(Mode::is_blackhole) => None,
    };
    let Some(server) = server else {
        let _held = client;
        return blackhole_ends(&mut modes).await;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let stopped = {
        let up = forward(&mut client_read, &mut server_write, modes.clone(), false);
        let down = forward(&mut server_read, &mut client_write, modes.clone(), true);
        tokio::select! {
            _ = up => Stopped::Closed,
            _ = down => Stopped::Closed,
            _ = modes.wait_for(Mode::is_blackhole) => Stopped::Blackhole,
            cut = cuts.wait_for(|c| c.frozen >= id || c.closed >= id) => match cut {
                Ok(c) if c.closed >= id => Stopped::Closed,
                Ok(_) => Stopped::Frozen,
                Err(_) => Stopped::Closed,
            },
        }
    };
    let _held = (client_read, client_write, server_read, server_write);
    match stopped {
        Stopped::Closed => {}
        Stopped::Blackhole => blackhole_ends(&mut modes).await,
        Stopped::Frozen => std::future::pending::<()>().await,
    }
}

/// Copies `from` to `to` (the client's side: `to_client`), each chunk
/// delivered after the delay of the mode at the time it was read. Ends at
/// end of stream or on an error.
async fn forward(
    from: &mut OwnedReadHalf,
    to: &mut OwnedWriteHalf,
    modes: watch::Receiver<Mode>,
    to_client: bool,
) -> io::Result<()> {
    let mut queue: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    let mut buf = vec![0u8; 16 * 1024];
    let mut open = true;
    loop {
        let due = queue.front().map(|(at, _)| *at);
        tokio::select! {
            read = from.read(&mut buf), if open => {
                match read? {
                    0 => open = false,
                    n => {
                        let delay = modes.borrow().delay(to_client);
                        queue.push_back((Instant::now() + delay, buf[..n].to_vec()));
                    }
                }
            }
            _ = tokio::time::sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => {
                if let Some((_, chunk)) = queue.pop_front() {
                    to.write_all(&chunk).await?;
                }
            }
            else => {
                let _ = to.shutdown().await;
                return Ok(());
            }
        }
    }
}
