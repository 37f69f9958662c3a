//! The blocking multi-locks: `MultiLock` / `MultiGuard` and `RedLock` / `RedLockGuard` over
//! the async ones, built from blocking locks' `LockPart`s. The owner of every part of an
//! acquisition is the calling thread: each call runs the async multi-lock as that thread
//! (`as_owner`), whatever thread made the parts' handles.

use std::{sync::Arc, time::Duration};

use tokio::time::Instant;

use super::{client::Rt, lock::LockPart};
use crate::{error::Result, HoldState, Owner, RedLockOptions};

/// The async parts and the runtime to block on (the first part's client's; every part's
/// client runs its own work on its own runtime).
fn split(parts: Vec<LockPart>) -> (Vec<crate::LockPart>, Option<Arc<Rt>>) {
    let rt = parts.first().map(|p| p.rt.clone());
    (parts.into_iter().map(|p| p.part).collect(), rt)
}

/// Several blocking locks taken as one: all parts or none (see [`crate::MultiLock`]). The
/// owner of every part is the calling thread, as for a blocking [`Lock`](super::Lock): two
/// threads sharing one `MultiLock` exclude each other, and a thread that holds a part through
/// its own lock handle re-enters it (a reentrant part). `Send + Sync`.
///
/// ```no_run
/// # fn demo(a: redisson_lock::blocking::Client, b: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
/// use redisson_lock::blocking::MultiLock;
/// let multi = MultiLock::new(vec![a.get_lock("x").into(), b.get_fair_lock("y").into()])?;
/// let guard = multi.lock()?;
/// assert!(multi.is_held_by_current_thread()?);
/// guard.unlock()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct MultiLock {
    inner: crate::MultiLock,
    rt: Arc<Rt>,
}

impl MultiLock {
    /// A multi-lock over `parts` (at least one), as [`crate::MultiLock::new`].
    ///
    /// # Errors
    /// [`InvalidArgument`](crate::Error::InvalidArgument) for an empty list.
    pub fn new(parts: Vec<LockPart>) -> Result<Self> {
        let (parts, rt) = split(parts);
        let inner = crate::MultiLock::new(parts)?;
        Ok(Self {
            inner,
            rt: rt.expect("a MultiLock has a part"),
        })
    }

    /// The async multi-lock acting for the calling thread.
    fn here(&self) -> crate::MultiLock {
        self.inner.as_owner(Owner::current_thread())
    }

    fn wrap(&self, inner: crate::MultiGuard) -> MultiGuard {
        MultiGuard {
            inner: Some(inner),
            rt: self.rt.clone(),
        }
    }

    /// Blocks until every part is acquired; watchdog mode (as [`crate::MultiLock::lock`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn lock(&self) -> Result<MultiGuard> {
        let multi = self.here();
        let guard = self.rt.block_on(multi.lock())?;
        Ok(self.wrap(guard))
    }

    /// Blocks until every part is acquired; every part expires after `lease` (as
    /// [`crate::MultiLock::lock_with_lease`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<MultiGuard> {
        let multi = self.here();
        let guard = self.rt.block_on(multi.lock_with_lease(lease))?;
        Ok(self.wrap(guard))
    }

    /// One attempt on every part, no waiting (as [`crate::MultiLock::try_lock`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn try_lock(&self) -> Result<Option<MultiGuard>> {
        let multi = self.here();
        let guard = self.rt.block_on(multi.try_lock())?;
        Ok(guard.map(|g| self.wrap(g)))
    }

    /// Blocks at most `wait` in all; watchdog mode (as [`crate::MultiLock::try_lock_for`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiGuard>> {
        let multi = self.here();
        let guard = self.rt.block_on(multi.try_lock_for(wait))?;
        Ok(guard.map(|g| self.wrap(g)))
    }

    /// Blocks at most `wait` in all; every part expires after `lease` (as
    /// [`crate::MultiLock::try_lock_with_lease`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<MultiGuard>> {
        let multi = self.here();
        let guard = self.rt.block_on(multi.try_lock_with_lease(wait, lease))?;
        Ok(guard.map(|g| self.wrap(g)))
    }

    /// `true` if the calling thread holds every part (as
    /// [`crate::MultiLock::is_held_by_current`], for this thread).
    ///
    /// # Errors
    /// A Redis or connection error of a part.
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        let multi = self.here();
        self.rt.block_on(multi.is_held_by_current())
    }
}

/// The held parts of a blocking [`MultiLock`] (see [`crate::MultiGuard`]); dropping it releases
/// every part in the background (drop never blocks and never panics).
///
/// ```no_run
/// # fn demo(multi: redisson_lock::blocking::MultiLock) -> redisson_lock::Result<()> {
/// let guard = multi.lock()?;
/// if !guard.is_lost() {
///     // the work, under every part
/// }
/// guard.unlock()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "dropping the guard releases every part at once"]
pub struct MultiGuard {
    inner: Option<crate::MultiGuard>,
    rt: Arc<Rt>,
}

impl MultiGuard {
    fn get(&self) -> &crate::MultiGuard {
        self.inner.as_ref().expect("guard present until consumed")
    }

    /// The guards of the parts, in the order of the lock's parts (as
    /// [`crate::MultiGuard::parts`]): read their owner (the thread that acquired), state or
    /// token; release them together with [`unlock`](Self::unlock).
    pub fn parts(&self) -> &[crate::AnyGuard] {
        self.get().parts()
    }

    /// `true` once any part is lost or in doubt (as [`crate::MultiGuard::is_lost`]).
    pub fn is_lost(&self) -> bool {
        self.get().is_lost()
    }

    /// The worst state of the parts (as [`crate::MultiGuard::state`]).
    pub fn state(&self) -> HoldState {
        self.get().state()
    }

    /// Releases every part (from any thread) and returns the first error (as
    /// [`crate::MultiGuard::unlock`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn unlock(mut self) -> Result<()> {
        let guard = self.inner.take().expect("guard present until consumed");
        self.rt.block_on(guard.unlock())
    }
}

/// A blocking RedLock over one blocking lock per independent master (see [`crate::RedLock`]
/// for the algorithm and its safety limits). The owner of every part is the calling thread.
/// `Send + Sync`.
///
/// ```no_run
/// # fn demo(clients: Vec<redisson_lock::blocking::Client>) -> redisson_lock::Result<()> {
/// use std::time::Duration;
/// use redisson_lock::blocking::RedLock;
/// // One blocking client per independent master.
/// let red = RedLock::new(clients.iter().map(|c| c.get_lock("job").into()).collect())?;
/// if let Some(mut guard) = red.try_lock_with_lease(Duration::from_secs(1), Duration::from_secs(10))? {
///     // the work, finished well within guard.validity()
///     guard.extend(Duration::from_secs(10))?; // more time, if a quorum agrees
///     guard.unlock()?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RedLock {
    inner: crate::RedLock,
    rt: Arc<Rt>,
}

impl RedLock {
    /// A RedLock over `parts`, one lock per independent master (as [`crate::RedLock::new`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn new(parts: Vec<LockPart>) -> Result<Self> {
        Self::with_options(parts, RedLockOptions::default())
    }

    /// A RedLock with explicit options (as [`crate::RedLock::with_options`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn with_options(parts: Vec<LockPart>, options: RedLockOptions) -> Result<Self> {
        let (parts, rt) = split(parts);
        let inner = crate::RedLock::with_options(parts, options)?;
        Ok(Self {
            inner,
            rt: rt.expect("a RedLock has a part"),
        })
    }

    /// Votes needed: N/2 + 1.
    pub fn quorum(&self) -> usize {
        self.inner.quorum()
    }

    /// The async RedLock acting for the calling thread.
    fn here(&self) -> crate::RedLock {
        self.inner.as_owner(Owner::current_thread())
    }

    fn wrap(&self, inner: crate::RedLockGuard) -> RedLockGuard {
        RedLockGuard {
            inner: Some(inner),
            rt: self.rt.clone(),
        }
    }

    /// Acquires with a lease, blocking at most `wait` (as
    /// [`crate::RedLock::try_lock_with_lease`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<RedLockGuard>> {
        let red = self.here();
        let guard = self.rt.block_on(red.try_lock_with_lease(wait, lease))?;
        Ok(guard.map(|g| self.wrap(g)))
    }

    /// Acquires in watchdog mode, blocking at most `wait` (as
    /// [`crate::RedLock::try_lock_for`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<RedLockGuard>> {
        let red = self.here();
        let guard = self.rt.block_on(red.try_lock_for(wait))?;
        Ok(guard.map(|g| self.wrap(g)))
    }

    /// Blocks without limit; leased (as [`crate::RedLock::lock_with_lease`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn lock_with_lease(&self, lease: Duration) -> Result<RedLockGuard> {
        let red = self.here();
        let guard = self.rt.block_on(red.lock_with_lease(lease))?;
        Ok(self.wrap(guard))
    }
}

/// A held blocking [`RedLock`] (see [`crate::RedLockGuard`]); dropping it releases every part
/// in the background (drop never blocks and never panics).
///
/// ```no_run
/// # fn demo(red: redisson_lock::blocking::RedLock) -> redisson_lock::Result<()> {
/// use std::time::Duration;
/// let guard = red.lock_with_lease(Duration::from_secs(10))?;
/// if guard.validity() > Duration::from_secs(1) {
///     // the work, finished well within the validity
/// }
/// guard.unlock()?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "dropping the guard releases every part at once"]
pub struct RedLockGuard {
    inner: Option<crate::RedLockGuard>,
    rt: Arc<Rt>,
}

impl RedLockGuard {
    fn get(&self) -> &crate::RedLockGuard {
        self.inner.as_ref().expect("guard present until consumed")
    }

    /// The instant until which the lock is valid (as [`crate::RedLockGuard::valid_until`]).
    pub fn valid_until(&self) -> Instant {
        self.get().valid_until()
    }

    /// Remaining validity, zero once passed (as [`crate::RedLockGuard::validity`]).
    pub fn validity(&self) -> Duration {
        self.get().validity()
    }

    /// Number of nodes that hold the lock (as [`crate::RedLockGuard::acquired_parts`]).
    pub fn acquired_parts(&self) -> usize {
        self.get().acquired_parts()
    }

    /// `true` once the lock is no longer valid (as [`crate::RedLockGuard::is_lost`]).
    pub fn is_lost(&self) -> bool {
        self.get().is_lost()
    }

    /// Where the lock stands (as [`crate::RedLockGuard::state`]).
    pub fn state(&self) -> HoldState {
        self.get().state()
    }

    /// Extends a leased RedLock to `lease` from now if a quorum of nodes agrees (as
    /// [`crate::RedLockGuard::extend`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn extend(&mut self, lease: Duration) -> Result<bool> {
        let guard = self.inner.as_mut().expect("guard present until consumed");
        self.rt.block_on(guard.extend(lease))
    }

    /// Releases every part (from any thread; as [`crate::RedLockGuard::unlock`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn unlock(mut self) -> Result<()> {
        let guard = self.inner.take().expect("guard present until consumed");
        self.rt.block_on(guard.unlock())
    }
}
