//! Permits taken from a semaphore, as a guard ([`SemaphorePermits`]): given back on drop or by
//! an explicit release, like tokio's `SemaphorePermit`; forgotten, they stay taken for a
//! release by count (the Java style).

use super::handle::Semaphore;
use crate::error::Result;

/// Permits taken from a [`Semaphore`]. Dropped, they are given back in the background (drop
/// never blocks and never panics; a failure is logged); [`release`](Self::release) gives them
/// back and reports the outcome. [`forget`](Self::forget) keeps them taken, for code that
/// releases by count later (`Semaphore::release(n)`, from any client or a Java service: the
/// permits are anonymous).
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// let pool = client.get_semaphore("pool");
/// pool.try_set_permits(3).await?;
/// let permit = pool.acquire(1).await?;
/// // ... use the resource ...
/// drop(permit); // back in the background; or `permit.release().await?`
/// # Ok(()) }
/// ```
#[must_use = "dropping the permits gives them back at once"]
pub struct SemaphorePermits {
    semaphore: Semaphore,
    /// Still to give back (0 once released or forgotten).
    permits: u64,
}

impl std::fmt::Debug for SemaphorePermits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SemaphorePermits")
            .field("semaphore", &self.semaphore.name)
            .field("permits", &self.permits)
            .finish()
    }
}

impl SemaphorePermits {
    pub(super) fn new(semaphore: Semaphore, permits: u64) -> Self {
        Self { semaphore, permits }
    }

    /// How many permits this guard holds.
    pub fn permits(&self) -> u64 {
        self.permits
    }

    /// The semaphore they were taken from.
    pub fn semaphore(&self) -> &Semaphore {
        &self.semaphore
    }

    /// Gives the permits back now (as [`Semaphore::release`]).
    ///
    /// # Errors
    /// As [`Semaphore::release`]; the permits are not given back again after an error.
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have given the permits back.
    pub async fn release(mut self) -> Result<()> {
        let permits = std::mem::take(&mut self.permits);
        self.semaphore.release(permits).await
    }

    /// Keeps the permits taken (the guard no longer gives them back) and returns how many:
    /// the Java style, where a later `Semaphore::release(n)` gives them back.
    pub fn forget(mut self) -> u64 {
        std::mem::take(&mut self.permits)
    }
}

impl Drop for SemaphorePermits {
    fn drop(&mut self) {
        let permits = std::mem::take(&mut self.permits);
        if permits > 0 {
            self.semaphore
                .give_back_in_background(permits, "dropped permits");
        }
    }
}
