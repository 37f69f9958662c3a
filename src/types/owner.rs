//! Lock owners: the number that goes into the hash field `<client uuid>:<owner id>`.

use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static THREAD_OWNER: Owner = Owner::new();
}

/// A lock owner: Redisson's "thread id". Re-entrancy and ownership are per owner.
///
/// * [`Owner::new`] draws a fresh id from a process-wide counter: never reused, so two owners
///   created by this process never alias.
/// * [`Owner::current_thread`] is the calling OS thread's owner (what the blocking API uses, and
///   what Java uses for its synchronous API).
/// * [`Owner::from_id`] takes an explicit number, like Redisson's `lockAsync(threadId)`
///   overloads. Do not mix explicit ids with counter-allocated ones on one client unless you keep
///   them apart (e.g. explicit ids above 2^48).
///
/// ```
/// use redisson_lock::Owner;
/// let a = Owner::new();
/// let b = Owner::new();
/// assert_ne!(a, b);
/// assert_eq!(Owner::current_thread(), Owner::current_thread());
/// assert_eq!(Owner::from_id(57).id(), 57);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Owner(u64);

impl Owner {
    /// A fresh owner, distinct from every other owner allocated by this process.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Owner(NEXT_OWNER.fetch_add(1, Ordering::Relaxed))
    }

    /// The calling OS thread's owner (stable for the thread's lifetime).
    pub fn current_thread() -> Self {
        THREAD_OWNER.with(|o| *o)
    }

    /// An explicit owner id (Redisson's explicit `threadId` parameter).
    pub fn from_id(id: u64) -> Self {
        Owner(id)
    }

    /// The numeric id written into hash fields.
    pub fn id(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}
