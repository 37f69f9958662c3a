//! The lock family.
//!
//! * [`protocol`]: what a lock kind is — a pure description of its keys, scripts and channels
//!   ([`protocol::Protocol`]) plus the typed replies.
//! * [`kinds`]: one file per kind (`reentrant`, `fair`, `rwlock`, `fenced`, `spin`,
//!   `non_reentrant`, `non_reentrant_fair`, `group`): its
//!   protocol, its marker type and its kind-specific methods; the spin lock's back-off
//!   schedules beside it (`backoff`).
//! * [`claim`]: the lock's waiter, one owner's claim to one lock with every call made for a
//!   hold it has and its attempts, run by the one engine (`crate::engine`). The per-client
//!   acquisition state they act on (owner ledger, pending releases, the local wait lines) is a
//!   room of its own below the client (`acquisitions`).
//! * [`front`]: the generic front end [`Lock<K>`](front::Lock); [`guard`]:
//!   [`Guard<K>`](guard::Guard); `run`: `Lock::run` and friends.
//! * `multi`: MultiLock and RedLock over type-erased parts.
//! * `events`: a lock's deleted/expired keyspace events ([`Lock::events`](front::Lock::events)).
//! * `holders`: who holds a lock ([`Lock::holders`](front::Lock::holders)).

pub(crate) mod claim;
mod events;
pub(crate) mod front;
pub(crate) mod guard;
mod holders;
pub(crate) mod kinds;
mod multi;
pub(crate) mod protocol;
mod run;

pub use events::{LockEvent, LockEvents};
pub use front::{Lock, LockPart};
pub use guard::{AnyGuard, Guard};
pub use holders::{Holder, Holders};
pub use kinds::backoff::BackOff;
pub use kinds::{
    fair::{Fair, FairGuard, FairLock},
    fenced::{Fenced, FencedGuard, FencedLock},
    group::{Group, GroupGuard, GroupLock},
    non_reentrant::{NonReentrant, NonReentrantGuard, NonReentrantLock},
    non_reentrant_fair::{NonReentrantFair, NonReentrantFairGuard, NonReentrantFairLock},
    reentrant::{LockGuard, RLock, Reentrant},
    rwlock::{Read, ReadGuard, ReadLock, ReadWriteLock, Write, WriteGuard, WriteLock},
    spin::{Spin, SpinGuard, SpinLock},
};
pub use multi::{MultiGuard, MultiLock, RedLock, RedLockGuard, RedLockOptions};
pub use protocol::{AnyKind, Kind, UnlockOutcome};

#[cfg(test)]
mod tests {
    use super::*;

    fn send_sync_static<T: Send + Sync + 'static>() {}

    #[test]
    fn handles_and_guards_are_send_sync_and_static() {
        send_sync_static::<RLock>();
        send_sync_static::<FairLock>();
        send_sync_static::<ReadWriteLock>();
        send_sync_static::<FencedLock>();
        send_sync_static::<SpinLock>();
        send_sync_static::<NonReentrantLock>();
        send_sync_static::<GroupLock>();
        send_sync_static::<NonReentrantFairLock>();
        send_sync_static::<LockPart>();
        send_sync_static::<MultiLock>();
        send_sync_static::<RedLock>();
        send_sync_static::<LockGuard>();
        send_sync_static::<FencedGuard>();
        send_sync_static::<AnyGuard>();
        send_sync_static::<MultiGuard>();
        send_sync_static::<RedLockGuard>();
        send_sync_static::<crate::client::Client>();
        send_sync_static::<crate::error::Error>();
    }
}
