//! Running code under a lock: [`Lock::run`] and its variants, the one place the
//! `#[locked]` attribute expands to.
//!
//! Every variant is [`run_locked`]: acquire (with the variant's wait and lease), build the body's
//! future, poll it while watching the guard's loss signal, release. The loss signal is polled
//! first, so once the lock is known lost the body is not polled again: it is dropped and the
//! call returns [`Error::LockLost`].

use std::{future::Future, time::Duration};

use super::{front::Lock, protocol::Kind};
use crate::error::Error;

impl<K: Kind> Lock<K> {
    /// Runs `body` while holding the lock: waits for it without limit, holds it in watchdog
    /// mode (renewed until the body ends, at most
    /// [`max_renewals`](crate::Config::max_renewals) times), then releases it. The closure is
    /// called only once the lock is held. This is what `#[locked]` without `wait` and `lease`
    /// expands to.
    ///
    /// If the lock is lost while the body runs (renewal found it gone, it was force-unlocked,
    /// or it could not be renewed before its deadline) or is in doubt (the connection to its
    /// node dropped or timed out: see [`Guard::state`](crate::Guard::state)), the body's
    /// future is dropped at once — it is not polled again — and the call returns
    /// [`Error::LockLost`] through `E::from`.
    /// When the body ends first, its result is returned whatever it is; the lock is released
    /// before the call returns (a failed release is logged, not returned: the body's work is
    /// done, and the hold ends at the latest when its TTL runs out).
    ///
    /// The returned future holds its own reference to the handle: it is `'static` when the
    /// closure and its future are, so it can be spawned.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> Result<(), redisson_lock::Error> {
    /// let lock = client.get_lock("orders:42");
    /// let total = lock
    ///     .run(|| async {
    ///         // the critical section: no other owner holds "orders:42" while this runs
    ///         Ok::<_, redisson_lock::Error>(40 + 2)
    ///     })
    ///     .await?;
    /// assert_eq!(total, 42);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// The acquisition's errors (as [`lock`](Self::lock)), [`Error::LockLost`] as above, both
    /// converted with `E::from`; else whatever the body returns.
    ///
    /// # Cancel safety
    /// Dropping the future while it waits leaves nothing behind (as [`lock`](Self::lock)).
    /// Dropping it while the body runs drops the body's future and the guard, which releases
    /// the lock in the background.
    pub fn run<F, Fut, T, E>(&self, body: F) -> impl Future<Output = Result<T, E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<Error>,
    {
        run_locked(self.clone(), None, None, body)
    }

    /// Runs `body` while holding the lock with a fixed lease: waits without limit, holds the
    /// lock for at most `lease` (no watchdog). If the body is still running when the lease
    /// runs out (less the clock-drift margin), it is dropped and the call returns
    /// [`Error::LockLost`]. What `#[locked(lease = "..")]` expands to.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> Result<(), redisson_lock::Error> {
    /// use std::time::Duration;
    /// let lock = client.get_fair_lock("nightly-report");
    /// lock.run_with_lease(Duration::from_secs(30), || async {
    ///     // must finish within 30 s, or it is cancelled and LockLost is returned
    ///     Ok::<_, redisson_lock::Error>(())
    /// })
    /// .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`run`](Self::run); a zero or overflowing lease is
    /// [`InvalidArgument`](Error::InvalidArgument) (the body does not run).
    ///
    /// # Cancel safety
    /// As [`run`](Self::run).
    pub fn run_with_lease<F, Fut, T, E>(
        &self,
        lease: Duration,
        body: F,
    ) -> impl Future<Output = Result<T, E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<Error>,
    {
        run_locked(self.clone(), None, Some(lease), body)
    }

    /// Runs `body` under the lock if it can be acquired within `wait` (zero: one attempt),
    /// in watchdog mode; else returns [`Error::NotAcquired`] without running it. What
    /// `#[locked(wait = "..")]` expands to.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> Result<(), redisson_lock::Error> {
    /// use std::time::Duration;
    /// use redisson_lock::Error;
    /// let lock = client.get_lock("invoice:7");
    /// match lock.try_run_for(Duration::from_secs(2), || async { Ok::<_, Error>(()) }).await {
    ///     Ok(()) => {}
    ///     Err(Error::NotAcquired { .. }) => eprintln!("busy, try later"),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::NotAcquired`] when the wait ran out; otherwise as [`run`](Self::run).
    ///
    /// # Cancel safety
    /// As [`run`](Self::run).
    pub fn try_run_for<F, Fut, T, E>(
        &self,
        wait: Duration,
        body: F,
    ) -> impl Future<Output = Result<T, E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<Error>,
    {
        run_locked(self.clone(), Some(wait), None, body)
    }

    /// Runs `body` under the lock if it can be acquired within `wait`, holding it for at most
    /// `lease` (no watchdog); else returns [`Error::NotAcquired`] without running it. What
    /// `#[locked(wait = "..", lease = "..")]` expands to.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> Result<(), redisson_lock::Error> {
    /// use std::time::Duration;
    /// let lock = client.get_spin_lock("import");
    /// let rows = lock
    ///     .try_run_with_lease(Duration::from_secs(1), Duration::from_secs(10), || async {
    ///         Ok::<u32, redisson_lock::Error>(3)
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`try_run_for`](Self::try_run_for) and [`run_with_lease`](Self::run_with_lease).
    ///
    /// # Cancel safety
    /// As [`run`](Self::run).
    pub fn try_run_with_lease<F, Fut, T, E>(
        &self,
        wait: Duration,
        lease: Duration,
        body: F,
    ) -> impl Future<Output = Result<T, E>>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<Error>,
    {
        run_locked(self.clone(), Some(wait), Some(lease), body)
    }
}

/// The one implementation. `wait`: `None` waits without limit; `lease`: `None` is watchdog
/// mode.
async fn run_locked<K, F, Fut, T, E>(
    lock: Lock<K>,
    wait: Option<Duration>,
    lease: Option<Duration>,
    body: F,
) -> Result<T, E>
where
    K: Kind,
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<T, E>>,
    E: From<Error>,
{
    let acquired = match (wait, lease) {
        (None, None) => lock.lock().await.map(Some),
        (None, Some(lease)) => lock.lock_with_lease(lease).await.map(Some),
        (Some(wait), None) => lock.try_lock_for(wait).await,
        (Some(wait), Some(lease)) => lock.try_lock_with_lease(wait, lease).await,
    };
    let Some(guard) = acquired? else {
        return Err(E::from(Error::NotAcquired {
            lock: lock.raw_name().to_owned(),
            wait: wait.unwrap_or(Duration::MAX),
        }));
    };
    let body = body();
    let outcome = {
        let lost = guard.lost();
        tokio::pin!(lost, body);
        tokio::select! {
            biased;
            () = &mut lost => None,
            result = &mut body => Some(result),
        }
        // The body's future is dropped here, before the guard is touched.
    };
    match outcome {
        Some(result) => {
            let name = guard.name().to_owned();
            if let Err(e) = guard.unlock().await {
                log::warn!("release of {name} after the locked code ended failed: {e:#}");
            }
            result
        }
        None => {
            let lock = guard.name().to_owned();
            drop(guard);
            Err(E::from(Error::LockLost { lock }))
        }
    }
}
