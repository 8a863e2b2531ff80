//! The HTTP/2 connection window the daemon grants each client connection,
//! sized so that every stream the daemon admits on a connection can have
//! its first message unread at once.
//!
//! h2 (0.4.20) closes a connection with ENHANCE_YOUR_CALM
//! ("too_many_data_frames", which clients see as UNAVAILABLE or
//! RESOURCE_EXHAUSTED on every call of the connection) once the overhead of
//! the small DATA frames it holds unread exceeds half the connection window:
//! its guard against a flood of tiny frames. It counts each frame under 256
//! bytes as `256 - payload` bytes of overhead, and every gRPC request, a
//! Hold session's first message included, is such a frame. A burst of calls
//! opened at once on one connection, faster than the daemon reads them,
//! therefore lost the whole connection past about `window / 512` frames:
//! about 2,700 Acquire calls with hyper's default window (1 MiB), and
//! 10,000 Hold sessions over one connection with the 4 MiB the daemon used
//! to grant whatever its stream limit.
//!
//! So the window follows `limits.max_calls_per_connection`: 512 bytes per
//! admitted stream (at least [`MIN_WINDOW`], at most HTTP/2's largest
//! window). The window is a permission, not memory the daemon sets aside:
//! each stream's own window still bounds what one stream may send unread.

/// The smallest window granted: covers the h2 guard for 8,192 streams.
pub(crate) const MIN_WINDOW: u32 = 4 << 20;

/// HTTP/2's largest window (RFC 9113, 6.9.1).
const MAX_WINDOW: u32 = (1 << 31) - 1;

/// What h2 counts for a frame of no payload, doubled because its budget is
/// half the window.
const PER_STREAM: u64 = 2 * 256;

/// The connection window for `max_calls` streams per connection (0: no
/// limit, which gets the largest window). Public for the benchmark's gRPC
/// floor, which serves with the daemon's HTTP/2 settings.
pub fn connection_window(max_calls: usize) -> u32 {
    if max_calls == 0 {
        return MAX_WINDOW;
    }
    let wanted = (max_calls as u64).saturating_mul(PER_STREAM);
    u32::try_from(wanted)
        .unwrap_or(MAX_WINDOW)
        .clamp(MIN_WINDOW, MAX_WINDOW)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_limit_gets_the_floor() {
        assert_eq!(connection_window(1), MIN_WINDOW);
        assert_eq!(connection_window(8_192), MIN_WINDOW);
    }

    #[test]
    fn the_window_grows_with_the_limit() {
        // The default: 16,384 streams need 8 MiB for h2's guard (4 MiB).
        assert_eq!(connection_window(16_384), 8 << 20);
        assert_eq!(connection_window(100_000), 100_000 * 512);
    }

    #[test]
    fn no_limit_or_a_huge_one_gets_the_largest_window() {
        assert_eq!(connection_window(0), MAX_WINDOW);
        assert_eq!(connection_window(usize::MAX), MAX_WINDOW);
        assert_eq!(connection_window(10_000_000), MAX_WINDOW);
    }
}
