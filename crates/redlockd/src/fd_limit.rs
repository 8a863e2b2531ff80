//! The open-file limit: every client connection and every master
//! connection takes a file descriptor, and a low soft limit (often 1024)
//! would be reached long before `limits.max_connections`.

use nix::sys::resource::{getrlimit, setrlimit, Resource};

/// File descriptors the daemon keeps for itself beyond client connections:
/// master connections, subscriptions, the metrics and gateway listeners,
/// log files.
const RESERVED: u64 = 64;

/// Raises the soft open-file limit to the hard limit, and warns when it
/// stays below what `max_connections` client connections need (the
/// connection cap then does not protect the daemon: accepts fail with
/// EMFILE first, and are paused, see `conn::accept`).
pub(crate) fn raise(max_connections: usize) {
    let (soft, hard) = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok(limits) => limits,
        Err(e) => {
            tracing::warn!(error = %e, "could not read the open-file limit");
            return;
        }
    };
    let mut soft = soft;
    if soft < hard {
        match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => soft = hard,
            Err(e) => tracing::warn!(error = %e, soft, hard, "could not raise the open-file limit"),
        }
    }
    let needed = u64::try_from(max_connections)
        .unwrap_or(u64::MAX)
        .saturating_add(RESERVED);
    if soft < needed {
        tracing::warn!(
            open_files = soft,
            needed,
            "the open-file limit is below limits.max_connections plus {RESERVED}: raise it \
             (ulimit -n, LimitNOFILE=) or lower limits.max_connections"
        );
    }
}
