//! The blocking permit-expirable semaphore and its `PermitGuard`.

use std::{sync::Arc, time::Duration};

use super::client::{Client, Rt};
use crate::error::Result;

impl Client {
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
}

/// A blocking permit-expirable semaphore (see [`crate::PermitExpirableSemaphore`]).
#[derive(Debug, Clone)]
pub struct PermitExpirableSemaphore {
    inner: crate::PermitExpirableSemaphore,
    rt: Arc<Rt>,
}

/// Redisson's name for the blocking [`PermitExpirableSemaphore`].
pub type RPermitExpirableSemaphore = PermitExpirableSemaphore;

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

    /// `true` when permits this handle acquires without a lease are renewed by the watchdog
    /// (as [`crate::PermitExpirableSemaphore::is_watchdog`]).
    pub fn is_watchdog(&self) -> bool {
        self.inner.is_watchdog()
    }

    /// The sorted set of acquired permits: `{N}:timeout` (as
    /// [`crate::PermitExpirableSemaphore::timeouts_key`]).
    pub fn timeouts_key(&self) -> &str {
        self.inner.timeouts_key()
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

    /// Adds (or, when negative, removes) permits (as
    /// [`crate::PermitExpirableSemaphore::add_permits`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn add_permits(&self, permits: i64) -> Result<()> {
        self.rt.block_on(self.inner.add_permits(permits))
    }

    /// Deletes the semaphore's keys (as [`crate::PermitExpirableSemaphore::delete`]).
    ///
    /// # Errors
    /// As the async form.
    pub fn delete(&self) -> Result<bool> {
        self.rt.block_on(self.inner.delete())
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

    /// An owned view of the permit's state (as [`crate::PermitGuard::watch`]:
    /// [`HoldWatch::assert_locked`](crate::HoldWatch::assert_locked) before a side effect; its
    /// `lock_name` is the semaphore's).
    pub fn watch(&self) -> crate::HoldWatch {
        self.get().watch()
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
