//! [`WaitLine`]: which local wait line a queueing kind's waiters join.

/// The local wait line of a lock kind whose local waiters queue (see `acquisitions::line`):
/// kinds with one holder at a time and one channel for every waiter. Each lock name has a
/// line per value; kinds that are one lock on the wire share theirs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum WaitLine {
    /// The reentrant lock, and the non-reentrant lock (the same lock on the wire).
    Lock,
    /// The fenced lock.
    Fenced,
    /// The write half of a read-write lock.
    Write,
}
