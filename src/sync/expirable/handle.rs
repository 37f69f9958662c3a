//! The semaphore's handle: its names, its factory, the calls on the permits that are not an
//! acquisition (set, add, available, release by id, delete) and the release in the background
//! that a dropped guard or an orphaned acquisition hands a permit to.

use super::calls::Calls;
use crate::{
    client::Client,
    conn::core::{flag, integer},
    error::{Error, Result},
    sync::synced::run_synced,
    types::{clock::epoch_ms, names, permit::PermitId},
};

/// How long after it was sent a copy of a call may still run, as far as this client knows: the
/// unlock receipt's life (a call's timeout and retries), and at least the watchdog timeout.
pub(crate) fn late_horizon(config: &crate::config::Config) -> std::time::Duration {
    std::time::Duration::from_millis(config.receipt_px_ms()).max(config.lock_watchdog_timeout)
}

/// The object kind in logs and metrics.
pub(super) const OBJECT: &str = "permit_semaphore";

/// A distributed semaphore whose permits have ids and, optionally, a lease, wire-compatible
/// with Redisson's `RPermitExpirableSemaphore`.
///
/// Each acquired permit has a [`PermitId`] (16 random bytes, shown as 32 hexadecimal
/// characters, as Java shows them): any client may release it by that id, so a Java service
/// can release a permit a Rust service acquired and the other way round. A permit acquired
/// with a lease expires at the acquirer's clock time + lease; the next call that looks
/// (an acquisition, [`available_permits`](Self::available_permits)) gives it back and
/// announces it, which wakes waiters. A waiter told when the earliest permit expires sleeps at
/// most until then, so an expired permit is taken over without anyone releasing it.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// use std::time::Duration;
/// let semaphore = client.get_permit_expirable_semaphore("licences");
/// semaphore.try_set_permits(2).await?;
/// let permit = semaphore.acquire(Some(Duration::from_secs(60))).await?;
/// println!("holding permit {}", permit.id());
/// permit.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct PermitExpirableSemaphore {
    pub(super) client: Client,
    pub(super) name: String,
    pub(super) timeouts: String,
    pub(super) channel: String,
    /// Permits acquired without a lease are renewed by the watchdog (`false`: they never
    /// expire, Java's `acquire()` without lease).
    pub(super) watchdog: bool,
}

/// Redisson's name for [`PermitExpirableSemaphore`].
pub type RPermitExpirableSemaphore = PermitExpirableSemaphore;

impl std::fmt::Debug for PermitExpirableSemaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PermitExpirableSemaphore")
            .field("name", &self.name)
            .finish()
    }
}

impl Client {
    /// The permit-expirable semaphore `name` (Redisson `getPermitExpirableSemaphore`); the name
    /// goes through the configured [`NameMapper`](crate::NameMapper). Makes no call.
    pub fn get_permit_expirable_semaphore(&self, name: &str) -> PermitExpirableSemaphore {
        let name = self.map_name(name);
        PermitExpirableSemaphore {
            client: self.clone(),
            timeouts: names::permit_timeouts(&name),
            channel: names::semaphore_channel(&name),
            name,
            watchdog: true,
        }
    }
}

impl PermitExpirableSemaphore {
    /// The raw name in Redis (after the name mapper): the key holding the available permits.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// This handle, with permits acquired without a lease that never expire (the no-lease
    /// score, Java's `acquire()` without lease) instead of being renewed by the watchdog: such
    /// a permit outlives a crashed holder until some client releases it by its id. Makes no
    /// call.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let semaphore = client.get_permit_expirable_semaphore("licences").without_watchdog();
    /// let id = semaphore.acquire(None).await?.keep(); // held until released by its id
    /// semaphore.release(id).await?;
    /// # Ok(()) }
    /// ```
    pub fn without_watchdog(mut self) -> Self {
        self.watchdog = false;
        self
    }

    /// `true` when permits this handle acquires without a lease are renewed by the watchdog
    /// (the default; see [`without_watchdog`](Self::without_watchdog)).
    pub fn is_watchdog(&self) -> bool {
        self.watchdog
    }

    pub(super) fn calls(&self) -> Calls<'_> {
        Calls {
            name: &self.name,
            timeouts: &self.timeouts,
            channel: &self.channel,
            publish: self.client.core().messaging().publish_command(),
        }
    }

    /// The sorted set of acquired permits: `{N}:timeout`.
    pub fn timeouts_key(&self) -> &str {
        &self.timeouts
    }

    /// Sets the permits if the semaphore does not exist yet (Redisson `trySetPermits`) and
    /// announces them. `true` when set, `false` when it existed (nothing changed).
    ///
    /// # Errors
    /// Redis and connection errors; [`Error::NotReplicated`] when replica sync is on and no
    /// replica acknowledged (the master has the permits).
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have set the permits.
    pub async fn try_set_permits(&self, permits: u64) -> Result<bool> {
        let call = self.calls().set(permits);
        let reply = run_synced(&self.client, call, &self.name, (OBJECT, "set")).await?;
        flag(&reply, &self.name)
    }

    /// Adds `permits` (or removes, when negative) to the available permits (Redisson
    /// `addPermits`); an addition is announced (the amount added).
    ///
    /// # Errors
    /// As [`try_set_permits`](Self::try_set_permits). Never run twice: a lost reply is not
    /// retried.
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have added the permits.
    pub async fn add_permits(&self, permits: i64) -> Result<()> {
        let call = self.calls().add(permits);
        run_synced(&self.client, call, &self.name, (OBJECT, "add")).await?;
        Ok(())
    }

    /// The available permits (Redisson `availablePermits`), after giving back (and
    /// announcing) every expired permit.
    ///
    /// # Errors
    /// Redis and connection errors.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped after the call was sent, expired permits may have been given back
    /// (as any caller's next look would).
    pub async fn available_permits(&self) -> Result<i64> {
        let call = self.calls().available(epoch_ms());
        let reply = self.client.core().run(call, &self.name).await?;
        integer(&reply, &self.name)
    }

    /// PS-REL without the replica sync: `true` when a live permit was given back.
    pub(super) async fn release_once(&self, id: PermitId) -> Result<bool> {
        let reply = self
            .client
            .core()
            .run(self.calls().release(id, epoch_ms()), &self.name)
            .await?;
        flag(&reply, &self.name)
    }

    /// Releases `id` on the client's runtime, retrying transient failures (at most
    /// `retry_attempts` times, `retry_delay` apart). Releasing an id twice is harmless: the
    /// second finds nothing.
    pub(crate) fn release_in_background(&self, id: PermitId) {
        let this = self.clone();
        self.client.release_in_background(
            format!(
                "permit {id} of {} (it stays until its lease ends)",
                self.name
            ),
            move || async move {
                let config = this.client.config();
                let mut tries = 0;
                loop {
                    match this.release_once(id).await {
                        Err(e)
                            if e.is_transient()
                                && tries < config.retry_attempts
                                && !this.client.is_stopped() =>
                        {
                            tries += 1;
                            tokio::time::sleep(config.retry_delay).await;
                        }
                        outcome => return outcome.map(drop),
                    }
                }
            },
        );
    }

    /// The permit `id` may have been taken by an acquisition sent at `sent_at` whose reply was
    /// lost: it is released by its id in the background, and looked for again until no copy of
    /// that acquisition can still run (one sent late, re-sent after a reconnect, or run after
    /// a command that timed out on a connection that stayed open): at `sent_at` + `d`, `2d`,
    /// `4d`... (`d` the retry delay) up to the horizon ([`late_horizon`]), with a last look at
    /// the horizon. A release that finds the permit gives it back; one that finds nothing
    /// changes nothing, so looking again is harmless.
    pub(crate) fn release_taken_late(&self, id: PermitId, sent_at: tokio::time::Instant) {
        let this = self.clone();
        drop(self.client.spawn(async move {
            let config = this.client.config();
            let horizon = sent_at + late_horizon(config);
            let mut pause = config.retry_delay.max(std::time::Duration::from_millis(10));
            loop {
                match this.try_release(id).await {
                    Ok(true) => crate::observe::late_acquisition(&this.name, &id.to_string()),
                    Ok(false) => {}
                    Err(e) => log::debug!("looking for permit {id} of {} failed: {e:#}", this.name),
                }
                let now = tokio::time::Instant::now();
                if now >= horizon || this.client.is_closed() {
                    return;
                }
                tokio::time::sleep_until((now + pause).min(horizon)).await;
                pause = pause.saturating_mul(2);
            }
        }));
    }

    /// Releases the permit `id`, which any client may have acquired (Redisson
    /// `tryRelease(permitId)`): `true` when a live permit was given back; `false` when the id
    /// is unknown, released already, or expired (an expired permit still in the set is given
    /// back too). A give-back is announced.
    ///
    /// # Errors
    /// Redis and connection errors; [`Error::NotReplicated`] when replica sync is on and no
    /// replica acknowledged (the master has the release).
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have released the permit;
    /// calling again is harmless.
    pub async fn try_release(&self, id: PermitId) -> Result<bool> {
        let reply = run_synced(
            &self.client,
            self.calls().release(id, epoch_ms()),
            &self.name,
            (OBJECT, "release"),
        )
        .await?;
        flag(&reply, &self.name)
    }

    /// Releases the permit `id` (Redisson `release(permitId)`).
    ///
    /// # Errors
    /// [`Error::NotHeld`] (with the id as `owner`) where [`try_release`](Self::try_release)
    /// gives `false` (Redisson throws `IllegalArgumentException`); otherwise as
    /// [`try_release`](Self::try_release).
    ///
    /// # Cancel safety
    /// As [`try_release`](Self::try_release).
    pub async fn release(&self, id: PermitId) -> Result<()> {
        if self.try_release(id).await? {
            Ok(())
        } else {
            Err(Error::NotHeld {
                lock: self.name.clone(),
                owner: id.to_string(),
            })
        }
    }

    /// Deletes the semaphore's keys (`N` and `{N}:timeout`): `true` when either existed.
    /// Announces nothing, as Redisson does.
    ///
    /// # Errors
    /// Redis and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have deleted them.
    pub async fn delete(&self) -> Result<bool> {
        let n = self
            .client
            .core()
            .delete(&[&self.name, &self.timeouts], &self.name)
            .await?;
        Ok(n > 0)
    }
}
