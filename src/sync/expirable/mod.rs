//! The permit-expirable semaphore (Redisson `RPermitExpirableSemaphore`, sync protocol §3; its
//! calls and replies in `calls`):
//! the available permits in `N`, every acquired permit in the sorted set `{N}:timeout` under
//! its 16-byte id with its expiry as the score; expired permits go back to the pool inside the
//! scripts that look (there is no timer).

use std::time::Duration;

use tokio::time::Instant;

mod calls;
mod watch;

use calls::{decode_acquire, is_ok, Calls, Reply};
use watch::{Life, Names, PermitWatch};

use super::call::{flag, integer, run_synced, run_taking};
use crate::{
    client::Client,
    error::{Error, Result},
    lock::acquire::{
        engine,
        waiter::{detach, Orphan, SleepOn, Step, Wait, Waiter, Won},
    },
    service::{pubsub::Reading, watchdog::HoldState},
    types::{clock::epoch_ms, names, permit::PermitId},
};

/// The object kind in logs and metrics.
const OBJECT: &str = "permit_semaphore";

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
    client: Client,
    name: String,
    timeouts: String,
    channel: String,
    /// Permits acquired without a lease are renewed by the watchdog (`false`: they never
    /// expire, Java's `acquire()` without lease).
    watchdog: bool,
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

    fn names(&self) -> Names<'_> {
        Names {
            name: &self.name,
            timeouts: &self.timeouts,
            channel: &self.channel,
            publish: self.client.core().messaging().publish_command(),
        }
    }

    fn calls(&self) -> Calls<'_> {
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

    /// Acquires a permit, waiting without limit (Redisson `acquire(leaseTime)`). With a
    /// `lease`, the permit expires that long after the attempt that took it. Without, the
    /// client's watchdog keeps it alive: it is taken with a lease of
    /// [`lock_watchdog_timeout`](crate::Config::lock_watchdog_timeout) and renewed every third
    /// of it (PS-LEASE, Java's `updateLeaseTime`, batched with the lock renewals) for as long
    /// as its guard lives, so a crashed holder's permit comes back one timeout later; a handle
    /// made [`without_watchdog`](Self::without_watchdog) takes it for ever instead (Java's
    /// `acquire()`).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// use redisson_lock::HoldState;
    /// let semaphore = client.get_permit_expirable_semaphore("exports");
    /// semaphore.try_set_permits(3).await?;
    /// let permit = semaphore.acquire(None).await?; // renewed while `permit` lives
    /// tokio::select! {
    ///     _ = permit.lost() => { /* in doubt or lost: stop touching the resource */ }
    ///     _ = async { /* the export */ } => {}
    /// }
    /// assert_ne!(permit.state(), HoldState::Lost);
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero lease (nothing sent); Redis and connection
    /// errors; [`Error::Ambiguous`] when an attempt's reply was lost (the permit it may have
    /// taken is released in the background, by its id); [`Error::NotReplicated`] once the
    /// retries of an acquisition no replica acknowledged are used up (each was released).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped while waiting it leaves the channel; dropped while an attempt is in
    /// flight, the attempt finishes in the background and releases what it took.
    pub async fn acquire(&self, lease: Option<Duration>) -> Result<PermitGuard> {
        match self.acquire_until(Wait::Until(None), lease).await? {
            Some(guard) => Ok(guard),
            None => Err(Error::Timeout("acquire without limit ended".into())),
        }
    }

    /// One attempt to acquire a permit (Redisson `tryAcquire(-1, leaseTime)`): `None` when
    /// none is available.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire(&self, lease: Option<Duration>) -> Result<Option<PermitGuard>> {
        self.acquire_until(Wait::Once, lease).await
    }

    /// Acquires a permit, waiting at most `wait` (Redisson `tryAcquire(waitTime, leaseTime)`):
    /// `None` when `wait` passed first. A zero `wait` is one attempt.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire_for(
        &self,
        wait: Duration,
        lease: Option<Duration>,
    ) -> Result<Option<PermitGuard>> {
        self.acquire_until(Wait::for_duration(wait), lease).await
    }

    async fn acquire_until(
        &self,
        wait: Wait,
        lease: Option<Duration>,
    ) -> Result<Option<PermitGuard>> {
        let life = match lease {
            Some(l) => Life::Leased(l),
            None if self.watchdog => Life::Watchdog,
            None => Life::Forever,
        };
        let lease_ms = match lease {
            None if self.watchdog => Some(self.client.watchdog_ms().max(1)),
            None => None,
            Some(l) => match crate::types::millis::clamp_millis(l) {
                0 => {
                    return Err(Error::InvalidArgument(
                        "a permit's lease is at least 1 ms (None: no lease)".into(),
                    ))
                }
                ms => Some(ms),
            },
        };
        let watched =
            crate::observe::Acquisition::start(OBJECT, &self.name, "", wait.remaining(), lease);
        let take = TakePermit {
            semaphore: self,
            lease_ms,
        };
        let outcome = watched.run(engine::acquire(&take, wait)).await;
        watched.finish(&outcome);
        Ok(outcome?.map(|won| {
            let taken = won.take();
            let watch = PermitWatch::start(
                &self.client,
                self.names(),
                taken.id,
                life,
                taken.sent_at,
                taken.now,
            );
            PermitGuard::new(self.clone(), taken.id, watch)
        }))
    }

    /// PS-REL without the replica sync: `true` when a live permit was given back.
    async fn release_once(&self, id: PermitId) -> Result<bool> {
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
        drop(self.client.spawn(async move {
            let config = this.client.config();
            let mut tries = 0;
            loop {
                match this.release_once(id).await {
                    Err(e) if e.is_transient() && tries < config.retry_attempts && !this.client.is_closed() => {
                        tries += 1;
                        tokio::time::sleep(config.retry_delay).await;
                    }
                    Err(e) => {
                        log::warn!("could not release permit {id} of {}: {e}; it stays until its lease ends", this.name);
                        return;
                    }
                    Ok(_) => return,
                }
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

/// One taking of a permit: the engine's waiter for [`PermitExpirableSemaphore::acquire`] and
/// its variants.
struct TakePermit<'a> {
    semaphore: &'a PermitExpirableSemaphore,
    lease_ms: Option<u64>,
}

/// A permit taken, on its way to the caller's [`PermitGuard`].
struct Taken {
    semaphore: PermitExpirableSemaphore,
    id: PermitId,
    /// When the call that took it was sent (monotonic), and the epoch time (ms) it carried.
    sent_at: Instant,
    now: i64,
}

/// A permit taken for a caller that went away is released by its id.
impl Orphan for Taken {
    fn orphaned(self) {
        crate::observe::late_acquisition(&self.semaphore.name, &self.id.to_string());
        self.semaphore.release_in_background(self.id);
    }
}

impl Waiter for TakePermit<'_> {
    type Won = Taken;
    /// Redisson retries an unreplicated PS-ACQ, a single try's too.
    const RETRIES_UNREPLICATED_ONCE: bool = true;

    fn client(&self) -> &Client {
        &self.semaphore.client
    }

    fn name(&self) -> &str {
        &self.semaphore.name
    }

    /// One PS-ACQ, never cut short ([`detach`]): a permit taken but acknowledged by no replica
    /// is released ([`Error::NotReplicated`]); one whose reply was lost is released in the
    /// background ([`Error::Ambiguous`]). A busy attempt's sleep is the sooner of the earliest
    /// permit's expiry and the watchdog timeout (see [`sleep_bound`]).
    async fn attempt(&self, wait: Wait) -> Result<Step<Won<Taken>>> {
        let (this, lease_ms) = (self.semaphore.clone(), self.lease_ms);
        let deadline = wait.deadline();
        let bound = this.client.config().lock_watchdog_timeout;
        detach(self.client().runtime(), || (), move |_| async move {
            let id = PermitId::random();
            let now = epoch_ms();
            let call = this.calls().acquire(id, lease_ms, now);
            let undo = || async {
                if let Err(e) = this.release_once(id).await {
                    log::debug!("releasing an unreplicated permit of {} failed ({e}); retrying in the background", this.name);
                    this.release_in_background(id);
                }
            };
            let what = id.to_string();
            let sent_at = Instant::now();
            let outcome = run_taking(&this.client, call, (&this.name, &what), deadline, is_ok, undo).await;
            match outcome {
                Err(f) if f.sent && f.error.is_transient() => {
                    this.release_in_background(id);
                    Err(f.error.into_ambiguous(&this.name))
                }
                Err(f) => Err(f.error),
                Ok(Err(e)) => Err(e),
                Ok(Ok(value)) => Ok(match decode_acquire(&value, id, now, &this.name)? {
                    Reply::Taken(id) => Step::Done(Won::new(Taken {
                        semaphore: this,
                        id,
                        sent_at,
                        now,
                    })),
                    Reply::Busy(expires_in) => Step::Busy {
                        frees_in: Some(sleep_bound(expires_in, bound)),
                    },
                }),
            }
        })
        .await
    }

    /// A lost attempt's permit is released by its id: waiting on is safe.
    fn repeatable(&self) -> bool {
        true
    }

    fn sleep_on(&self) -> SleepOn {
        SleepOn::Channel {
            channel: self.semaphore.channel.clone(),
            reading: Reading::Permits,
        }
    }
}

/// A busy waiter's sleep: until the earliest permit's expiry (possibly hours away) or, when
/// none will expire, `bound` (the watchdog timeout), whichever is sooner, so a lost message
/// costs at most `bound` (module docs of `sync`).
fn sleep_bound(expires_in: Option<Duration>, bound: Duration) -> Duration {
    expires_in.map_or(bound, |e| e.min(bound))
}

/// One acquired permit of a [`PermitExpirableSemaphore`]. Dropping it releases the permit in
/// the background (drop never blocks); [`release`](Self::release) releases it and says how,
/// [`keep`](Self::keep) leaves it acquired (for another process to release by its id, or to
/// expire with its lease).
///
/// Like a lock guard it knows where its permit stands ([`state`](Self::state),
/// [`lost`](Self::lost)): a watchdog permit whose renewal finds its id gone from
/// `{N}:timeout` (released by its id elsewhere, reclaimed after a missed deadline, the keys
/// deleted) is [`Lost`](HoldState::Lost), and any permit is
/// [`InDoubt`](HoldState::InDoubt) from a connection event until it is confirmed.
#[must_use = "dropping a PermitGuard releases its permit at once"]
pub struct PermitGuard {
    semaphore: PermitExpirableSemaphore,
    id: PermitId,
    watch: PermitWatch,
    armed: bool,
    #[cfg(feature = "metrics")]
    since: Instant,
}

impl std::fmt::Debug for PermitGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PermitGuard")
            .field("semaphore", &self.semaphore.name)
            .field("id", &self.id)
            .finish()
    }
}

impl PermitGuard {
    fn new(semaphore: PermitExpirableSemaphore, id: PermitId, watch: PermitWatch) -> Self {
        crate::observe::guard_opened(OBJECT);
        Self {
            semaphore,
            id,
            watch,
            armed: true,
            #[cfg(feature = "metrics")]
            since: Instant::now(),
        }
    }

    /// The permit's id (what a Java service's `release(permitId)` takes, as 32 hex
    /// characters).
    pub fn id(&self) -> PermitId {
        self.id
    }

    /// The semaphore the permit belongs to.
    pub fn semaphore(&self) -> &PermitExpirableSemaphore {
        &self.semaphore
    }

    /// `true` when the watchdog renews the permit (acquired without a lease by a handle with
    /// the watchdog on).
    pub fn is_watchdog(&self) -> bool {
        self.watch.life() == Life::Watchdog
    }

    /// Where the permit stands: [`Held`](HoldState::Held);
    /// [`InDoubt`](HoldState::InDoubt) from the moment the connection to its node drops (or a
    /// command to it times out) until a renewal (watchdog) or a look at its lease (leased) on
    /// the new connection confirms it; or [`Lost`](HoldState::Lost) for good: its id was found
    /// gone from the timeout set, or its deadline passed unrenewed (a leased permit's lease
    /// ended). A permit without a lease and without watchdog is held until its guard goes.
    ///
    /// Deadlines are the acquirer's clock times on the wire (Redisson's rule): a client whose
    /// clock runs ahead by more than the lease's drift may reclaim the permit earlier.
    pub fn state(&self) -> HoldState {
        self.watch.state()
    }

    /// `true` unless the permit is [`Held`](HoldState::Held).
    pub fn is_lost(&self) -> bool {
        self.state() != HoldState::Held
    }

    /// The instant (monotonic clock) until which the permit is known to be held, unless lost
    /// earlier; the watchdog moves it forward at every renewal.
    pub fn valid_until(&self) -> Instant {
        self.watch.valid_until()
    }

    /// Resolves when the permit is lost or in doubt (when [`is_lost`](Self::is_lost) turns
    /// `true`). Use it with `select!` to stop work that must not go on without the permit.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future has no effect on the permit.
    pub async fn lost(&self) {
        self.watch.not_held().await
    }

    /// The permit's loss signal, for code that watches it without owning the guard.
    pub(crate) fn loss_signal(&self) -> std::sync::Arc<crate::service::watchdog::LossSignal> {
        self.watch.loss_signal()
    }

    fn close(&mut self) {
        self.armed = false;
        self.watch.end(&self.semaphore.client);
        #[cfg(feature = "metrics")]
        crate::observe::guard_closed(OBJECT, self.since.elapsed());
        #[cfg(not(feature = "metrics"))]
        crate::observe::guard_closed(OBJECT, Duration::ZERO);
    }

    /// Releases the permit: `true` when it was live and is given back, `false` when it had
    /// expired or been released by someone else already (see
    /// [`PermitExpirableSemaphore::try_release`]).
    ///
    /// # Errors
    /// As [`PermitExpirableSemaphore::try_release`]; on an error the permit is not released
    /// again (it expires with its lease, or is released by its id).
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have released the permit.
    pub async fn release(mut self) -> Result<bool> {
        self.close();
        self.semaphore.try_release(self.id).await
    }

    /// Leaves the permit acquired and returns its id (nothing is sent). A watchdog permit is no
    /// longer renewed: it lives until its last renewal's lease runs out (at most
    /// [`lock_watchdog_timeout`](crate::Config::lock_watchdog_timeout)), unless released by
    /// its id first; take it from a handle made
    /// [`without_watchdog`](PermitExpirableSemaphore::without_watchdog) to keep it for ever.
    pub fn keep(mut self) -> PermitId {
        self.close();
        self.id
    }
}

impl Drop for PermitGuard {
    fn drop(&mut self) {
        if self.armed {
            self.close();
            self.semaphore.release_in_background(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_attempts_sleep_is_never_longer_than_the_bound() {
        let bound = Duration::from_secs(30);
        assert_eq!(
            sleep_bound(Some(Duration::from_secs(3600)), bound),
            bound,
            "a permit an hour away"
        );
        assert_eq!(
            sleep_bound(Some(Duration::from_secs(2)), bound),
            Duration::from_secs(2)
        );
        assert_eq!(sleep_bound(None, bound), bound, "none will expire");
    }
}
