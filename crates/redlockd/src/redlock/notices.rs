//! Release notices: how a release performed by any daemon replica wakes the
//! waiters of that resource on every replica.
//!
//! A release publishes a notice on every master where it deleted the lock,
//! on the channel `<prefix>released`; each replica subscribes on every master
//! and so may receive the same notice up to N times. A notice carries a random
//! id (never the token) so that a replica acts on it once.

use std::collections::{HashSet, VecDeque};

/// How many recent notice ids a replica remembers to drop duplicates.
const REMEMBERED: usize = 4096;

/// One release of one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Notice {
    /// Random, the same on every master for one release.
    pub id: u64,
    /// The released resource.
    pub resource: String,
}

impl Notice {
    /// A fresh notice for a release of `resource`.
    pub(crate) fn new(resource: &str) -> Notice {
        Notice {
            id: rand::random(),
            resource: resource.to_owned(),
        }
    }

    /// The message published on the channel: 16 hex digits, a space, the resource.
    pub(crate) fn encode(&self) -> String {
        format!("{:016x} {}", self.id, self.resource)
    }

    /// Reads a published message; `None` for anything else on the channel.
    pub(crate) fn decode(message: &str) -> Option<Notice> {
        let (id, resource) = message.split_once(' ')?;
        if id.len() != 16 || resource.is_empty() {
            return None;
        }
        Some(Notice {
            id: u64::from_str_radix(id, 16).ok()?,
            resource: resource.to_owned(),
        })
    }
}

/// The ids of recent notices, to act on each release once.
#[derive(Debug, Default)]
pub(crate) struct SeenNotices {
    order: VecDeque<u64>,
    ids: HashSet<u64>,
}

impl SeenNotices {
    /// Records `id`; true the first time it is seen (among the recent ones).
    pub(crate) fn first_sighting(&mut self, id: u64) -> bool {
        if !self.ids.insert(id) {
            return false;
        }
        self.order.push_back(id);
        if self.order.len() > REMEMBERED {
            if let Some(oldest) = self.order.pop_front() {
                self.ids.remove(&oldest);
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Encoding round-trips, resources may contain spaces, junk is ignored.
    #[test]
    fn encode_decode() {
        let notice = Notice {
            id: 0xdead_beef,
            resource: "orders 42".into(),
        };
        assert_eq!(notice.encode(), "00000000deadbeef orders 42");
        assert_eq!(Notice::decode(&notice.encode()), Some(notice));
        assert_eq!(Notice::decode("nonsense"), None);
        assert_eq!(Notice::decode("123 r"), None);
        assert_eq!(Notice::decode("zzzzzzzzzzzzzzzz r"), None);
        assert_eq!(Notice::decode("00000000deadbeef "), None);
    }

    /// Duplicates from several masters are dropped; memory stays bounded.
    #[test]
    fn duplicates_dropped_and_bounded() {
        let mut seen = SeenNotices::default();
        assert!(seen.first_sighting(1));
        assert!(!seen.first_sighting(1));
        for id in 2..(REMEMBERED as u64 + 10) {
            assert!(seen.first_sighting(id));
        }
        assert!(seen.ids.len() <= REMEMBERED);
        assert!(
            seen.first_sighting(1),
            "forgotten after REMEMBERED newer ones"
        );
    }
}
