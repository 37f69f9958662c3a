//! The blocking locks: `Lock<K>` over the same handles (the owner is the calling thread), the
//! aliases per kind, the read-write pair, `Guard<K>` and its aliases, `LockPart` (a lock of any
//! kind as a part of a blocking multi-lock), `LockEvents` (a lock's key events as a blocking
//! iterator); the `get_*` factories.

use std::{sync::mpsc::RecvTimeoutError, sync::Arc, time::Duration};

use super::client::{Client, Rt};
use crate::{
    error::Result,
    lock::{
        Fair, Fenced, Group, Kind, NonReentrant, NonReentrantFair, Read, Reentrant, Spin,
        UnlockOutcome, Write,
    },
    types::ttl::Ttl,
    BackOff, LockEvent, Owner,
};

impl Client {
    fn wrap<K: Kind>(&self, lock: crate::Lock<K>) -> Lock<K> {
        Lock {
            lock,
            rt: self.rt.clone(),
        }
    }

    /// A reentrant lock; its owner is whichever thread calls it.
    pub fn get_lock(&self, name: &str) -> RLock {
        self.wrap(
            self.inner
                .get_lock_with_owner(name, Owner::current_thread()),
        )
    }

    /// A fair lock; its owner is whichever thread calls it.
    pub fn get_fair_lock(&self, name: &str) -> FairLock {
        self.wrap(
            self.inner
                .get_fair_lock_with_owner(name, Owner::current_thread()),
        )
    }

    /// A read-write lock; its owner is whichever thread calls it.
    pub fn get_read_write_lock(&self, name: &str) -> ReadWriteLock {
        ReadWriteLock {
            inner: self
                .inner
                .get_read_write_lock_with_owner(name, Owner::current_thread()),
            rt: self.rt.clone(),
            read: std::sync::OnceLock::new(),
            write: std::sync::OnceLock::new(),
        }
    }

    /// A fenced lock; its owner is whichever thread calls it.
    pub fn get_fenced_lock(&self, name: &str) -> FencedLock {
        self.wrap(
            self.inner
                .get_fenced_lock_with_owner(name, Owner::current_thread()),
        )
    }

    /// A spin lock with Redisson's default back-off; its owner is whichever thread calls it.
    pub fn get_spin_lock(&self, name: &str) -> SpinLock {
        self.wrap(
            self.inner
                .get_spin_lock_with(name, Owner::current_thread(), BackOff::default()),
        )
    }

    /// A non-reentrant lock; its owner is whichever thread calls it. The thread that holds it
    /// gets [`Error::Reentry`](crate::Error::Reentry) from a second acquisition.
    pub fn get_non_reentrant_lock(&self, name: &str) -> NonReentrantLock {
        self.wrap(
            self.inner
                .get_non_reentrant_lock_with_owner(name, Owner::current_thread()),
        )
    }

    /// A non-reentrant fair lock; its owner is whichever thread calls it.
    pub fn get_non_reentrant_fair_lock(&self, name: &str) -> NonReentrantFairLock {
        self.wrap(
            self.inner
                .get_non_reentrant_fair_lock_with_owner(name, Owner::current_thread()),
        )
    }

    /// A group multi-lock over `values` of `group` (all or none); its owner is whichever
    /// thread calls it.
    pub fn get_group_lock<I>(&self, group: &str, values: I) -> GroupLock
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        self.wrap(
            self.inner
                .get_group_lock_with_owner(group, values, Owner::current_thread()),
        )
    }
}

/// A lock of kind `K` for synchronous code; the owner is the calling thread. `Send + Sync`.
///
/// ```no_run
/// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
/// let lock = client.get_lock("orders");
/// std::thread::scope(|s| {
///     for _ in 0..2 {
///         // Each thread is its own owner: the two exclude each other.
///         s.spawn(|| lock.lock().and_then(|g| g.unlock()));
///     }
/// });
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Lock<K: Kind> {
    lock: crate::Lock<K>,
    rt: Arc<Rt>,
}

/// A blocking reentrant lock.
///
/// ```no_run
/// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
/// let lock: redisson_lock::blocking::RLock = client.get_lock("orders");
/// let outer = lock.lock()?;
/// let inner = lock.lock()?; // the same thread re-enters
/// assert_eq!(lock.hold_count()?, 2);
/// # Ok(()) }
/// ```
pub type RLock = Lock<Reentrant>;
/// A blocking fair lock.
///
/// ```no_run
/// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
/// let lock: redisson_lock::blocking::FairLock = client.get_fair_lock("jobs");
/// let guard = lock.lock()?; // threads get it in the order they asked
/// # Ok(()) }
/// ```
pub type FairLock = Lock<Fair>;
/// The blocking read half of a [`ReadWriteLock`].
///
/// ```no_run
/// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
/// let rw = client.get_read_write_lock("catalog");
/// let read: &redisson_lock::blocking::ReadLock = rw.read_lock();
/// let guard = read.lock()?;
/// # Ok(()) }
/// ```
pub type ReadLock = Lock<Read>;
/// The blocking write half of a [`ReadWriteLock`].
///
/// ```no_run
/// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
/// let rw = client.get_read_write_lock("catalog");
/// let write: &redisson_lock::blocking::WriteLock = rw.write_lock();
/// let guard = write.lock()?;
/// # Ok(()) }
/// ```
pub type WriteLock = Lock<Write>;
/// A blocking fenced lock.
///
/// ```no_run
/// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
/// let lock: redisson_lock::blocking::FencedLock = client.get_fenced_lock("ledger");
/// let token = lock.lock()?.token(); // send it with every protected write
/// # Ok(()) }
/// ```
pub type FencedLock = Lock<Fenced>;
/// A blocking spin lock.
///
/// ```no_run
/// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
/// let lock: redisson_lock::blocking::SpinLock = client.get_spin_lock("import");
/// if let Some(guard) = lock.try_lock_for(std::time::Duration::from_secs(1))? {
///     guard.unlock()?;
/// }
/// # Ok(()) }
/// ```
pub type SpinLock = Lock<Spin>;
/// A blocking non-reentrant lock.
///
/// ```no_run
/// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
/// let lock: redisson_lock::blocking::NonReentrantLock = client.get_non_reentrant_lock("orders");
/// let guard = lock.lock()?;
/// assert!(lock.try_lock().is_err(), "the holding thread may not acquire it again");
/// # Ok(()) }
/// ```
pub type NonReentrantLock = Lock<NonReentrant>;
/// A blocking non-reentrant fair lock.
///
/// ```no_run
/// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
/// let lock: redisson_lock::blocking::NonReentrantFairLock =
///     client.get_non_reentrant_fair_lock("jobs");
/// let guard = lock.lock()?;
/// # Ok(()) }
/// ```
pub type NonReentrantFairLock = Lock<NonReentrantFair>;
/// A blocking group multi-lock.
///
/// ```no_run
/// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
/// let seats: redisson_lock::blocking::GroupLock = client.get_group_lock("flight:42", ["12A", "12B"]);
/// let guard = seats.lock()?; // both values, or wait
/// # Ok(()) }
/// ```
pub type GroupLock = Lock<Group>;

/// A blocking read-write lock: two halves owned by the calling thread.
///
/// ```no_run
/// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
/// let rw = client.get_read_write_lock("catalog");
/// let r = rw.read_lock().lock()?;
/// drop(r);
/// let w = rw.write_lock().lock()?;
/// w.unlock()?;
/// # Ok(()) }
/// ```
pub struct ReadWriteLock {
    inner: crate::ReadWriteLock,
    rt: Arc<Rt>,
    read: std::sync::OnceLock<ReadLock>,
    write: std::sync::OnceLock<WriteLock>,
}

impl std::fmt::Debug for ReadWriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.fmt(f)
    }
}

impl ReadWriteLock {
    // Made from the async lock's constructors, not its accessors: a half is kept once, here.
    fn new_read(&self) -> ReadLock {
        Lock {
            lock: self.inner.new_read(),
            rt: self.rt.clone(),
        }
    }

    fn new_write(&self) -> WriteLock {
        Lock {
            lock: self.inner.new_write(),
            rt: self.rt.clone(),
        }
    }

    crate::lock::kinds::rwlock::halves!(ReadLock, WriteLock);
}

impl<K: Kind> Lock<K> {
    fn acquisition(
        &self,
        lease: Option<Duration>,
        wait: Option<Duration>,
    ) -> Result<Option<Guard<K>>> {
        let held = self.rt.block_on(self.lock.handle.acquire_as(
            Owner::current_thread(),
            lease,
            wait,
        ))?;
        Ok(held.map(|h| Guard {
            inner: Some(crate::Guard::new(h)),
            rt: self.rt.clone(),
        }))
    }

    /// The user-facing name.
    pub fn name(&self) -> &str {
        self.lock.name()
    }

    /// Blocks until acquired; watchdog mode.
    ///
    /// # Errors
    /// As [`crate::Lock::lock`].
    pub fn lock(&self) -> Result<Guard<K>> {
        self.acquisition(None, None)
            .map(|g| g.expect("an unbounded wait only ends by acquiring"))
    }

    /// Blocks until acquired; holds for at most `lease`.
    ///
    /// # Errors
    /// As [`crate::Lock::lock_with_lease`].
    pub fn lock_with_lease(&self, lease: Duration) -> Result<Guard<K>> {
        self.acquisition(Some(lease), None)
            .map(|g| g.expect("an unbounded wait only ends by acquiring"))
    }

    /// One attempt; `Ok(None)` when another owner holds it.
    ///
    /// # Errors
    /// As [`crate::Lock::try_lock`].
    pub fn try_lock(&self) -> Result<Option<Guard<K>>> {
        self.acquisition(None, Some(Duration::ZERO))
    }

    /// Waits at most `wait`; watchdog mode.
    ///
    /// # Errors
    /// As [`crate::Lock::try_lock_for`].
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<Guard<K>>> {
        self.acquisition(None, Some(wait))
    }

    /// Waits at most `wait`; holds for at most `lease`.
    ///
    /// # Errors
    /// As [`crate::Lock::try_lock_with_lease`].
    pub fn try_lock_with_lease(&self, wait: Duration, lease: Duration) -> Result<Option<Guard<K>>> {
        self.acquisition(Some(lease), Some(wait))
    }

    /// Releases one hold of the calling thread.
    ///
    /// # Errors
    /// [`NotHeld`](crate::Error::NotHeld) if it holds none.
    pub fn unlock(&self) -> Result<UnlockOutcome> {
        self.rt
            .block_on(self.lock.handle.unlock_as(Owner::current_thread()))
    }

    /// Deletes the lock whoever holds it; `true` if it was locked.
    ///
    /// # Errors
    /// As [`crate::Lock::force_unlock`].
    pub fn force_unlock(&self) -> Result<bool> {
        self.rt.block_on(self.lock.force_unlock())
    }

    /// `true` if any owner holds the lock.
    ///
    /// # Errors
    /// A Redis or connection error.
    pub fn is_locked(&self) -> Result<bool> {
        self.rt.block_on(self.lock.is_locked())
    }

    /// `true` if the calling thread holds the lock.
    ///
    /// # Errors
    /// A Redis or connection error.
    pub fn is_held_by_current_thread(&self) -> Result<bool> {
        self.rt
            .block_on(self.lock.handle.is_held_as(Owner::current_thread()))
    }

    /// The calling thread's hold count.
    ///
    /// # Errors
    /// A Redis or connection error.
    pub fn hold_count(&self) -> Result<u64> {
        self.rt
            .block_on(self.lock.handle.hold_count_as(Owner::current_thread()))
    }

    /// Remaining time to live of the lock key.
    ///
    /// # Errors
    /// A Redis or connection error.
    pub fn remaining_ttl(&self) -> Result<Ttl> {
        self.rt.block_on(self.lock.remaining_ttl())
    }

    /// Who holds the lock now (as [`crate::Lock::holders`]).
    ///
    /// # Errors
    /// A Redis or connection error.
    pub fn holders(&self) -> Result<crate::Holders> {
        self.rt.block_on(self.lock.holders())
    }

    /// The deleted and expired events of this lock's key (as [`crate::Lock::events`]): a
    /// blocking iterator, subscribed (and acknowledged by the server) before this returns.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
    /// use std::time::Duration;
    /// use redisson_lock::LockEvent;
    /// let lock = client.get_lock("orders");
    /// let mut events = lock.events()?;
    /// std::thread::spawn(move || {
    ///     for event in events.by_ref() {
    ///         if event == LockEvent::Expired {
    ///             eprintln!("a holder of orders let it expire");
    ///         }
    ///     }
    /// });
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`crate::Lock::events`].
    pub fn events(&self) -> Result<LockEvents> {
        let inner = self.rt.block_on(self.lock.events())?;
        Ok(LockEvents {
            inner,
            rt: self.rt.clone(),
        })
    }
}

/// The events of one lock's key for synchronous code (the blocking twin of
/// [`crate::LockEvents`]), from [`Lock::events`]: an [`Iterator`] whose `next` blocks until
/// the next event and ends once the client is shut down, and
/// [`next_timeout`](Self::next_timeout) for a bounded wait. Dropping it unsubscribes. What the
/// events mean, and what they do not promise, is [`crate::LockEvents`]'s.
#[derive(Debug)]
pub struct LockEvents {
    inner: crate::LockEvents,
    rt: Arc<Rt>,
}

impl LockEvents {
    /// Waits at most `timeout` for the next event.
    ///
    /// # Errors
    /// [`RecvTimeoutError::Timeout`] when none came within `timeout` (the stream goes on: an
    /// event that comes later is returned by the next call);
    /// [`RecvTimeoutError::Disconnected`] once the client is shut down.
    pub fn next_timeout(
        &mut self,
        timeout: Duration,
    ) -> std::result::Result<LockEvent, RecvTimeoutError> {
        self.rt.next_within(timeout, self.inner.next())
    }
}

impl Iterator for LockEvents {
    type Item = LockEvent;

    /// Blocks until the next event; `None` once the client is shut down.
    fn next(&mut self) -> Option<LockEvent> {
        self.rt.block_on(self.inner.next())
    }
}

impl FencedLock {
    /// The current token (0 if the lock was never acquired).
    ///
    /// # Errors
    /// A Redis or connection error.
    pub fn token(&self) -> Result<u64> {
        self.rt.block_on(self.lock.token())
    }
}

/// One hold acquired through the blocking API; dropping it releases it in the background.
///
/// ```no_run
/// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
/// let guard = client.get_lock("orders").lock()?;
/// if !guard.is_lost() {
///     // the work
/// }
/// guard.unlock()?; // or drop it
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "dropping the guard releases the lock at once"]
pub struct Guard<K: Kind> {
    inner: Option<crate::Guard<K>>,
    rt: Arc<Rt>,
}

/// A hold of a blocking [`RLock`].
///
/// ```no_run
/// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
/// let guard: redisson_lock::blocking::LockGuard = client.get_lock("orders").lock()?;
/// # Ok(()) }
/// ```
pub type LockGuard = Guard<Reentrant>;
/// A hold of a blocking [`FairLock`].
pub type FairGuard = Guard<Fair>;
/// A hold of a blocking [`ReadLock`].
pub type ReadGuard = Guard<Read>;
/// A hold of a blocking [`WriteLock`].
pub type WriteGuard = Guard<Write>;
/// A hold of a blocking [`FencedLock`], with its [`token`](Guard::<Fenced>::token).
pub type FencedGuard = Guard<Fenced>;
/// A hold of a blocking [`SpinLock`].
pub type SpinGuard = Guard<Spin>;
/// A hold of a blocking [`NonReentrantLock`].
pub type NonReentrantGuard = Guard<NonReentrant>;
/// A hold of a blocking [`NonReentrantFairLock`].
pub type NonReentrantFairGuard = Guard<NonReentrantFair>;
/// A hold of a blocking [`GroupLock`] (every value of it).
pub type GroupGuard = Guard<Group>;

impl<K: Kind> Guard<K> {
    fn get(&self) -> &crate::Guard<K> {
        self.inner.as_ref().expect("guard present until consumed")
    }

    /// The owner (the thread that acquired).
    pub fn owner(&self) -> Owner {
        self.get().owner()
    }

    /// `true` once the lock is lost or while it is in doubt (as [`crate::Guard::is_lost`]).
    pub fn is_lost(&self) -> bool {
        self.get().is_lost()
    }

    /// Where the hold stands (as [`crate::Guard::state`]).
    pub fn state(&self) -> crate::HoldState {
        self.get().state()
    }

    /// An owned view of the hold's state for threads and tasks the holder starts (as
    /// [`crate::Guard::watch`]).
    pub fn watch(&self) -> crate::HoldWatch {
        self.get().watch()
    }

    /// Releases this hold and reports the outcome (from any thread).
    ///
    /// # Errors
    /// As [`crate::Guard::unlock`].
    pub fn unlock(mut self) -> Result<UnlockOutcome> {
        let g = self.inner.take().expect("guard present until consumed");
        self.rt.block_on(g.unlock())
    }

    /// Keeps the hold without a guard; release it later with [`Lock::unlock`] on the same
    /// thread.
    pub fn keep(mut self) {
        if let Some(g) = self.inner.take() {
            g.keep();
        }
    }
}

/// A blocking lock of any kind as a part of a blocking [`MultiLock`](super::MultiLock) or
/// [`RedLock`](super::RedLock) (the blocking twin of [`crate::LockPart`]): made with `.into()`
/// from any [`Lock<K>`]. Each acquisition of the multi-lock takes its parts as the calling
/// thread, as the lock itself does.
///
/// ```no_run
/// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
/// use redisson_lock::blocking::{LockPart, MultiLock};
/// let rw = client.get_read_write_lock("catalog");
/// let parts: Vec<LockPart> = vec![client.get_lock("a").into(), rw.into_write_lock().into()];
/// let multi = MultiLock::new(parts)?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LockPart {
    pub(super) part: crate::LockPart,
    pub(super) rt: Arc<Rt>,
}

impl<K: Kind> From<Lock<K>> for LockPart {
    fn from(lock: Lock<K>) -> Self {
        LockPart {
            part: lock.lock.into(),
            rt: lock.rt,
        }
    }
}

impl Guard<Fenced> {
    /// The fencing token of this acquisition.
    pub fn token(&self) -> u64 {
        self.get().token()
    }
}
