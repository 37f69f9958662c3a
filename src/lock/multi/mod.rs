//! Locks over several locks: [`MultiLock`] (all must be acquired, Redisson's
//! `RedissonMultiLock`, protocol §11.1) and [`RedLock`] (a quorum of independent masters, the
//! published Redlock algorithm with drift and validity). Each part is an ordinary lock on its own
//! client, with the usual wire format on its node.
//!
//! Their rooms: `part` (what both do with a part), `multilock`, `redlock`.

mod multilock;
mod part;
mod redlock;

pub use multilock::{MultiGuard, MultiLock};
pub use redlock::{RedLock, RedLockGuard, RedLockOptions};
