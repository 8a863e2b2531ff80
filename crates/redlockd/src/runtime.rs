//! The async runtime the daemon serves on, sized by `server.worker_threads`.
//!
//! As linkerd2-proxy does: one worker is tokio's current-thread runtime
//! (every task on one thread, no work stealing and no cross-thread
//! wake-ups), more is the multi-thread runtime with that many workers. The
//! default, 0, is one worker per core the process may use
//! (`std::thread::available_parallelism`, which honours a container's CPU
//! quota and the process's CPU affinity), as tokio's own default is.
//!
//! Why one worker is offered at all: on a host whose cores the masters or
//! the applications also use (a sidecar with a CPU limit of one core, the
//! bench's 2-core machine), the multi-thread runtime's parked workers are
//! woken for work another worker could have done: there the daemon spent
//! about 40% more CPU per call at 64 callers, and 25% more per contended
//! hand-off, on two workers than on one (docs/benchmarks.md, "Worker
//! threads").

use std::num::NonZeroUsize;
use tokio::runtime::{Builder, Runtime};

/// How many worker threads `server.worker_threads = configured` gives on a
/// machine where the process may use `available` cores (`None`: unknown,
/// taken as one).
fn worker_count(configured: usize, available: Option<NonZeroUsize>) -> usize {
    match configured {
        0 => available.map_or(1, NonZeroUsize::get),
        n => n,
    }
}

/// The runtime for `server.worker_threads = configured` on this machine,
/// and its worker count.
pub fn build(configured: usize) -> std::io::Result<(Runtime, usize)> {
    let workers = worker_count(configured, std::thread::available_parallelism().ok());
    let runtime = if workers == 1 {
        Builder::new_current_thread().enable_all().build()?
    } else {
        Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build()?
    };
    Ok((runtime, workers))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cores(n: usize) -> Option<NonZeroUsize> {
        NonZeroUsize::new(n)
    }

    #[test]
    fn zero_means_one_per_available_core() {
        assert_eq!(worker_count(0, cores(2)), 2);
        assert_eq!(worker_count(0, cores(16)), 16);
        assert_eq!(worker_count(0, None), 1);
    }

    #[test]
    fn a_configured_count_is_kept_whatever_the_cores() {
        assert_eq!(worker_count(1, cores(16)), 1);
        assert_eq!(worker_count(4, cores(2)), 4);
        assert_eq!(worker_count(3, None), 3);
    }

    #[test]
    fn both_runtimes_run_a_task() {
        for configured in [1, 2] {
            let (runtime, workers) = build(configured).unwrap();
            assert_eq!(workers, configured);
            let answer = runtime.block_on(async { tokio::spawn(async { 42 }).await.unwrap() });
            assert_eq!(answer, 42);
            assert_eq!(
                runtime.handle().runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread,
                configured == 1
            );
        }
    }
}
