//! The blocking API: the same locks for synchronous code. The owner of every acquisition is the
//! calling OS thread ([`Owner::current_thread`]), exactly as in Java's synchronous API, so one
//! [`RLock`] can be shared by many threads (e.g. in an `Arc`) and each thread is its own owner.
//!
//! The client runs its own small Tokio runtime. Do not call these methods from inside an async
//! runtime: they return [`Error::InvalidArgument`] there instead of blocking a worker thread.
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

use std::{future::Future, sync::Arc, time::Duration};

use tokio::runtime::Runtime;

use crate::{
    error::{Error, Result},
    lock::{Ttl, UnlockOutcome},
    Config, Owner,
};

#[derive(Debug)]
struct Rt(Option<Runtime>);

impl Drop for Rt {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl Rt {
    fn block_on<F: Future>(&self, fut: F) -> Result<F::Output> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err(Error::InvalidArgument(
                "the blocking API was called from inside an async runtime; use the async API"
                    .into(),
            ));
        }
        Ok(self.0.as_ref().expect("runtime present").block_on(fut))
    }
}

/// A blocking client. Cheap to clone.
#[derive(Clone)]
pub struct Client {
    inner: crate::Client,
    rt: Arc<Rt>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("blocking::Client")
            .field("id", &self.inner.id())
            .finish()
    }
}

impl Client {
    /// Connects, starting the client's runtime (two worker threads).
    pub fn connect(url: &str, config: Config) -> Result<Client> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("redisson-lock")
            .enable_all()
            .build()
            .map_err(|e| Error::Connection(format!("cannot start runtime: {e}")))?;
        let rt = Rt(Some(runtime));
        let inner = rt.block_on(crate::Client::connect(url, config))??;
        Ok(Client {
            inner,
            rt: Arc::new(rt),
        })
    }

    /// The client id (`<client uuid>` of every owner field).
    pub fn id(&self) -> &str {
        self.inner.id()
    }

    /// The async client underneath (same connections, watchdog and subscriptions).
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }

    /// A reentrant lock handle; its owner is whichever thread calls it.
    pub fn get_lock(&self, name: &str) -> RLock {
        RLock {
            lock: self
                .inner
                .get_lock_with_owner(name, Owner::current_thread()),
            rt: self.rt.clone(),
        }
    }

    /// Stops the watchdog and closes the connections without releasing anything.
    pub fn shutdown(&self) -> Result<()> {
        self.rt.block_on(self.inner.shutdown())
    }
}

/// A reentrant lock for synchronous code; the owner is the calling thread. `Send + Sync`.
#[derive(Debug)]
pub struct RLock {
    lock: crate::RLock,
    rt: Arc<Rt>,
}

impl RLock {
    fn guard(&self, g: Option<crate::LockGuard>) -> Option<LockGuard> {
        g.map(|g| LockGuard {
            inner: Some(g),
            rt: self.rt.clone(),
        })
    }

    fn acquire(
        &self,
        lease: Option<Duration>,
        wait: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        let g = self.rt.block_on(self.lock.handle.acquire_as(
            Owner::current_thread(),
            lease,
            wait,
        ))??;
        Ok(self.guard(g))
    }

    /// The user-facing name.
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// Blocks until acquired; watchdog mode.
    pub fn lock(&self) -> Result<LockGuard> {
        self.acquire(None, None)
            .map(|g| g.expect("an unbounded wait only ends by acquiring"))
    }

    /// Blocks until acquired; holds for at most `lease`.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        self.acquire(Some(lease), None)
            .map(|g| g.expect("an unbounded wait only ends by acquiring"))
    }

    /// One attempt; `Ok(None)` when another owner holds it.
    pub fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.acquire(None, Some(Duration::ZERO))
    }

    /// Waits at most `wait`; watchdog mode.
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        self.acquire(None, Some(wait))
    }

    /// Waits at most `wait`; holds for at most `lease`.
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard>> {
        self.acquire(Some(lease), Some(wait))
    }

    /// Releases one hold of the calling thread ([`Error::NotHeld`] if it holds none).
    pub fn unlock(&self) -> Result<UnlockOutcome> {
        self.rt
            .block_on(self.lock.handle.unlock_as(Owner::current_thread()))?
    }

    /// Deletes the lock whoever holds it; `true` if it was locked.
    pub fn force_unlock(&self) -> Result<bool> {
        self.rt.block_on(self.lock.force_unlock())?
    }

    /// `true` if any owner holds the lock.
    pub fn is_locked(&self) -> Result<bool> {
        self.rt.block_on(self.lock.is_locked())?
    }

    /// `true` if the calling thread holds the lock.
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.rt
            .block_on(self.lock.handle.is_held_as(Owner::current_thread()))?
    }

    /// The calling thread's hold count.
    pub fn hold_count(&self) -> Result<u64> {
        self.rt
            .block_on(self.lock.handle.hold_count_as(Owner::current_thread()))?
    }

    /// Remaining time to live of the lock key.
    pub fn remaining_ttl(&self) -> Result<Ttl> {
        self.rt.block_on(self.lock.remaining_ttl())?
    }
}

/// One hold acquired through the blocking API; dropping it releases it in the background.
#[derive(Debug)]
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard {
    inner: Option<crate::LockGuard>,
    rt: Arc<Rt>,
}

impl LockGuard {
    fn get(&self) -> &crate::LockGuard {
        self.inner.as_ref().expect("guard present until consumed")
    }

    /// The owner (the thread that acquired).
    pub fn owner(&self) -> Owner {
        self.get().owner()
    }

    /// `true` once the lock is known or presumed lost.
    pub fn is_lost(&self) -> bool {
        self.get().is_lost()
    }

    /// Releases this hold and reports the outcome (from any thread).
    pub fn unlock(mut self) -> Result<UnlockOutcome> {
        let g = self.inner.take().expect("guard present until consumed");
        self.rt.block_on(g.unlock())?
    }

    /// Keeps the hold without a guard; release it later with [`RLock::unlock`] on the same
    /// thread.
    pub fn keep(mut self) {
        if let Some(g) = self.inner.take() {
            g.keep();
        }
    }
}
