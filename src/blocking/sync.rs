//! The blocking semaphore and count-down latch over the async ones (the same keys and
//! channels, Redisson `RSemaphore` / `RCountDownLatch`), and their factories. Neither has an
//! owner: permits are anonymous and a latch is counted down by anyone.

use std::{sync::Arc, time::Duration};

use super::client::{Client, Rt};
use crate::error::Result;

impl Client {
    /// The semaphore `name` (as [`crate::Client::get_semaphore`]). Makes no call.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
    /// let pool = client.get_semaphore("pool");
    /// pool.try_set_permits(3)?;
    /// let permit = pool.acquire(1)?; // blocks until a permit is free
    /// // ... use the resource ...
    /// permit.release()?; // or drop it
    /// # Ok(()) }
    /// ```
    pub fn get_semaphore(&self, name: &str) -> Semaphore {
        Semaphore {
            inner: self.inner.get_semaphore(name),
            rt: self.rt.clone(),
        }
    }

    /// The count-down latch `name` (as [`crate::Client::get_count_down_latch`]). Makes no
    /// call.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
    /// use std::time::Duration;
    /// let ready = client.get_count_down_latch("workers-ready");
    /// ready.try_set_count(2)?;
    /// // in each worker, when ready:
    /// ready.count_down()?;
    /// // in the coordinator:
    /// let opened = ready.wait_for(Duration::from_secs(10))?;
    /// # let _ = opened;
    /// # Ok(()) }
    /// ```
    pub fn get_count_down_latch(&self, name: &str) -> CountDownLatch {
        CountDownLatch {
            inner: self.inner.get_count_down_latch(name),
            rt: self.rt.clone(),
        }
    }
}

/// A blocking counting semaphore (see [`crate::Semaphore`]): the calling thread blocks on the
/// client's runtime. Permits are anonymous: any thread, process or Java service may release
/// what another took. Cheap to clone; `Send + Sync`.
///
/// ```no_run
/// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
/// use std::time::Duration;
/// let pool: redisson_lock::blocking::Semaphore = client.get_semaphore("pool");
/// if let Some(permit) = pool.try_acquire_for(1, Duration::from_secs(1))? {
///     // ... use the resource ...
///     drop(permit); // given back
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Semaphore {
    inner: crate::Semaphore,
    rt: Arc<Rt>,
}

/// Redisson's name for the blocking [`Semaphore`].
pub type RSemaphore = Semaphore;

/// Permits taken from a blocking [`Semaphore`] (see [`crate::SemaphorePermits`]): given back
/// when dropped (in the background, never blocking) or by [`release`](Self::release), kept by
/// [`forget`](Self::forget).
#[derive(Debug)]
#[must_use = "dropping the permits gives them back at once"]
pub struct SemaphorePermits {
    inner: Option<crate::SemaphorePermits>,
    rt: Arc<Rt>,
}

impl SemaphorePermits {
    /// How many permits this guard holds.
    pub fn permits(&self) -> u64 {
        self.inner
            .as_ref()
            .map_or(0, crate::SemaphorePermits::permits)
    }

    /// Gives the permits back now, blocking (as [`crate::SemaphorePermits::release`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn release(mut self) -> Result<()> {
        match self.inner.take() {
            Some(inner) => self.rt.block_on(inner.release()),
            None => Ok(()),
        }
    }

    /// Keeps the permits taken and returns how many (as [`crate::SemaphorePermits::forget`]).
    pub fn forget(mut self) -> u64 {
        self.inner.take().map_or(0, crate::SemaphorePermits::forget)
    }
}

impl Semaphore {
    /// The raw name in Redis (as [`crate::Semaphore::name`]).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Sets the permits if the semaphore does not exist yet (as
    /// [`crate::Semaphore::try_set_permits`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn try_set_permits(&self, permits: u64) -> Result<bool> {
        self.rt.block_on(self.inner.try_set_permits(permits))
    }

    /// As [`try_set_permits`](Self::try_set_permits), with a time to live for the key (as
    /// [`crate::Semaphore::try_set_permits_with_ttl`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn try_set_permits_with_ttl(&self, permits: u64, ttl: Duration) -> Result<bool> {
        self.rt
            .block_on(self.inner.try_set_permits_with_ttl(permits, ttl))
    }

    /// Takes `permits` permits, blocking without limit until a release makes them available
    /// (as [`crate::Semaphore::acquire`]); they go back when the guard is dropped or released.
    ///
    /// # Errors
    /// As the async form.
    pub fn acquire(&self, permits: u64) -> Result<SemaphorePermits> {
        let inner = self.rt.block_on(self.inner.acquire(permits))?;
        Ok(self.permits(inner))
    }

    /// One attempt to take `permits` permits (as [`crate::Semaphore::try_acquire`]): their
    /// guard when taken.
    ///
    /// # Errors
    /// As the async form.
    pub fn try_acquire(&self, permits: u64) -> Result<Option<SemaphorePermits>> {
        let inner = self.rt.block_on(self.inner.try_acquire(permits))?;
        Ok(inner.map(|p| self.permits(p)))
    }

    /// Takes `permits` permits, blocking at most `wait` (as
    /// [`crate::Semaphore::try_acquire_for`]): their guard when taken.
    ///
    /// # Errors
    /// As the async form.
    pub fn try_acquire_for(
        &self,
        permits: u64,
        wait: Duration,
    ) -> Result<Option<SemaphorePermits>> {
        let inner = self
            .rt
            .block_on(self.inner.try_acquire_for(permits, wait))?;
        Ok(inner.map(|p| self.permits(p)))
    }

    fn permits(&self, inner: crate::SemaphorePermits) -> SemaphorePermits {
        SemaphorePermits {
            inner: Some(inner),
            rt: self.rt.clone(),
        }
    }

    /// Gives back `permits` permits and wakes waiters of every client (as
    /// [`crate::Semaphore::release`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn release(&self, permits: u64) -> Result<()> {
        self.rt.block_on(self.inner.release(permits))
    }

    /// The available permits (as [`crate::Semaphore::available_permits`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn available_permits(&self) -> Result<i64> {
        self.rt.block_on(self.inner.available_permits())
    }

    /// Takes every available permit and returns how many (as
    /// [`crate::Semaphore::drain_permits`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn drain_permits(&self) -> Result<i64> {
        self.rt.block_on(self.inner.drain_permits())
    }

    /// Adds (or, when negative, removes) permits (as [`crate::Semaphore::add_permits`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn add_permits(&self, permits: i64) -> Result<()> {
        self.rt.block_on(self.inner.add_permits(permits))
    }

    /// Deletes the semaphore (as [`crate::Semaphore::delete`]): `true` when it existed.
    ///
    /// # Errors
    /// As the async form.
    pub fn delete(&self) -> Result<bool> {
        self.rt.block_on(self.inner.delete())
    }
}

/// A blocking count-down latch (see [`crate::CountDownLatch`]): the calling thread blocks on
/// the client's runtime. Cheap to clone; `Send + Sync`.
///
/// ```no_run
/// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
/// let done: redisson_lock::blocking::CountDownLatch = client.get_count_down_latch("done");
/// done.try_set_count(1)?;
/// let latch = done.clone();
/// std::thread::spawn(move || latch.count_down());
/// done.wait()?; // until the count is 0
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct CountDownLatch {
    inner: crate::CountDownLatch,
    rt: Arc<Rt>,
}

/// Redisson's name for the blocking [`CountDownLatch`].
pub type RCountDownLatch = CountDownLatch;

impl CountDownLatch {
    /// The raw name in Redis (as [`crate::CountDownLatch::name`]).
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Sets the count if the latch does not exist (as
    /// [`crate::CountDownLatch::try_set_count`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn try_set_count(&self, count: u64) -> Result<bool> {
        self.rt.block_on(self.inner.try_set_count(count))
    }

    /// Counts down by one; the step to zero opens every waiter of every client (as
    /// [`crate::CountDownLatch::count_down`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn count_down(&self) -> Result<()> {
        self.rt.block_on(self.inner.count_down())
    }

    /// The count: 0 when the latch is open (as [`crate::CountDownLatch::count`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn count(&self) -> Result<u64> {
        self.rt.block_on(self.inner.count())
    }

    /// Deletes the latch (as [`crate::CountDownLatch::delete`]): `true` when it existed.
    ///
    /// # Errors
    /// As the async form.
    pub fn delete(&self) -> Result<bool> {
        self.rt.block_on(self.inner.delete())
    }

    /// Blocks without limit until the count is 0 (as [`crate::CountDownLatch::wait`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn wait(&self) -> Result<()> {
        self.rt.block_on(self.inner.wait())
    }

    /// Blocks at most `timeout` until the count is 0 (as
    /// [`crate::CountDownLatch::wait_for`]): `true` when it is 0.
    ///
    /// # Errors
    /// As the async form.
    pub fn wait_for(&self, timeout: Duration) -> Result<bool> {
        self.rt.block_on(self.inner.wait_for(timeout))
    }
}
