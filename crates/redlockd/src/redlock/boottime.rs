//! A clock that keeps counting while the host is suspended.
//!
//! `Instant` (CLOCK_MONOTONIC) stops during a suspend, but the masters keep
//! counting their keys' time to live. A session whose deadline is kept only
//! on the monotonic clock would, after a suspend, still believe a lock valid
//! that the masters have long expired. Session deadlines are therefore also
//! checked on Linux's CLOCK_BOOTTIME, which includes the time suspended.

use std::time::Duration;
use tokio::time::Instant;

/// Time since boot, suspended time included; on a system without
/// CLOCK_BOOTTIME, the monotonic clock (no worse than before).
pub(crate) fn now() -> Duration {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME) {
        Ok(spec) => Duration::from(spec),
        Err(_) => monotonic_fallback(),
    }
}

fn monotonic_fallback() -> Duration {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(std::time::Instant::now).elapsed()
}

/// How far the boot clock ran ahead of the monotonic clock between two
/// readings: the time the host spent suspended in between.
pub(crate) fn suspended_between(
    (mono_then, boot_then): (Instant, Duration),
    (mono_now, boot_now): (Instant, Duration),
) -> Duration {
    let boot = boot_now.saturating_sub(boot_then);
    let mono = mono_now.saturating_duration_since(mono_then);
    boot.saturating_sub(mono)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The boot clock moves forward with real time.
    #[test]
    fn boot_clock_moves() {
        let a = now();
        std::thread::sleep(Duration::from_millis(5));
        assert!(now() >= a + Duration::from_millis(5));
    }

    /// A gap between the two clocks is the suspended time.
    #[test]
    fn suspend_arithmetic() {
        let t0 = Instant::now();
        let b0 = Duration::from_secs(100);
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(
            suspended_between((t0, b0), (t1, b0 + Duration::from_secs(1))),
            Duration::ZERO
        );
        assert_eq!(
            suspended_between((t0, b0), (t1, b0 + Duration::from_secs(61))),
            Duration::from_secs(60)
        );
    }
}
