//! Taking a permit: `acquire` and its variants, and the engine's waiter `TakePermit` (a
//! permit taken for a caller that went away is released by its id; a busy waiter sleeps until
//! the earliest permit's expiry or the watchdog timeout, whichever is sooner).

use std::time::Duration;

use tokio::time::Instant;

use super::{
    calls::{decode_acquire, is_ok, Reply},
    guard::PermitGuard,
    handle::{PermitExpirableSemaphore, OBJECT},
    life::{Life, PermitLife},
};
use crate::{
    client::Client,
    engine::{self, detach, Observed, Orphan, SleepOn, Step, Turn, Wait, Waiter, Won},
    error::{Error, Result},
    service::pubsub::Reading,
    sync::synced::run_taking,
    types::{clock::epoch_ms, permit::PermitId},
};

impl PermitExpirableSemaphore {
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
        let take = TakePermit {
            semaphore: self,
            lease_ms,
        };
        let seen = Observed {
            kind: OBJECT,
            owner: "",
            wait: wait.remaining(),
            lease,
        };
        Ok(engine::acquire(&take, wait, seen).await?.map(|won| {
            let taken = won.take();
            let watch = PermitLife::start(
                &self.client,
                self.calls(),
                taken.id,
                life,
                taken.sent_at,
                taken.now,
            );
            PermitGuard::new(self.clone(), taken.id, watch)
        }))
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
    /// background by its id, and looked for again until no late copy of the acquisition can
    /// run ([`Error::Ambiguous`]; see `release_taken_late`). A busy attempt's sleep is the sooner of the earliest
    /// permit's expiry and the watchdog timeout (see [`sleep_bound`]).
    async fn attempt(&self, wait: Wait, _turn: &mut Turn<'_>) -> Result<Step<Won<Taken>>> {
        let (this, lease_ms) = (self.semaphore.clone(), self.lease_ms);
        let deadline = wait.deadline();
        let bound = this.client.config().lock_watchdog_timeout;
        detach(self.client().runtime(), || (), move |_| async move {
            let id = PermitId::random();
            let now = epoch_ms();
            let call = this.calls().acquire_call(id, lease_ms, now);
            let undo = || async {
                if let Err(e) = this.release_once(id).await {
                    log::debug!("releasing an unreplicated permit of {} failed ({e:#}); retrying in the background", this.name);
                    this.release_in_background(id);
                }
            };
            let what = id.to_string();
            let sent_at = Instant::now();
            let outcome = run_taking(&this.client, call, (&this.name, &what), deadline, is_ok, undo).await;
            match outcome {
                Err(f) if f.sent && f.error.is_transient() => {
                    this.release_taken_late(id, sent_at);
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
