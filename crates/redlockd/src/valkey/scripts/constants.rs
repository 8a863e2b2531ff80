//! The per-daemon constants written into the batch script's text: what
//! every operation of one daemon would otherwise send alike.

use std::time::Duration;

/// The values every operation of one daemon would send alike, written into
/// the batch script's text instead (see [`super::batch_script`]). They come from
/// the one configuration (`crate::server::build_engine`), as do the
/// engine's proposals; an acquire whose proposal names other values is
/// refused by the sender (`super::ops`), never run with these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Constants {
    /// How far beyond each lock's ttl horizons are raised (`ALLOWANCE`).
    pub horizon_allowance: Duration,
    /// How far ahead of the master's clock a proposed fence may be and
    /// still be taken (`crate::redlock::Proposal::window`).
    pub proposal_window: Duration,
    /// The fence hash's expiry where a proposal is taken
    /// (`crate::redlock::Proposal::fence_ttl`).
    pub fence_ttl: Duration,
    /// How often a one-round grant renews that expiry
    /// (`FENCE_REFRESH_US`, [`crate::redlock::refresh_period`]).
    pub fence_refresh: Duration,
}

impl Constants {
    /// The constants of the settings in `redlock`.
    pub(crate) fn of(redlock: &crate::config::RedlockConfig) -> Constants {
        let proposal_window = crate::redlock::proposal_window(redlock.node_timeout);
        Constants {
            horizon_allowance: crate::redlock::clock_allowance(
                redlock.node_timeout,
                redlock.max_clock_offset,
            ),
            proposal_window,
            fence_ttl: redlock.fence_ttl,
            fence_refresh: crate::redlock::refresh_period(
                redlock.fence_ttl,
                redlock.fence_outlives(),
                proposal_window,
            ),
        }
    }

    /// The constants of the default settings.
    pub(crate) fn defaults() -> Constants {
        Constants::of(&crate::config::Config::default().redlock)
    }

    /// `lua` with each constant's name replaced by its value.
    pub(super) fn write_into(self, lua: &str) -> String {
        lua.replace("ALLOWANCE", &self.horizon_allowance.as_millis().to_string())
            .replace(
                "PROPOSAL_WINDOW_US",
                &self.proposal_window.as_micros().to_string(),
            )
            .replace("FENCE_TTL_MS", &self.fence_ttl.as_millis().to_string())
            .replace(
                "FENCE_REFRESH_US",
                &self.fence_refresh.as_micros().max(1).to_string(),
            )
    }
}
