//! A client that sends a call's DATA after its own RST_STREAM keeps its
//! connection. grpc-java does when a deadline fires while a call is still
//! being written: its RST_STREAM(CANCEL), then the message's DATA. If the
//! daemon's handler gave up at the same moment (the same deadline, from
//! the grpc-timeout header), h2 has a reset of its own queued for that
//! stream; the client's reset arrives first, and h2 0.4.20 then took the
//! DATA for a protocol violation of the whole connection and sent
//! GOAWAY(PROTOCOL_ERROR): every other call and Hold session on the
//! connection ended with it. RFC 9113 (section 5.1) makes such a frame at
//! most a stream error. CI saw it: grpc-java's "Abrupt GOAWAY closed sent
//! stream. HTTP/2 error code: PROTOCOL_ERROR" after fifty 1 ms deadlines
//! (clients/java UnansweredTest).
//!
//! The daemon builds with a patched h2 (vendor/README.md). Against the
//! daemon the order of the two resets is a race between threads, so this
//! test drives the h2 server the daemon runs on directly, in the order
//! that failed, and writes the client's frames by hand (no HTTP/2 library
//! sends them on purpose). Without the patch it fails on the first call.

mod common;

use common::frames::{
    header_block, put_frame, ACK, DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, PREFACE,
    RST_STREAM, SETTINGS,
};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;

/// RST_STREAM's error code CANCEL: the client no longer wants the call.
const CANCEL: u32 = 8;

/// Calls cancelled on the connection before the last one.
const CANCELLED: u32 = 50;

/// The HEADERS of a gRPC call, its fields plain literals.
fn call_headers(out: &mut Vec<u8>, stream: u32, flags: u8) {
    let block = header_block(&[
        (":method", "POST"),
        (":scheme", "http"),
        (":authority", "localhost"),
        (":path", "/redlock.v1.LockService/Validate"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ]);
    put_frame(out, HEADERS, END_HEADERS | flags, stream, &block);
}

/// The client's end of the connection.
struct Client {
    io: DuplexStream,
}

impl Client {
    async fn send(&mut self, bytes: &[u8]) {
        self.io.write_all(bytes).await.expect("write");
    }

    /// Reads frames until HEADERS that end `stream`. A GOAWAY, or the end
    /// of the connection, fails the test.
    async fn answered(&mut self, stream: u32) {
        loop {
            let mut head = [0u8; 9];
            if let Err(e) = self.io.read_exact(&mut head).await {
                panic!("the server closed the connection: {e}");
            }
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
            let mut payload = vec![0u8; len];
            self.io.read_exact(&mut payload).await.expect("payload");
            let (kind, flags) = (head[3], head[4]);
            if kind == GOAWAY {
                let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
                panic!("the server sent GOAWAY, error code {code} (1: PROTOCOL_ERROR)");
            }
            if kind == SETTINGS && flags & ACK == 0 {
                let mut ack = Vec::new();
                put_frame(&mut ack, SETTINGS, ACK, 0, &[]);
                self.send(&ack).await;
            }
            if kind == HEADERS && id == stream && flags & END_STREAM != 0 {
                return;
            }
        }
    }
}

/// Each of 50 calls: its HEADERS; once the server has taken the call up,
/// its RST_STREAM(CANCEL) and its message, together; then the server's
/// handler gives up. A last call on the same connection is answered.
#[tokio::test]
async fn data_after_the_clients_own_reset_keeps_the_connection() {
    let (client_io, server_io) = tokio::io::duplex(1 << 20);
    let (accepted, mut taken) = mpsc::unbounded_channel();
    let (written, mut sent) = mpsc::unbounded_channel::<()>();
    let server = tokio::spawn(async move {
        let mut connection = h2::server::handshake(server_io).await?;
        while let Some(request) = connection.accept().await {
            let (request, mut respond) = request?;
            if request.body().is_end_stream() {
                let answer = http::Response::builder()
                    .status(200)
                    .body(())
                    .expect("answer");
                respond.send_response(answer, true)?;
                continue;
            }
            let _ = accepted.send(());
            // The client's reset and message are on their way; then the
            // handler gives up (its deadline): h2 schedules a reset of its
            // own, sent on the connection's next turn.
            let _ = sent.recv().await;
            drop((request, respond));
        }
        Ok::<_, h2::Error>(())
    });
    let mut client = Client { io: client_io };
    let mut hello = PREFACE.to_vec();
    put_frame(&mut hello, SETTINGS, 0, 0, &[]);
    client.send(&hello).await;
    let mut stream = 1;
    for _ in 0..CANCELLED {
        let mut opened = Vec::new();
        call_headers(&mut opened, stream, 0);
        client.send(&opened).await;
        let took = tokio::time::timeout(Duration::from_secs(10), taken.recv())
            .await
            .expect("the server took the call up within 10 s");
        if took.is_none() {
            let ended = server.await.expect("the server's task");
            panic!("the server's connection ended: {ended:?}");
        }
        let mut then = Vec::new();
        put_frame(&mut then, RST_STREAM, 0, stream, &CANCEL.to_be_bytes());
        put_frame(&mut then, DATA, END_STREAM, stream, &[0; 5]);
        client.send(&then).await;
        let _ = written.send(());
        stream += 2;
    }
    let mut last = Vec::new();
    call_headers(&mut last, stream, END_STREAM);
    client.send(&last).await;
    tokio::time::timeout(Duration::from_secs(10), client.answered(stream))
        .await
        .expect("the last call answered within 10 s");
    server.abort();
}
