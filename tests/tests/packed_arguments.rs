//! A batch's arguments travel to a master as one packed value, which the
//! batch script unpacks (`redlockd::valkey::scripts::pack`): every
//! argument must arrive as it was sent, whatever its length (each of
//! MessagePack's string forms) or its bytes, and many operations in one
//! batch must each read their own. Checked on real masters of both kinds
//! through the daemon, by what the masters then hold.

mod common;

use common::*;
use redlockd::pb;
use redlockd::pb::lock_admin_service_client::LockAdminServiceClient;
use redlockd_testkit::masters::Flavor;
use std::time::Duration;

against_both_servers!(
    every_string_form_unpacks_as_sent,
    longest_and_non_ascii_arguments_arrive_intact
);

/// The packer against the masters' own unpacker: strings at each bound of
/// MessagePack's forms (fixstr, str 8, str 16, str 32), empty, and bytes
/// that are not UTF-8, packed as the batcher packs them, come back from
/// `cmsgpack.unpack` as they went, in order, none more.
async fn every_string_form_unpacks_as_sent(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut sent: Vec<Vec<u8>> = [0, 1, 31, 32, 255, 256, 65_535, 65_536, 70_000]
        .into_iter()
        .map(|len| (0..len).map(|i| b'a' + (i % 26) as u8).collect())
        .collect();
    sent.push(vec![0xff, 0x00, 0xc1, b'\r', b'\n', 0xdd]);
    sent.push(b"2000001".to_vec());
    let packed = redlockd::valkey::script_cost::packed_args(sent.iter().map(Vec::as_slice));
    let got = h
        .raw(
            0,
            "EVAL",
            vec![
                "return cmsgpack.unpack(ARGV[1])".into(),
                0.into(),
                fred::prelude::Value::Bytes(packed.into()),
            ],
        )
        .await;
    let got: Vec<Vec<u8>> = got
        .into_array()
        .into_iter()
        .map(|value| value.as_bytes().expect("a string").to_vec())
        .collect();
    assert_eq!(got.len(), sent.len());
    for (i, (got, sent)) in got.iter().zip(&sent).enumerate() {
        assert!(
            got == sent,
            "element {i}: {} bytes back for {}",
            got.len(),
            sent.len()
        );
    }
}

/// Resources of the longest name a daemon takes (512 bytes, where the
/// release's announcement carries it: a 16-bit length) and owners of the
/// longest label (128 bytes: an 8-bit length), both of two-byte UTF-8
/// characters, and short ones beside them, acquired at once so that they
/// share batches: each master holds each lock under its own token, the
/// record of each grant names its own owner, and each release deletes its
/// own lock.
async fn longest_and_non_ascii_arguments_arrive_intact(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let cases: Vec<(String, String)> = (0..16)
        .map(|i| {
            let resource = match i % 2 {
                0 => format!("{i:02}{}", "é".repeat(255)),
                _ => format!("p/{i}"),
            };
            let owner = match i % 4 {
                0 | 1 => format!("{i:02}{}", "ü".repeat(63)),
                2 => String::new(),
                _ => format!("owner {i}"),
            };
            (resource, owner)
        })
        .collect();
    for (resource, owner) in &cases {
        assert!(resource.len() <= 512 && owner.len() <= 128);
    }
    let client = h.client().await;
    let calls_before = script_calls(&h).await;
    let grants = futures::future::join_all(cases.iter().map(|(resource, owner)| {
        let mut client = client.clone();
        async move {
            client
                .acquire(pb::AcquireRequest {
                    resource: resource.clone(),
                    ttl: ms(30_000),
                    owner: owner.clone(),
                    ..Default::default()
                })
                .await
                .unwrap_or_else(|e| panic!("Acquire {resource:?}: {e}"))
                .into_inner()
                .lock
                .expect("granted")
        }
    }))
    .await;

    // Some batch carried several operations (fewer script calls than the
    // acquires' reads of the fence hash, one per operation), and such a
    // batch's arguments go packed (`PACK_FROM`; the layout is unit-tested
    // in `redlockd::valkey::batch::encode`): the packed path ran here.
    let (calls, operations) = script_calls(&h).await;
    let (calls, operations) = (calls - calls_before.0, operations - calls_before.1);
    assert!(
        calls < operations,
        "{calls} script calls for {operations} operations on master 0"
    );

    let mut admin = LockAdminServiceClient::connect(format!("http://{}", h.daemons[0].addr))
        .await
        .expect("connect");
    for ((resource, owner), lock) in cases.iter().zip(&grants) {
        // A grant stands on a quorum when it is answered.
        let holders = h.holders(resource, &lock.token).await;
        assert!(holders >= 3, "{resource:?}: its token on {holders} masters");
        let seen = admin
            .inspect(pb::InspectRequest {
                resource: resource.clone(),
                ..Default::default()
            })
            .await
            .expect("Inspect")
            .into_inner();
        let info = seen.lock.expect("held");
        assert_eq!(&info.owner, owner, "{resource:?}");
        assert_eq!(info.fence, lock.fence, "{resource:?}");
    }

    let released = futures::future::join_all(grants.iter().map(|lock| {
        let mut client = client.clone();
        async move { release(&mut client, lock).await.expect("Release") }
    }))
    .await;
    assert!(released.iter().all(|held| *held), "{released:?}");
    for (resource, _) in &cases {
        // The release is answered on a quorum; the last masters follow.
        eventually(Duration::from_secs(2), resource, || async {
            for i in 0..5 {
                if h.lock_value(i, resource).await.is_some() {
                    return false;
                }
            }
            true
        })
        .await;
    }
}

/// Master 0's script calls, and its `HMGET`s (each acquire and release
/// reads its fence hash once), so far.
async fn script_calls(h: &Harness) -> (u64, u64) {
    let info = h.raw(0, "INFO", vec!["commandstats".into()]).await;
    let text = info.as_string().unwrap_or_default();
    (
        redlockd_testkit::commandstats::calls(&text, &["evalsha", "eval"]),
        redlockd_testkit::commandstats::calls(&text, &["hmget"]),
    )
}
