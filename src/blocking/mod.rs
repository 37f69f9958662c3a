//! The blocking API: the same locks for synchronous code. The owner of every acquisition is the
//! calling OS thread ([`Owner::current_thread`]), exactly as in Java's synchronous API, so one
//! lock handle can be shared by many threads (e.g. in an `Arc`) and each thread is its own
//! owner.
//!
//! The client runs its own small Tokio runtime and blocks the calling thread on it. Call it from
//! plain threads, from `main` without a runtime, or from `tokio::task::spawn_blocking`; never
//! from an async task or a thread inside `Runtime::block_on`.
//!
//! # Panics
//! Every method that talks to Redis (and [`Client::connect`]) panics when called on a thread
//! that is driving an async runtime (an async worker thread, or inside `block_on`), exactly as
//! Tokio's own `block_on` does: blocking there would stall every task of that runtime. This is a
//! programming error, not a condition to handle, so it is not an [`Error`]. Dropping a blocking
//! guard never panics (the release runs in the background).
//!
//! ```no_run
//! use redisson_lock::{blocking::Client, Config};
//!
//! let client = Client::connect("redis://127.0.0.1:6379", Config::default())?;
//! let lock = client.get_lock("orders");
//! let guard = lock.lock()?;
//! assert!(lock.is_held_by_current_thread()?);
//! guard.unlock()?;
//! # Ok::<(), redisson_lock::Error>(())
//! ```
//!
//! [`Owner::current_thread`]: crate::Owner::current_thread
//! [`Error`]: crate::Error

// The facade per family, one room each over the client and its runtime (`client`): the locks
// (`lock`, with `LockPart`), the multi-locks (`multi`: MultiLock, RedLock; it uses the lock
// room's `LockPart`, no other room), the recipes (`recipes`: election, run-once), the
// permit-expirable semaphore (`permit`), the semaphore and the count-down latch (`sync`).
// `tests/blocking_facade.rs` checks that every public async primitive has its twin here.

mod client;
mod lock;
mod multi;
mod permit;
mod recipes;
mod sync;

pub use client::Client;
pub use lock::{
    FairGuard, FairLock, FencedGuard, FencedLock, GroupGuard, GroupLock, Guard, Lock, LockEvents,
    LockGuard, LockPart, NonReentrantFairGuard, NonReentrantFairLock, NonReentrantGuard,
    NonReentrantLock, RLock, ReadGuard, ReadLock, ReadWriteLock, SpinGuard, SpinLock, WriteGuard,
    WriteLock,
};
pub use multi::{MultiGuard, MultiLock, RedLock, RedLockGuard};
pub use permit::{PermitExpirableSemaphore, PermitGuard, RPermitExpirableSemaphore};
pub use recipes::{Election, LeaderWatch, Leadership};
pub use sync::{CountDownLatch, RCountDownLatch, RSemaphore, Semaphore, SemaphorePermits};
