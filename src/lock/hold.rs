//! One owner's hold of one lock: the value acquisition, give-up clean-up, guards and releases
//! share, and every Redis call made with it.

use std::{sync::Arc, time::Duration};

use tokio::time::Instant;

use super::{
    engine::Step,
    kind::{
        decode_acquire, decode_release, AcquireRequest, Mode, Protocol, Release, ReleaseRequest,
    },
};
use crate::{
    client::Client,
    error::{Error, Result},
    names,
    watchdog::renewal_call,
};

/// One owner bound to one lock with one lease: everything needed to acquire, renew, release or
/// give up. Cheap to clone (reference-counted parts).
#[derive(Clone)]
pub(crate) struct Hold {
    pub(crate) client: Client,
    pub(crate) proto: Arc<dyn Protocol>,
    /// The owner's hash field (`<uuid>:<id>`, plus `:write` for a write lock).
    pub(crate) field: Arc<str>,
    /// The TTL set by acquisitions and re-armed by partial releases (the lease, or the
    /// watchdog timeout).
    pub(crate) lease_ms: u64,
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("lock", &self.name())
            .field("owner", &self.field)
            .field("lease_ms", &self.lease_ms)
            .finish()
    }
}

impl Hold {
    /// The raw lock name.
    pub(crate) fn name(&self) -> &str {
        self.proto.name()
    }

    /// One acquisition attempt.
    ///
    /// Cancel safety: the script runs as its own task. If the caller's future is dropped while
    /// it is in flight, the task still completes; a success then comes back as an [`Acquired`]
    /// nobody claims, whose `Drop` releases that hold at once.
    pub(crate) async fn attempt(&self, mode: Mode) -> Result<Step<Acquired>> {
        if self.client.is_closed() {
            return Err(Error::Shutdown);
        }
        let hold = self.clone();
        let task = self.client.spawn(async move {
            let (call, reply) = hold.proto.acquire(AcquireRequest {
                field: &hold.field,
                lease_ms: hold.lease_ms,
                mode,
            });
            let sent_at = Instant::now();
            let value = hold.client.core().run(call, hold.name()).await?;
            Ok(match decode_acquire(reply, value, hold.name())? {
                super::kind::Acquire::Acquired { token } => Step::Done(Acquired {
                    hold,
                    sent_at,
                    token,
                    armed: true,
                }),
                super::kind::Acquire::Busy { frees_in } => Step::Busy { frees_in },
            })
        });
        task.await.map_err(|_| Error::Shutdown)?
    }

    /// Releases one hold, retrying transient failures with the same request id (the unlock
    /// latch makes the retries idempotent), then hands the latch to the batched clean-up.
    pub(crate) async fn release(&self) -> Result<Release> {
        if self.client.is_closed() {
            return Err(Error::Shutdown);
        }
        let core = self.client.core();
        let config = core.config();
        let latch = names::unlock_latch(self.name(), &names::request_id());
        let mut tries = 0;
        let reply = loop {
            let call = self.proto.release(ReleaseRequest {
                field: &self.field,
                lease_ms: self.lease_ms,
                latch: &latch,
                latch_px_ms: config.latch_px_ms(),
                publish: core.messaging().publish_command(),
            });
            match core.run(call, self.name()).await {
                Err(e) if e.is_transient() && tries < config.retry_attempts => {
                    tries += 1;
                    log::debug!("unlock of {} failed ({e}); retrying", self.name());
                    tokio::time::sleep(config.retry_delay).await;
                }
                other => break other?,
            }
        };
        self.client.latches().done(latch.into());
        decode_release(reply, self.name())
    }

    /// Hands a release to the client's runtime; never blocks, never panics.
    pub(crate) fn release_in_background(&self) {
        if self.client.is_closed() {
            return;
        }
        let hold = self.clone();
        drop(self.client.spawn(async move {
            if let Err(e) = hold.release().await {
                log::warn!("background unlock of {} failed: {e}", hold.name());
            }
        }));
    }

    /// Owner-checked renewal: sets the TTL to `lease` where this owner still holds the lock
    /// (the same call the watchdog batches). `Ok(false)`: the hold is gone.
    pub(crate) async fn renew(&self, lease: Duration) -> Result<bool> {
        let lease_ms = crate::config::lease_millis(lease)?;
        let shape = self.proto.renewal();
        let call = renewal_call(&[(&shape, vec![&*self.field])], lease_ms);
        let flags = self.client.core().run_flags(call, self.name()).await?;
        Ok(flags.first() == Some(&1))
    }

    /// A queued waiter's clean-up after it gave up (the fair lock leaves its queue).
    pub(crate) async fn give_up(&self, queue_ms: u64) -> Result<()> {
        if let Some(call) = self.proto.give_up(&self.field, queue_ms) {
            self.client.core().run(call, self.name()).await?;
        }
        Ok(())
    }

    /// Hands the give-up clean-up to the client's runtime (a dropped waiter).
    pub(crate) fn give_up_in_background(&self, queue_ms: u64) {
        if self.client.is_closed() || self.proto.give_up(&self.field, queue_ms).is_none() {
            return;
        }
        let hold = self.clone();
        drop(self.client.spawn(async move {
            if let Err(e) = hold.give_up(queue_ms).await {
                log::warn!("give-up clean-up of {} failed: {e}", hold.name());
            }
        }));
    }
}

/// A successful acquisition not yet turned into a guard. Dropping it releases the hold.
pub(crate) struct Acquired {
    pub(crate) hold: Hold,
    pub(crate) sent_at: Instant,
    pub(crate) token: Option<u64>,
    armed: bool,
}

impl Acquired {
    /// Takes responsibility for the hold (the guard releases it from now on).
    pub(crate) fn disarm(mut self) -> (Hold, Instant, Option<u64>) {
        self.armed = false;
        (self.hold.clone(), self.sent_at, self.token)
    }
}

impl Drop for Acquired {
    fn drop(&mut self) {
        if self.armed {
            crate::observe::late_acquisition(self.hold.name(), &self.hold.field);
            self.hold.release_in_background();
        }
    }
}
