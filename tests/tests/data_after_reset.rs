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

use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const GOAWAY: u8 = 7;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;
const CANCEL: u32 = 8;

/// Calls cancelled on the connection before the last one.
const CANCELLED: u32 = 50;

/// One HTTP/2 frame.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).expect("a small frame");
    let mut out = len.to_be_bytes()[1..].to_vec();
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// The HEADERS of a gRPC call: each field an HPACK literal with a new name,
/// neither indexed nor Huffman-coded.
fn call_headers(stream: u32, flags: u8) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in [
        (":method", "POST"),
        (":scheme", "http"),
        (":authority", "localhost"),
        (":path", "/redlock.v1.LockService/Validate"),
        ("content-type", "application/grpc"),
        ("te", "trailers"),
    ] {
        block.push(0x00);
        for text in [name, value] {
            block.push(u8::try_from(text.len()).expect("a one-byte length"));
            block.extend_from_slice(text.as_bytes());
        }
    }
    frame(HEADERS, END_HEADERS | flags, stream, &block)
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
                self.send(&frame(SETTINGS, ACK, 0, &[])).await;
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
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend(frame(SETTINGS, 0, 0, &[]));
    client.send(&hello).await;
    let mut stream = 1;
    for _ in 0..CANCELLED {
        client.send(&call_headers(stream, 0)).await;
        let took = tokio::time::timeout(Duration::from_secs(10), taken.recv())
            .await
            .expect("the server took the call up within 10 s");
        if took.is_none() {
            let ended = server.await.expect("the server's task");
            panic!("the server's connection ended: {ended:?}");
        }
        let mut then = frame(RST_STREAM, 0, stream, &CANCEL.to_be_bytes());
        then.extend(frame(DATA, END_STREAM, stream, &[0; 5]));
        client.send(&then).await;
        let _ = written.send(());
        stream += 2;
    }
    client.send(&call_headers(stream, END_STREAM)).await;
    tokio::time::timeout(Duration::from_secs(10), client.answered(stream))
        .await
        .expect("the last call answered within 10 s");
    server.abort();
}
