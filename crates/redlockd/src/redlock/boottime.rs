//! A clock that keeps counting while the host is suspended.
//!
//! `Instant` (CLOCK_MONOTONIC) stops during a suspend, but the masters keep
//! counting their keys' time to live. A session whose deadline is kept only
//! on the monotonic clock would, after a suspend, still believe a lock valid
//! that the masters have long expired. Deadlines are therefore also kept on
//! Linux's CLOCK_BOOTTIME, which includes the time suspended, and the time
//! an operation took counts a suspend too (`super::validity::Started`).
//!
//! In unit tests the boot clock is tokio's clock (paused or not) plus a
//! suspend the test injects (`suspend_for_test`), so that timings under
//! paused time stay exact and a suspend can be simulated.

use std::time::Duration;
use tokio::time::Instant;

/// Time since boot, suspended time included; on a system without
/// CLOCK_BOOTTIME, the monotonic clock (no worse than before).
#[cfg(not(test))]
pub(crate) fn now() -> Duration {
    real()
}

/// In unit tests: tokio's clock, plus the suspends injected on this thread.
#[cfg(test)]
pub(crate) fn now() -> Duration {
    // A paused clock may read earlier than the origin (it stopped when its
    // runtime started): count from a day before it, both ways.
    const DAY: Duration = Duration::from_secs(24 * 60 * 60);
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    let origin = Instant::from_std(*ORIGIN.get_or_init(std::time::Instant::now));
    let now = Instant::now();
    let since_origin = match now.checked_duration_since(origin) {
        Some(after) => DAY + after,
        None => DAY.saturating_sub(origin - now),
    };
    since_origin + SUSPENDED.with(std::cell::Cell::get)
}

#[cfg(test)]
thread_local! {
    static SUSPENDED: std::cell::Cell<Duration> = const { std::cell::Cell::new(Duration::ZERO) };
}

/// Makes the boot clock of this thread (a current-thread test runtime) jump
/// `by` ahead of the monotonic one, as a host suspend does.
#[cfg(test)]
pub(crate) fn suspend_for_test(by: Duration) {
    SUSPENDED.with(|s| s.set(s.get() + by));
}

/// The real CLOCK_BOOTTIME.
fn real() -> Duration {
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
        let a = real();
        std::thread::sleep(Duration::from_millis(5));
        assert!(real() >= a + Duration::from_millis(5));
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
