//! JSON <-> the generated message types, by the contract's descriptors
//! (`redlockd_proto::FILE_DESCRIPTOR_SET`) and `prost-reflect`: the
//! canonical proto3 JSON mapping (durations as `"10s"`, 64-bit integers as
//! strings, lowerCamelCase names, original names accepted on input)
//! without hand-written copies of the messages.

use prost::Message;
use prost_reflect::{DescriptorPool, DeserializeOptions, DynamicMessage, SerializeOptions};

/// Why a body could not become a request message (INVALID_ARGUMENT), or a
/// response message could not become JSON (INTERNAL).
#[derive(Debug, thiserror::Error)]
pub(crate) enum JsonError {
    /// Not JSON, not an object of the message's fields, an unknown field,
    /// or a value of the wrong type.
    #[error("body: {0}")]
    Body(serde_json::Error),
    /// The descriptors and the generated code disagree (a build defect).
    #[error("message {name}: {reason}")]
    Contract {
        /// The message's full name.
        name: &'static str,
        /// What went wrong.
        reason: String,
    },
}

/// The contract's descriptors, decoded once at start-up.
#[derive(Debug, Clone)]
pub(crate) struct Codec {
    pool: DescriptorPool,
}

impl Codec {
    /// Decodes the descriptors built into `redlockd-proto`.
    pub(crate) fn new() -> Result<Codec, prost_reflect::DescriptorError> {
        Ok(Codec {
            pool: DescriptorPool::decode(redlockd_proto::FILE_DESCRIPTOR_SET)?,
        })
    }

    fn descriptor(
        &self,
        name: &'static str,
    ) -> Result<prost_reflect::MessageDescriptor, JsonError> {
        self.pool
            .get_message_by_name(name)
            .ok_or_else(|| JsonError::Contract {
                name,
                reason: "not in the descriptors".into(),
            })
    }

    /// The message `name` (e.g. `redlock.v1.AcquireRequest`) read from the
    /// JSON `body`; an empty body is the empty message `{}`. Unknown fields
    /// are refused, as a typo in a field name would otherwise go unnoticed.
    pub(crate) fn decode<M: Message + Default>(
        &self,
        name: &'static str,
        body: &[u8],
    ) -> Result<M, JsonError> {
        let descriptor = self.descriptor(name)?;
        let body = if body.iter().all(u8::is_ascii_whitespace) {
            b"{}".as_slice()
        } else {
            body
        };
        let mut json = serde_json::Deserializer::from_slice(body);
        let message = DynamicMessage::deserialize_with_options(
            descriptor,
            &mut json,
            &DeserializeOptions::new().deny_unknown_fields(true),
        )
        .map_err(JsonError::Body)?;
        json.end().map_err(JsonError::Body)?;
        M::decode(message.encode_to_vec().as_slice()).map_err(|e| JsonError::Contract {
            name,
            reason: e.to_string(),
        })
    }

    /// `message`, of type `name`, as JSON. Fields at their default values
    /// are written too (`"wasHeld": false`), so that callers need not know
    /// the mapping's omission rule.
    pub(crate) fn encode<M: Message>(
        &self,
        name: &'static str,
        message: &M,
    ) -> Result<Vec<u8>, JsonError> {
        let contract = |reason: String| JsonError::Contract { name, reason };
        let dynamic =
            DynamicMessage::decode(self.descriptor(name)?, message.encode_to_vec().as_slice())
                .map_err(|e| contract(e.to_string()))?;
        let mut json = serde_json::Serializer::new(Vec::new());
        dynamic
            .serialize_with_options(
                &mut json,
                &SerializeOptions::new().skip_default_fields(false),
            )
            .map_err(|e| contract(e.to_string()))?;
        Ok(json.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb;

    fn codec() -> Codec {
        Codec::new().expect("descriptors")
    }

    /// `requestId` (proto3 JSON) and `request_id` both reach field 5.
    #[test]
    fn request_id_in_json() {
        for body in [
            br#"{"resource": "r", "requestId": "q1Y2x9Vb0Ff3kL8mN4pR7s"}"#.as_slice(),
            br#"{"resource": "r", "request_id": "q1Y2x9Vb0Ff3kL8mN4pR7s"}"#.as_slice(),
        ] {
            let request: pb::AcquireRequest = codec()
                .decode("redlock.v1.AcquireRequest", body)
                .expect("decodes");
            assert_eq!(request.request_id, "q1Y2x9Vb0Ff3kL8mN4pR7s");
        }
    }

    /// The issue's example body, durations and original field names.
    #[test]
    fn acquire_request() {
        let request: pb::AcquireRequest = codec()
            .decode(
                "redlock.v1.AcquireRequest",
                br#"{"resource": "orders/42", "ttl": "10s", "wait": "0.250s"}"#,
            )
            .expect("decodes");
        assert_eq!(request.resource, "orders/42");
        assert_eq!(request.ttl.map(|d| (d.seconds, d.nanos)), Some((10, 0)));
        assert_eq!(
            request.wait.map(|d| (d.seconds, d.nanos)),
            Some((0, 250_000_000))
        );
        let empty: pb::AcquireRequest = codec()
            .decode("redlock.v1.AcquireRequest", b" ")
            .expect("empty body");
        assert_eq!(empty, pb::AcquireRequest::default());
    }

    /// Bad JSON, unknown fields, wrong types and trailing bytes are refused.
    #[test]
    fn refused_bodies() {
        for body in [
            &b"{"[..],
            br#"{"resource": "a", "tll": "1s"}"#,
            br#"{"resource": 7}"#,
            br#"{"ttl": "ten seconds"}"#,
            br#"{} {}"#,
            br#"[]"#,
        ] {
            let decoded = codec().decode::<pb::AcquireRequest>("redlock.v1.AcquireRequest", body);
            assert!(
                matches!(decoded, Err(JsonError::Body(_))),
                "{}: {decoded:?}",
                String::from_utf8_lossy(body)
            );
        }
    }

    /// The fence is a string, the validity a duration, defaults written.
    #[test]
    fn responses() {
        let response = pb::AcquireResponse {
            lock: Some(pb::Lock {
                resource: "orders/42".into(),
                token: "t".into(),
                fence: u64::MAX,
                permit: 0,
                validity: Some(prost_types::Duration {
                    seconds: 9,
                    nanos: 500_000_000,
                }),
            }),
        };
        let json = codec()
            .encode("redlock.v1.AcquireResponse", &response)
            .expect("encodes");
        let value: serde_json::Value = serde_json::from_slice(&json).expect("json");
        assert_eq!(value["lock"]["fence"], "18446744073709551615");
        assert_eq!(value["lock"]["validity"], "9.500s");
        assert_eq!(value["lock"]["resource"], "orders/42");
        let released = codec()
            .encode(
                "redlock.v1.ReleaseResponse",
                &pb::ReleaseResponse { was_held: false },
            )
            .expect("encodes");
        assert_eq!(released, br#"{"wasHeld":false}"#);
    }
}
