//! Lock owners: the number that goes into the hash field `<client uuid>:<owner id>`.

use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// The bit of a task's owner id: never drawn by the counter, which starts at 1.
const TASK: u64 = 1 << 62;

thread_local! {
    static THREAD_OWNER: Owner = Owner::new();
}

/// A lock owner: Redisson's "thread id". Re-entrancy and ownership are per owner.
///
/// * [`Owner::current`] is the calling Tokio task's owner, or the calling thread's outside a
///   task: who acquires through a handle made without an explicit owner (`client.get_lock`).
/// * [`Owner::new`] draws a fresh id from a process-wide counter: never reused, so two owners
///   created by this process never alias.
/// * [`Owner::current_thread`] is the calling OS thread's owner (what the blocking API uses, and
///   what Java uses for its synchronous API).
/// * [`Owner::from_id`] takes an explicit number, like Redisson's `lockAsync(threadId)`
///   overloads. Do not mix explicit ids with the crate's own on one client unless you keep them
///   apart: the counter's are small, a task's are 2^62 and above (explicit ids between 2^48
///   and 2^62 are safe).
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

    /// The calling Tokio task's owner, or the calling thread's when not called from a task (a
    /// `block_on`, `#[tokio::main]`'s body, another executor's thread).
    pub fn current() -> Self {
        Self::current_task().unwrap_or_else(Self::current_thread)
    }

    /// The owner of the Tokio task running the caller (`None` outside a task): `2^62` plus the
    /// task's id, the same for the task's whole life and never another task's (Tokio draws
    /// task ids from a 64-bit counter).
    pub fn current_task() -> Option<Self> {
        tokio::task::try_id().map(|id| Owner(TASK | task_number(id)))
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

/// The number of a Tokio task id, read through its `Hash` (Tokio's id is a `NonZeroU64`, which
/// hashes as its `u64`), kept below [`TASK`].
fn task_number(id: tokio::task::Id) -> u64 {
    #[derive(Default)]
    struct Number(u64);
    impl std::hash::Hasher for Number {
        fn finish(&self) -> u64 {
            self.0
        }
        fn write(&mut self, bytes: &[u8]) {
            for &b in bytes {
                self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
            }
        }
        fn write_u64(&mut self, n: u64) {
            self.0 = n;
        }
    }
    let mut n = Number::default();
    std::hash::Hash::hash(&id, &mut n);
    n.0 & (TASK - 1)
}

impl std::fmt::Display for Owner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A task's owner is its own for its whole life and no other task's; outside a task the
    /// caller is its thread.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_task_is_one_owner_and_two_tasks_are_two() {
        assert_eq!(
            Owner::current(),
            Owner::current_thread(),
            "a test's body is no task"
        );
        let one = || {
            tokio::spawn(async {
                let first = Owner::current();
                tokio::task::yield_now().await;
                assert_eq!(Owner::current(), first, "stable across awaits");
                assert_eq!(Owner::current_task(), Some(first));
                first
            })
        };
        let (a, b) = (one().await.unwrap(), one().await.unwrap());
        assert_ne!(a, b);
        assert!(a.id() >= TASK && b.id() >= TASK);
        assert!(Owner::new().id() < TASK);
    }
}
