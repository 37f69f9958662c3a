//! Taking permits: `Semaphore::acquire` and its variants, and the engine's waiter `Take` (the
//! permits of an attempt whose caller went away are given back).

use std::time::Duration;

use fred::types::Value;

use super::{
    handle::{Semaphore, OBJECT},
    permits::SemaphorePermits,
};
use crate::{
    client::Client,
    conn::core::flag,
    engine::{self, detach, Observed, Orphan, SleepOn, Step, Turn, Wait, Waiter, Won},
    error::{Error, Result},
    service::pubsub::Reading,
    sync::synced::run_taking,
};

impl Semaphore {
    /// Takes `permits` permits, waiting without limit until a release makes them available
    /// (Redisson `acquire(permits)`); they go back when the returned guard is dropped or
    /// released ([`SemaphorePermits::forget`] keeps them, for a release by count later). Zero
    /// permits succeed at once without a call.
    ///
    /// # Errors
    /// Redis and connection errors (an attempt whose reply was lost may have taken the
    /// permits: they are anonymous, so nothing can tell); [`Error::NotReplicated`] once the
    /// retries of an acquisition no replica acknowledged are used up (each was given back).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped while waiting it leaves the channel; dropped while an attempt is in
    /// flight, the attempt finishes in the background and gives back what it took.
    pub async fn acquire(&self, permits: u64) -> Result<SemaphorePermits> {
        match self.acquire_until(permits, Wait::Until(None)).await? {
            Some(taken) => Ok(taken),
            None => Err(Error::Timeout("acquire without limit ended".into())),
        }
    }

    /// One attempt to take `permits` permits (Redisson `tryAcquire(permits)`): the permits'
    /// guard when taken.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire(&self, permits: u64) -> Result<Option<SemaphorePermits>> {
        self.acquire_until(permits, Wait::Once).await
    }

    /// Takes `permits` permits, waiting at most `wait` (Redisson `tryAcquire(permits, wait)`):
    /// the permits' guard when taken, `None` when `wait` passed first. A zero `wait` is one
    /// attempt.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire_for(
        &self,
        permits: u64,
        wait: Duration,
    ) -> Result<Option<SemaphorePermits>> {
        self.acquire_until(permits, Wait::for_duration(wait)).await
    }

    async fn acquire_until(&self, permits: u64, wait: Wait) -> Result<Option<SemaphorePermits>> {
        if permits == 0 {
            return Ok(Some(SemaphorePermits::new(self.clone(), 0)));
        }
        let take = Take {
            semaphore: self,
            permits,
        };
        let seen = Observed {
            kind: OBJECT,
            owner: "",
            wait: wait.remaining(),
            lease: None,
        };
        Ok(engine::acquire(&take, wait, seen).await?.map(|won| {
            let Taken { semaphore, permits } = won.take();
            SemaphorePermits::new(semaphore, permits)
        }))
    }
}

/// One taking of `permits` permits: the engine's waiter for [`Semaphore::acquire`] and its
/// variants.
struct Take<'a> {
    semaphore: &'a Semaphore,
    permits: u64,
}

/// Permits taken, on their way to the caller.
struct Taken {
    semaphore: Semaphore,
    permits: u64,
}

/// Permits taken for a caller that went away are given back.
impl Orphan for Taken {
    fn orphaned(self) {
        crate::observe::late_acquisition(&self.semaphore.name, "");
        self.semaphore
            .give_back_in_background(self.permits, "permits a dropped caller took");
    }
}

impl Waiter for Take<'_> {
    type Won = Taken;
    /// Redisson retries an unreplicated SEM-ACQ, a single try's too.
    const RETRIES_UNREPLICATED_ONCE: bool = true;

    fn client(&self) -> &Client {
        &self.semaphore.client
    }

    fn name(&self) -> &str {
        &self.semaphore.name
    }

    /// One SEM-ACQ, never cut short ([`detach`]); taken but acknowledged by no replica: given
    /// back, [`Error::NotReplicated`].
    async fn attempt(&self, wait: Wait, _turn: &mut Turn<'_>) -> Result<Step<Won<Taken>>> {
        let (this, permits) = (self.semaphore.clone(), self.permits);
        let deadline = wait.deadline();
        detach(
            self.client().runtime(),
            || (),
            move |_| async move {
                let call = this.calls().acquire_call(permits);
                let taken = |v: &Value| v.as_i64() == Some(1);
                let undo = || async {
                    if let Err(e) = this.give_back(permits).await {
                        log::warn!(
                            "could not give back the unreplicated permits of {}: {e:#}",
                            this.name
                        );
                    }
                };
                let value = run_taking(&this.client, call, (&this.name, ""), deadline, taken, undo)
                    .await
                    .map_err(|f| f.error)??;
                if flag(&value, &this.name)? {
                    Ok(Step::Done(Won::new(Taken {
                        semaphore: this,
                        permits,
                    })))
                } else {
                    Ok(Step::Busy { frees_in: None })
                }
            },
        )
        .await
    }

    /// Not repeated after a transient failure: the permits are anonymous, so an attempt whose
    /// reply was lost cannot be told apart from one that never ran (it may have taken them).
    fn repeatable(&self) -> bool {
        false
    }

    fn sleep_on(&self) -> SleepOn {
        SleepOn::Channel {
            channel: self.semaphore.channel.clone(),
            reading: Reading::Permits,
        }
    }
}
