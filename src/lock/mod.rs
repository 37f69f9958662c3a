//! The lock family. Each kind is a small description of its scripts, keys and channel
//! ([`engine::LockKind`]); one engine waits for all of them and one guard type releases them.

mod backoff;
mod engine;
mod fair;
mod fenced;
mod guard;
mod handle;
mod multi;
mod reentrant;
mod rwlock;
mod spin;

pub use backoff::BackOff;
pub use engine::UnlockOutcome;
pub use fair::FairLock;
pub use fenced::FencedLock;
pub use guard::LockGuard;
pub use multi::{LockPart, MultiGuard, MultiLock, RedLock, RedLockGuard, RedLockOptions};
pub use reentrant::RLock;
pub use rwlock::{ReadLock, ReadWriteLock, WriteLock};
pub use spin::SpinLock;

use std::time::Duration;

/// Remaining time to live of a lock key (`PTTL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    /// No such key: the lock is free (`-2`).
    NotLocked,
    /// The key has no expiry (`-1`): left by a foreign client without a TTL.
    NoExpiry,
    /// The key expires after this long.
    Expires(Duration),
}

impl Ttl {
    pub(crate) fn from_pttl(ms: i64) -> Ttl {
        match ms {
            -2 => Ttl::NotLocked,
            ms if ms < 0 => Ttl::NoExpiry,
            ms => Ttl::Expires(Duration::from_millis(ms as u64)),
        }
    }

    /// The `PTTL` encoding: milliseconds, `-1` no expiry, `-2` no lock.
    pub fn as_pttl(self) -> i64 {
        match self {
            Ttl::NotLocked => -2,
            Ttl::NoExpiry => -1,
            Ttl::Expires(d) => d.as_millis() as i64,
        }
    }
}
