//! A running daemon under a bounded storm of hostile input (random bytes
//! on the socket, random and crafted protobuf inside valid gRPC framing,
//! broken gRPC framing, oversized fields, half-open Hold streams, silent
//! connections and half-sent HTTP/2 prefaces, tiny-ttl Hold sessions,
//! unread health watches piling up) while a
//! well-behaved client holds and extends its locks alongside. The daemon
//! never panics or exits, every answer is a proper gRPC status, and the
//! good client's locks are never disturbed.

mod common;

use bytes::{Buf, BufMut, Bytes};
use common::*;
use rand::{Rng, SeedableRng};
use redlockd::pb;
use redlockd_testkit::masters::Flavor;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::Channel;
use tonic::{Code, Status};

/// Requests of each kind; about 3,000 in all.
const ROUNDS: usize = 600;

const METHODS: [&str; 5] = ["Acquire", "Extend", "Release", "Validate", "Hold"];

/// Sends and receives raw message bytes inside proper gRPC framing.
#[derive(Debug, Clone, Copy, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawCodec;
    type Decoder = RawCodec;
    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }
    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = Vec<u8>;
    type Error = Status;
    fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawCodec {
    type Item = Vec<u8>;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
        let bytes = src.copy_to_bytes(src.remaining());
        Ok(Some(bytes.to_vec()))
    }
}

/// One unary call with `body` as the message of `method`.
async fn raw_call(channel: &Channel, method: &str, body: Vec<u8>) -> Result<Vec<u8>, Status> {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready()
        .await
        .map_err(|e| Status::unavailable(e.to_string()))?;
    let path = format!("/redlock.v1.LockService/{method}")
        .parse()
        .expect("path");
    grpc.unary(tonic::Request::new(body), path, RawCodec)
        .await
        .map(tonic::Response::into_inner)
}

/// A message that is protobuf-shaped but hostile: wrong wire types, unknown
/// fields, huge lengths, deep nesting, oversized strings.
fn crafted(rng: &mut impl Rng) -> Vec<u8> {
    let mut out = Vec::new();
    match rng.random_range(0..7) {
        // Field 1 (resource, a string) sent as a varint.
        0 => out.extend([0x08, 0x96, 0x01]),
        // Unknown field 99, length-delimited, then a valid resource.
        1 => out.extend([0x9a, 0x06, 0x03, b'a', b'b', b'c', 0x0a, 0x01, b'r']),
        // A length prefix far past the end.
        2 => out.extend([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, b'x']),
        // ttl (a message) nested in itself many times.
        3 => {
            for _ in 0..200 {
                out.extend([0x12, 0x7f]);
            }
        }
        // An oversized resource (60 kB, under the request cap).
        4 => {
            out.extend([0x0a, 0xe0, 0xd4, 0x03]);
            out.extend(std::iter::repeat_n(b'r', 60_000));
        }
        // Invalid UTF-8 in the resource.
        5 => out.extend([0x0a, 0x02, 0xff, 0xfe]),
        // A varint that never ends.
        _ => out.extend(std::iter::repeat_n(0xffu8, 20)),
    }
    out
}

/// Random bytes straight onto the socket (sometimes after the HTTP/2
/// preface); the daemon must just close the connection.
async fn socket_garbage(addr: SocketAddr, rng: &mut rand::rngs::StdRng) {
    let Ok(mut stream) = TcpStream::connect(addr).await else {
        return;
    };
    let mut bytes: Vec<u8> = (0..rng.random_range(1..2048))
        .map(|_| rng.random())
        .collect();
    if rng.random_bool(0.5) {
        let mut with_preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        with_preface.append(&mut bytes);
        bytes = with_preface;
    }
    let _ = stream.write_all(&bytes).await;
    let mut sink = [0u8; 4096];
    let _ = tokio::time::timeout(Duration::from_millis(200), async {
        while let Ok(n) = stream.read(&mut sink).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

/// Broken gRPC framing over a real HTTP/2 connection: a compressed flag
/// without compression, a length that lies, a body cut short. Returns the
/// `grpc-status` the daemon answered, if any.
async fn bad_framing(addr: SocketAddr, rng: &mut rand::rngs::StdRng) -> Option<u32> {
    let tcp = TcpStream::connect(addr).await.ok()?;
    let (mut client, connection) = h2::client::handshake(tcp).await.ok()?;
    tokio::spawn(connection);
    let method = METHODS[rng.random_range(0..4)];
    let request = http::Request::post(format!("http://{addr}/redlock.v1.LockService/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .ok()?;
    let (response, mut body) = client.send_request(request, false).ok()?;
    let mut frame = Vec::new();
    match rng.random_range(0..3) {
        0 => frame.extend([1, 0, 0, 0, 3, 1, 2, 3]),
        1 => frame.extend([0, 0, 0x10, 0, 0, 1, 2]),
        _ => frame.extend([0, 0xff, 0xff]),
    }
    body.send_data(Bytes::from(frame), true).ok()?;
    let response = tokio::time::timeout(Duration::from_secs(5), response)
        .await
        .ok()?
        .ok()?;
    let status = |h: &http::HeaderMap| {
        h.get("grpc-status")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
    };
    if let Some(code) = status(response.headers()) {
        return Some(code);
    }
    let mut body = response.into_body();
    while let Some(chunk) = body.data().await {
        chunk.ok()?;
    }
    let trailers = body.trailers().await.ok()??;
    status(&trailers)
}

/// The storm, with a good client alongside.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_input_does_not_disturb_a_good_client() {
    let h = Harness::start(Flavor::Valkey).await;
    let addr = h.daemons[0].addr;
    let mut good = h.client().await;

    // The good client: a Hold session and a lock it extends itself.
    let (hold_tx, mut hold_events, held) = hold(&mut good, "good/held", 600, 0).await;
    let lock = acquire(&mut good, "good/extended", 2_000, 0)
        .await
        .expect("acquire");
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let extender = {
        let mut client = good.clone();
        let lock = lock.clone();
        tokio::spawn(async move {
            let mut extensions = 0u32;
            while !*stopped.borrow() {
                extend(&mut client, &lock, 2_000)
                    .await
                    .expect("the good client's extend fails");
                extensions += 1;
                let _ = tokio::time::timeout(Duration::from_millis(100), stopped.changed()).await;
            }
            extensions
        })
    };

    let channel = Channel::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect()
        .await
        .expect("connect");
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    let mut codes = std::collections::BTreeMap::<String, usize>::new();
    let mut count = |code: Code| *codes.entry(format!("{code:?}")).or_default() += 1;
    let mut half_open = Vec::new();
    let mut silent = Vec::new();
    let mut watches = Vec::new();
    for round in 0..ROUNDS {
        // 1. Random bytes as any method's message.
        let method = METHODS[rng.random_range(0..METHODS.len())];
        let len = rng.random_range(0..512);
        let body: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        let outcome = raw_call(&channel, method, body).await;
        count(outcome.map_or_else(|s| s.code(), |_| Code::Ok));
        // 2. Crafted protobuf: wrong types, unknown fields, big fields.
        let outcome = raw_call(&channel, METHODS[round % 4], crafted(&mut rng)).await;
        count(outcome.map_or_else(|s| s.code(), |_| Code::Ok));
        // 3. Over the request cap (64 kB by default): refused undecoded.
        if round % 50 == 0 {
            let outcome = raw_call(&channel, "Acquire", vec![b'x'; 70_000]).await;
            assert_eq!(outcome.unwrap_err().code(), Code::OutOfRange);
            count(Code::OutOfRange);
        }
        // 4. Garbage on the socket, and broken gRPC framing.
        socket_garbage(addr, &mut rng).await;
        if let Some(code) = bad_framing(addr, &mut rng).await {
            count(Code::from_i32(code as i32));
        }
        // 5. Half-open Hold streams: opened, an acquire or nothing sent,
        //    never read, dropped later.
        if round % 20 == 0 {
            let (tx, rx) = tokio::sync::mpsc::channel::<pb::HoldRequest>(1);
            if round % 40 == 0 {
                let _ = tx
                    .send(pb::HoldRequest {
                        request: Some(pb::hold_request::Request::Acquire(pb::AcquireRequest {
                            resource: format!("hostile/{round}"),
                            ttl: ms(500),
                            wait: None,
                            owner: String::new(),
                            request_id: String::new(),
                            ..Default::default()
                        })),
                    })
                    .await;
            }
            let mut c = pb::lock_service_client::LockServiceClient::new(channel.clone());
            let call = tokio::spawn(async move {
                c.hold(tokio_stream::wrappers::ReceiverStream::new(rx))
                    .await
            });
            half_open.push((tx, call));
        }
        // 6. Connections that never speak, and half-sent HTTP/2 prefaces,
        //    kept open through the storm (closed after server.idle_timeout).
        if round % 10 == 0 {
            if let Ok(idle) = TcpStream::connect(addr).await {
                silent.push(idle);
            }
            if let Ok(mut half) = TcpStream::connect(addr).await {
                let _ = half.write_all(b"PRI * HTTP/2.0\r\n").await;
                silent.push(half);
            }
        }
        // 7. Tiny-ttl Hold sessions (amplification): refused outright.
        if round % 10 == 5 {
            let (tx, rx) = tokio::sync::mpsc::channel::<pb::HoldRequest>(1);
            let _ = tx.try_send(pb::HoldRequest {
                request: Some(pb::hold_request::Request::Acquire(pb::AcquireRequest {
                    resource: format!("hostile/tiny/{round}"),
                    ttl: ms(10),
                    wait: None,
                    owner: String::new(),
                    request_id: String::new(),
                    ..Default::default()
                })),
            });
            let mut c = pb::lock_service_client::LockServiceClient::new(channel.clone());
            let outcome = c
                .hold(tokio_stream::wrappers::ReceiverStream::new(rx))
                .await;
            let code = outcome.map_or_else(|s| s.code(), |_| Code::Ok);
            assert_eq!(code, Code::InvalidArgument, "a 10 ms session");
            count(code);
        }
        // 8. Health watches (outside authentication) piling up on one
        //    connection, never read.
        if round % 2 == 0 {
            let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
            watches.push(tokio::spawn(async move {
                let watch = health
                    .watch(tonic_health::pb::HealthCheckRequest {
                        service: String::new(),
                    })
                    .await;
                // Held open, unread, until the storm ends.
                std::future::pending::<()>().await;
                drop(watch);
            }));
        }
    }
    for watch in watches {
        watch.abort();
    }
    drop(silent);
    for (tx, call) in half_open {
        drop(tx);
        call.abort();
    }
    let _ = stop.send(true);
    let extensions = extender.await.expect("the extender panicked");
    assert!(extensions > 0);

    // Every answer was a proper status; unknown would mean a broken stream.
    assert!(
        !codes.contains_key("Unknown") && !codes.contains_key("Unavailable"),
        "{codes:?}"
    );
    eprintln!("answers by status: {codes:?}");
    let total: usize = codes.values().sum();
    assert!(total >= 2 * ROUNDS, "{codes:?}");

    // The good client's locks were never disturbed.
    assert_eq!(h.holders(&lock.resource, &lock.token).await, 5);
    assert_eq!(h.holders(&held.resource, &held.token).await, 5);
    let still = validate(&mut good, &held).await.expect("validate");
    assert!(still.held, "the Hold session's lock was lost");
    // No `lost` (or anything but extensions) on the Hold session.
    while let Ok(Ok(Some(event))) =
        tokio::time::timeout(Duration::from_millis(10), hold_events.message()).await
    {
        assert!(
            matches!(event.event, Some(pb::hold_event::Event::Extended(_))),
            "{event:?}"
        );
    }
    hold_tx.send(release_message()).await.expect("release");
    assert!(release(&mut good, &lock).await.expect("release"));

    // And the daemon still serves a fresh client.
    let mut fresh = h.client().await;
    acquire(&mut fresh, "good/after", 1_000, 0)
        .await
        .expect("the daemon still serves");
}
