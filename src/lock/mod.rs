//! The lock family.
//!
//! * [`kind`]: what a lock kind is — a pure description of its keys, scripts and channel
//!   ([`kind::Protocol`]) plus the typed replies.
//! * One file per kind ([`reentrant`], [`fair`], [`rwlock`], [`fenced`], [`spin`]): its
//!   description, its marker type and its kind-specific methods.
//! * [`hold`]: one owner's hold of one lock (client, kind, owner field, lease) and the calls
//!   made with it: attempt, release, renew, give up.
//! * [`engine`]: the one acquire engine (attempt → subscribe → attempt → wait → …), and
//!   [`queue`], the local hand-off queue it keeps per contended lock.
//! * [`front`]: the generic front end [`Lock<K>`](front::Lock) and [`Guard<K>`](guard::Guard).
//! * [`multi`]: MultiLock and RedLock over type-erased parts.

mod backoff;
mod engine;
mod fair;
mod fenced;
mod front;
mod guard;
mod hold;
mod kind;
mod multi;
pub(crate) mod pending;
pub(crate) mod queue;
mod reentrant;
mod run;
mod rwlock;
mod spin;

pub use backoff::BackOff;
pub use fair::{Fair, FairGuard, FairLock};
pub use fenced::{Fenced, FencedGuard, FencedLock};
pub use front::{Lock, LockPart, UnlockOutcome};
pub use guard::{AnyGuard, Guard};
pub use kind::{AnyKind, Kind};
pub use multi::{MultiGuard, MultiLock, RedLock, RedLockGuard, RedLockOptions};
pub use reentrant::{LockGuard, RLock, Reentrant};
pub use rwlock::{Read, ReadGuard, ReadLock, ReadWriteLock, Write, WriteGuard, WriteLock};
pub use spin::{Spin, SpinGuard, SpinLock};

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
        send_sync_static::<LockPart>();
        send_sync_static::<MultiLock>();
        send_sync_static::<RedLock>();
        send_sync_static::<LockGuard>();
        send_sync_static::<FencedGuard>();
        send_sync_static::<AnyGuard>();
        send_sync_static::<MultiGuard>();
        send_sync_static::<RedLockGuard>();
        send_sync_static::<crate::Client>();
        send_sync_static::<crate::Error>();
    }
}
