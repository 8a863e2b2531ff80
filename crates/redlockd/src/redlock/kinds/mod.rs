//! The extensions of Redlock, each beside the plain lock with its own
//! safety argument: [`semaphore`] (a permit of a semaphore, a mutex per
//! permit), [`rw`] (read-write locks: shared holders beside the mutex) and
//! [`multi`] (a lock on several resources at once, all or none).

pub(crate) mod multi;
pub(crate) mod rw;
pub(crate) mod semaphore;
