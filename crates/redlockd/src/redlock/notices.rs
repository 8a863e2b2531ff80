//! Release notices: how a release performed by any daemon replica wakes the
//! waiters of that resource on every replica.
//!
//! A release publishes a notice on every master where it deleted the lock,
//! on the channel `<prefix>released`; each replica subscribes on every master
//! and so may receive the same notice up to N times. A notice carries a random
//! id (never the token) so that a replica acts on it once.
//!
//! An election's leadership that begins or ends publishes a leadership
//! notice on the same channel (`Redlock::announce_leadership`): it wakes
//! no waiter (a release that frees the resource for one announces itself
//! as a release), only the election's observers on every replica
//! (`super::changes`), which re-read the leader at once instead of at
//! their next fallback read. Its separator is `+` where a release's is a
//! space, so a replica that predates leadership notices ignores them.

use std::collections::{HashSet, VecDeque};

/// How many recent notice ids a replica remembers to drop duplicates.
const REMEMBERED: usize = 4096;

/// One release of one resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Notice {
    /// Random, the same on every master for one release.
    pub id: u64,
    /// The released resource (or the election's).
    pub resource: String,
    /// A leadership notice (an election's leader elected or gone), not a
    /// release.
    pub leadership: bool,
}

impl Notice {
    /// A fresh notice for a release of `resource`.
    pub(crate) fn new(resource: &str) -> Notice {
        Notice {
            id: rand::random(),
            resource: resource.to_owned(),
            leadership: false,
        }
    }

    /// A fresh notice for a leadership of `resource` begun or ended.
    pub(crate) fn leadership(resource: &str) -> Notice {
        Notice {
            leadership: true,
            ..Notice::new(resource)
        }
    }

    /// The message published on the channel: 16 hex digits, a space (a
    /// release) or `+` (a leadership), the resource.
    pub(crate) fn encode(&self) -> String {
        let separator = if self.leadership { '+' } else { ' ' };
        format!("{:016x}{separator}{}", self.id, self.resource)
    }

    /// Reads a published message; `None` for anything else on the channel.
    pub(crate) fn decode(message: &str) -> Option<Notice> {
        let id = message.get(..16)?;
        let leadership = match message.get(16..17)? {
            " " => false,
            "+" => true,
            _ => return None,
        };
        let resource = message.get(17..).filter(|r| !r.is_empty())?;
        Some(Notice {
            id: u64::from_str_radix(id, 16).ok()?,
            resource: resource.to_owned(),
            leadership,
        })
    }
}

impl super::Redlock {
    /// A message received on the release channel from some master: wakes
    /// the resource's front waiter, once per release however many masters
    /// relay it.
    /// A leadership notice (an election's leader elected or gone) wakes
    /// only the resource's observers.
    pub(crate) fn notice_received(&self, message: &str) {
        match Notice::decode(message) {
            Some(notice) if notice.leadership && self.first_sighting(&notice) => {
                self.changes.announce(&notice.resource);
            }
            Some(notice) if !notice.leadership => self.wake_waiters(&notice, false),
            _ => {}
        }
    }

    pub(super) fn wake_waiters(&self, notice: &Notice, at_once: bool) {
        if self.first_sighting(notice) {
            self.waiters.released(&notice.resource, at_once, notice.id);
            self.changes.announce(&notice.resource);
        }
    }

    /// Whether this replica hears of `notice` for the first time (each
    /// master relays it).
    fn first_sighting(&self, notice: &Notice) -> bool {
        self.seen_notices
            .lock()
            .map(|mut seen| seen.first_sighting(notice.id))
            .unwrap_or(true)
    }

    /// Tells every replica that `resource`'s leadership (an election's)
    /// began, or ended and was released: this replica's observers at once,
    /// the others' through a leadership notice every master relays, so
    /// that an observer anywhere re-reads the leader at once rather than
    /// at its next fallback read. Best effort and not waited for: a notice
    /// lost costs that observer one `wait_fallback`.
    pub(crate) fn announce_leadership(&self, resource: &str) {
        let notice = Notice::leadership(resource);
        // The masters' relays come back here too: already seen.
        self.first_sighting(&notice);
        self.changes.announce(resource);
        let channel = super::keys::release_channel(&self.settings.key_prefix);
        let encoded = notice.encode();
        for node in self.nodes.iter() {
            // Queued by the call; the answer is not awaited.
            drop(node.announce(&channel, &encoded));
        }
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
            leadership: false,
        };
        assert_eq!(notice.encode(), "00000000deadbeef orders 42");
        assert_eq!(Notice::decode(&notice.encode()), Some(notice));
        let grant = Notice {
            id: 0xdead_beef,
            resource: "\u{1e}election/jobs".into(),
            leadership: true,
        };
        assert_eq!(grant.encode(), "00000000deadbeef+\u{1e}election/jobs");
        assert_eq!(Notice::decode(&grant.encode()), Some(grant));
        assert_eq!(Notice::decode("00000000deadbeef-r"), None);
        assert_eq!(Notice::decode("00000000deadbee\u{e9} r"), None);
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
