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

use std::{future::Future, sync::Arc, time::Duration};

use tokio::runtime::Runtime;

use crate::{
    error::{Error, Result},
    lock::{
        Fair, Fenced, Group, Kind, NonReentrant, NonReentrantFair, Read, Reentrant, Spin,
        UnlockOutcome, Write,
    },
    types::ttl::Ttl,
    BackOff, Config, Owner,
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
    /// Blocks the calling thread on the client's runtime. Tokio panics here when the calling
    /// thread drives an async runtime (see the module's `# Panics`); a `spawn_blocking` thread
    /// or a plain thread is fine. No check of our own: Tokio offers no way to tell a
    /// `spawn_blocking` thread (allowed) from an async worker (not allowed) without trying.
    fn block_on<F: Future>(&self, fut: F) -> F::Output {
        self.0.as_ref().expect("runtime present").block_on(fut)
    }
}

/// A blocking client. Cheap to clone.
///
/// ```no_run
/// use redisson_lock::{blocking::Client, Config};
/// let client = Client::connect("redis://127.0.0.1:6379", Config::default())?;
/// let guard = client.get_lock("orders").lock()?;
/// guard.unlock()?;
/// client.shutdown();
/// # Ok::<(), redisson_lock::Error>(())
/// ```
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
    ///
    /// # Errors
    /// As [`crate::Client::connect`].
    ///
    /// # Panics
    /// On a thread that drives an async runtime (see the [module docs](self)).
    pub fn connect(url: &str, config: Config) -> Result<Client> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("redisson-lock")
            .enable_all()
            .build()
            .map_err(|e| Error::Connection(format!("cannot start runtime: {e}").into()))?;
        let rt = Rt(Some(runtime));
        let inner = rt.block_on(crate::Client::connect(url, config))?;
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

    /// The leader election `name` (as [`crate::Client::get_election`]).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
    /// let leadership = client.get_election("scheduler").campaign()?;
    /// println!("leading in term {}", leadership.term());
    /// leadership.resign()?;
    /// # Ok(()) }
    /// ```
    pub fn get_election(&self, name: &str) -> Election {
        Election {
            inner: self.inner.get_election(name),
            rt: self.rt.clone(),
        }
    }

    /// Runs `job` on the calling thread once across every instance that runs it under `name`
    /// (as [`crate::Client::run_once`]: skipped at once when another instance, Rust or Java,
    /// holds the name; the hold renewed by the watchdog while the job runs; an early end keeps
    /// the name until `at_least` by the key's TTL).
    ///
    /// **Cutting at `at_most`.** A running synchronous job cannot be stopped from outside, so
    /// the blocking form cuts the *hold*, not the job: at `at_most` the client's runtime
    /// releases the name, and the job's [`HoldWatch`](crate::HoldWatch) turns
    /// [`Lost`](crate::HoldState::Lost) at that moment ([`assert_locked`](crate::assert_locked)
    /// and `hold.assert_locked()` fail from then on, on the job's thread). The job should check
    /// before each side effect and return. A job that returns after the cut gives
    /// [`RunOnce::TimedOut`](crate::RunOnce::TimedOut) (its output is dropped: another
    /// instance may have run the tick meanwhile).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
    /// use std::time::Duration;
    /// let outcome = client.run_once("reports:hourly", Duration::from_secs(10), Duration::from_secs(300), |hold| {
    ///     for batch in 0..10 {
    ///         hold.assert_locked()?; // stop at the first batch after at_most (or a loss)
    ///         let _ = batch; // ... one batch of the report
    ///     }
    ///     Ok::<_, redisson_lock::Error>(())
    /// })?;
    /// println!("{outcome:?}");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`crate::Client::run_once`].
    pub fn run_once<F, T>(
        &self,
        name: &str,
        at_least: Duration,
        at_most: Duration,
        job: F,
    ) -> Result<crate::RunOnce<T>>
    where
        F: FnOnce(crate::HoldWatch) -> T,
    {
        let Some(begun) = self
            .rt
            .block_on(self.inner.run_once_begin(name, at_least, at_most))?
        else {
            return Ok(crate::RunOnce::Skipped);
        };
        let watch = begun.watch();
        let output = crate::recipes::watch::scoped_on_thread(watch.clone(), || job(watch));
        Ok(self.rt.block_on(begun.finish(output)))
    }

    /// The permit-expirable semaphore `name` (as
    /// [`crate::Client::get_permit_expirable_semaphore`]).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
    /// let exports = client.get_permit_expirable_semaphore("exports");
    /// exports.try_set_permits(3)?;
    /// let permit = exports.acquire(None)?; // renewed by the watchdog while it lives
    /// if permit.is_lost() {
    ///     return Ok(()); // in doubt or lost: do not touch the resource
    /// }
    /// permit.release()?;
    /// # Ok(()) }
    /// ```
    pub fn get_permit_expirable_semaphore(&self, name: &str) -> PermitExpirableSemaphore {
        PermitExpirableSemaphore {
            inner: self.inner.get_permit_expirable_semaphore(name),
            rt: self.rt.clone(),
        }
    }

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
        let (read, write) = self
            .inner
            .get_read_write_lock_with_owner(name, Owner::current_thread())
            .into_parts();
        ReadWriteLock {
            read: self.wrap(read),
            write: self.wrap(write),
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
    /// gets [`Error::Reentry`] from a second acquisition.
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

    /// Stops the watchdog and closes the connections without releasing anything.
    ///
    /// # Panics
    /// On a thread that drives an async runtime (see the [module docs](self)).
    pub fn shutdown(&self) {
        self.rt.block_on(self.inner.shutdown())
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
#[derive(Debug)]
pub struct ReadWriteLock {
    read: ReadLock,
    write: WriteLock,
}

impl ReadWriteLock {
    crate::lock::kinds::rwlock::halves!(ReadLock, WriteLock);
}

impl<K: Kind> Lock<K> {
    fn acquire(&self, lease: Option<Duration>, wait: Option<Duration>) -> Result<Option<Guard<K>>> {
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
        self.acquire(None, None)
            .map(|g| g.expect("an unbounded wait only ends by acquiring"))
    }

    /// Blocks until acquired; holds for at most `lease`.
    ///
    /// # Errors
    /// As [`crate::Lock::lock_with_lease`].
    pub fn lock_with_lease(&self, lease: Duration) -> Result<Guard<K>> {
        self.acquire(Some(lease), None)
            .map(|g| g.expect("an unbounded wait only ends by acquiring"))
    }

    /// One attempt; `Ok(None)` when another owner holds it.
    ///
    /// # Errors
    /// As [`crate::Lock::try_lock`].
    pub fn try_lock(&self) -> Result<Option<Guard<K>>> {
        self.acquire(None, Some(Duration::ZERO))
    }

    /// Waits at most `wait`; watchdog mode.
    ///
    /// # Errors
    /// As [`crate::Lock::try_lock_for`].
    pub fn try_lock_for(&self, wait: Duration) -> Result<Option<Guard<K>>> {
        self.acquire(None, Some(wait))
    }

    /// Waits at most `wait`; holds for at most `lease`.
    ///
    /// # Errors
    /// As [`crate::Lock::try_lock_with_lease`].
    pub fn try_lock_with_lease(&self, wait: Duration, lease: Duration) -> Result<Option<Guard<K>>> {
        self.acquire(Some(lease), Some(wait))
    }

    /// Releases one hold of the calling thread.
    ///
    /// # Errors
    /// [`NotHeld`](Error::NotHeld) if it holds none.
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

impl Guard<Fenced> {
    /// The fencing token of this acquisition.
    pub fn token(&self) -> u64 {
        self.get().token()
    }
}

/// A blocking leader election (see [`crate::Election`]); every campaign is a fresh owner.
#[derive(Debug, Clone)]
pub struct Election {
    inner: crate::Election,
    rt: Arc<Rt>,
}

impl Election {
    /// Waits until this instance leads (as [`crate::Election::campaign`]).
    ///
    /// # Errors
    /// As [`crate::Election::campaign`].
    pub fn campaign(&self) -> Result<Leadership> {
        let inner = self.rt.block_on(self.inner.campaign())?;
        Ok(Leadership {
            inner: Some(inner),
            rt: self.rt.clone(),
        })
    }

    /// Campaigns for at most `wait` (as [`crate::Election::try_campaign_for`]).
    ///
    /// # Errors
    /// As [`crate::Election::try_campaign_for`].
    pub fn try_campaign_for(&self, wait: Duration) -> Result<Option<Leadership>> {
        let inner = self.rt.block_on(self.inner.try_campaign_for(wait))?;
        Ok(inner.map(|inner| Leadership {
            inner: Some(inner),
            rt: self.rt.clone(),
        }))
    }

    /// Who leads now (as [`crate::Election::leader`]).
    ///
    /// # Errors
    /// As [`crate::Election::leader`].
    pub fn leader(&self) -> Result<Option<crate::Leader>> {
        self.rt.block_on(self.inner.leader())
    }
}

/// A blocking leadership (see [`crate::Leadership`]); dropping it resigns in the background.
#[derive(Debug)]
#[must_use = "dropping the leadership resigns at once"]
pub struct Leadership {
    inner: Option<crate::Leadership>,
    rt: Arc<Rt>,
}

impl Leadership {
    fn get(&self) -> &crate::Leadership {
        self.inner
            .as_ref()
            .expect("leadership present until resigned")
    }

    /// The term (the fencing token).
    pub fn term(&self) -> u64 {
        self.get().term()
    }

    /// Where the hold of the election's lock stands.
    pub fn state(&self) -> crate::HoldState {
        self.get().state()
    }

    /// `true` only while the hold is `Held` (a leader in doubt does not lead).
    pub fn is_leading(&self) -> bool {
        self.get().is_leading()
    }

    /// An owned view of the hold (for [`HoldWatch::assert_locked`](crate::HoldWatch::assert_locked)).
    pub fn watch(&self) -> crate::HoldWatch {
        self.get().watch()
    }

    /// Publishes `value` beside the lock (as [`crate::Leadership::proclaim`]).
    ///
    /// # Errors
    /// As [`crate::Leadership::proclaim`].
    pub fn proclaim(&self, value: &str) -> Result<bool> {
        self.rt.block_on(self.get().proclaim(value))
    }

    /// Resigns (as [`crate::Leadership::resign`]).
    ///
    /// # Errors
    /// As [`crate::Leadership::resign`].
    pub fn resign(mut self) -> Result<()> {
        let l = self
            .inner
            .take()
            .expect("leadership present until resigned");
        self.rt.block_on(l.resign())
    }
}

/// A blocking permit-expirable semaphore (see [`crate::PermitExpirableSemaphore`]).
#[derive(Debug, Clone)]
pub struct PermitExpirableSemaphore {
    inner: crate::PermitExpirableSemaphore,
    rt: Arc<Rt>,
}

impl PermitExpirableSemaphore {
    /// The raw name in Redis.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// This handle with permits without a lease that never expire (as
    /// [`crate::PermitExpirableSemaphore::without_watchdog`]).
    pub fn without_watchdog(self) -> Self {
        Self {
            inner: self.inner.without_watchdog(),
            rt: self.rt,
        }
    }

    fn wrap(&self, guard: crate::PermitGuard) -> PermitGuard {
        PermitGuard {
            inner: Some(guard),
            rt: self.rt.clone(),
        }
    }

    /// As [`crate::PermitExpirableSemaphore::try_set_permits`].
    ///
    /// # Errors
    /// As the async form.
    pub fn try_set_permits(&self, permits: u64) -> Result<bool> {
        self.rt.block_on(self.inner.try_set_permits(permits))
    }

    /// As [`crate::PermitExpirableSemaphore::available_permits`].
    ///
    /// # Errors
    /// As the async form.
    pub fn available_permits(&self) -> Result<i64> {
        self.rt.block_on(self.inner.available_permits())
    }

    /// Acquires a permit, waiting without limit (as [`crate::PermitExpirableSemaphore::acquire`]:
    /// without a lease, renewed by the watchdog while the guard lives).
    ///
    /// # Errors
    /// As the async form.
    pub fn acquire(&self, lease: Option<Duration>) -> Result<PermitGuard> {
        let guard = self.rt.block_on(self.inner.acquire(lease))?;
        Ok(self.wrap(guard))
    }

    /// One attempt (as [`crate::PermitExpirableSemaphore::try_acquire`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn try_acquire(&self, lease: Option<Duration>) -> Result<Option<PermitGuard>> {
        let guard = self.rt.block_on(self.inner.try_acquire(lease))?;
        Ok(guard.map(|g| self.wrap(g)))
    }

    /// Waits at most `wait` (as [`crate::PermitExpirableSemaphore::try_acquire_for`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn try_acquire_for(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<PermitGuard>> {
        let guard = self.rt.block_on(self.inner.try_acquire_for(wait, lease))?;
        Ok(guard.map(|g| self.wrap(g)))
    }

    /// Releases the permit `id` (as [`crate::PermitExpirableSemaphore::release`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn release(&self, id: crate::PermitId) -> Result<()> {
        self.rt.block_on(self.inner.release(id))
    }

    /// As [`crate::PermitExpirableSemaphore::try_release`].
    ///
    /// # Errors
    /// As the async form.
    pub fn try_release(&self, id: crate::PermitId) -> Result<bool> {
        self.rt.block_on(self.inner.try_release(id))
    }
}

/// A blocking permit guard (see [`crate::PermitGuard`]); dropping it releases the permit in
/// the background.
#[derive(Debug)]
#[must_use = "dropping a PermitGuard releases its permit at once"]
pub struct PermitGuard {
    inner: Option<crate::PermitGuard>,
    rt: Arc<Rt>,
}

impl PermitGuard {
    fn get(&self) -> &crate::PermitGuard {
        self.inner.as_ref().expect("permit present until released")
    }

    fn take(&mut self) -> crate::PermitGuard {
        self.inner.take().expect("permit present until released")
    }

    /// The permit's id.
    pub fn id(&self) -> crate::PermitId {
        self.get().id()
    }

    /// `true` when the watchdog renews the permit.
    pub fn is_watchdog(&self) -> bool {
        self.get().is_watchdog()
    }

    /// Where the permit stands (as [`crate::PermitGuard::state`]).
    pub fn state(&self) -> crate::HoldState {
        self.get().state()
    }

    /// `true` unless the permit is `Held`.
    pub fn is_lost(&self) -> bool {
        self.get().is_lost()
    }

    /// Until when the permit is known to be held (as [`crate::PermitGuard::valid_until`]).
    pub fn valid_until(&self) -> tokio::time::Instant {
        self.get().valid_until()
    }

    /// An owned view of the permit's state ([`HoldWatch::assert_locked`](crate::HoldWatch::assert_locked)
    /// before a side effect; its `lock_name` is the semaphore's).
    pub fn watch(&self) -> crate::HoldWatch {
        crate::recipes::watch::HoldWatch::of_permit(self.get())
    }

    /// Releases the permit (as [`crate::PermitGuard::release`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn release(mut self) -> Result<bool> {
        let guard = self.take();
        self.rt.block_on(guard.release())
    }

    /// Leaves the permit acquired and returns its id (as [`crate::PermitGuard::keep`]).
    pub fn keep(mut self) -> crate::PermitId {
        self.take().keep()
    }
}
