//! A TCP proxy that passes the client's bytes at once and delivers the
//! daemon's `delay` after it sent them, in order (latency on the answers
//! only, as the conformance harness's `slow` daemon): a request reaches the
//! daemon at once and is granted in time, and its answer arrives late. The
//! test kit's proxy delays both ways, which would also delay the request
//! past the deadline. Stops accepting when dropped; open pipes end with
//! their connections.

use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The proxy; its address is where clients connect.
pub(crate) struct SlowAnswers {
    pub(crate) addr: SocketAddr,
    accept: JoinHandle<()>,
}

impl SlowAnswers {
    /// Listens on a free loopback port and forwards to `upstream`.
    pub(crate) async fn start(upstream: SocketAddr, delay: Duration) -> SlowAnswers {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                tokio::spawn(pipe(client, upstream, delay));
            }
        });
        SlowAnswers { addr, accept }
    }
}

impl Drop for SlowAnswers {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// One connection: requests straight through, answers `delay` late.
async fn pipe(client: TcpStream, upstream: SocketAddr, delay: Duration) {
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    tokio::spawn(async move {
        let _ = tokio::io::copy(&mut from_client, &mut to_server).await;
        let _ = to_server.shutdown().await;
    });
    let (chunks, mut due) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    tokio::spawn(async move {
        while let Some((at, chunk)) = due.recv().await {
            tokio::time::sleep_until(at).await;
            if to_client.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to_client.shutdown().await;
    });
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        match from_server.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if chunks
                    .send((Instant::now() + delay, buffer[..n].to_vec()))
                    .is_err()
                {
                    return;
                }
            }
        }
    }
}
