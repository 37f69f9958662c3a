//! # redisson-lock
//!
//! Distributed locks on Redis, wire-compatible with Java [Redisson]'s lock protocol: a Rust task
//! and a Java thread using the same lock name exclude each other, and an unlock on either side
//! wakes waiters on the other side at once. (Compatible with Redisson's protocol; not affiliated
//! with the Redisson project.)
//!
//! * [`Client`]: one per application; owns the connections, the script registry, the
//!   subscription registry and the watchdog.
//! * [`Lock<K>`](Lock): one generic lock handle for every kind `K`, with aliases for each:
//!   [`RLock`] (reentrant), [`FairLock`], [`ReadWriteLock`] ([`ReadLock`], [`WriteLock`]),
//!   [`FencedLock`], [`SpinLock`]. [`Guard<K>`](Guard): one hold, released on drop.
//! * [`MultiLock`] (all of several locks) and [`RedLock`] (a quorum of independent masters).
//! * [`blocking`]: the same API for synchronous code, owned by the calling OS thread.
//!
//! ```no_run
//! # async fn demo() -> redisson_lock::Result<()> {
//! use std::time::Duration;
//! use redisson_lock::{Client, Config};
//!
//! let client = Client::connect("redis://127.0.0.1:6379", Config::default()).await?;
//! let lock = client.get_lock("orders");
//! let guard = lock.lock().await?;
//! tokio::select! {
//!     _ = guard.lost() => eprintln!("lock lost, stopping"),
//!     _ = tokio::time::sleep(Duration::from_secs(1)) => {} // the work
//! }
//! guard.unlock().await?;
//! # Ok(()) }
//! ```
//!
//! [Redisson]: https://redisson.org
#![deny(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(feature = "blocking")]
pub mod blocking;
mod client;
mod config;
mod core;
mod error;
mod lock;
mod names;
mod observe;
mod owner;
mod pubsub;
mod scripts;
mod stats;
#[cfg(feature = "tls")]
mod tls;
mod ttl;
mod url;
mod watchdog;

pub use client::Client;
pub use config::{
    Config, NameMapper, PrefixNameMapper, Secret, ShardedSubscriptionMode, TlsSettings, MAX_MILLIS,
};
pub use error::{Error, ErrorKind, Failure, Result};
pub use lock::{
    AnyGuard, AnyKind, BackOff, Fair, FairGuard, FairLock, Fenced, FencedGuard, FencedLock, Guard,
    Kind, Lock, LockGuard, LockPart, MultiGuard, MultiLock, RLock, Read, ReadGuard, ReadLock,
    ReadWriteLock, RedLock, RedLockGuard, RedLockOptions, Reentrant, Spin, SpinGuard, SpinLock,
    UnlockOutcome, Write, WriteGuard, WriteLock,
};
pub use owner::Owner;
pub use stats::Stats;
pub use ttl::Ttl;
