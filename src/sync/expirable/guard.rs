//! `PermitGuard`: one acquired permit, released in the background on drop; where it stands
//! from its `PermitLife`.

#[cfg(not(feature = "metrics"))]
use std::time::Duration;

use tokio::time::Instant;

use super::{
    handle::{PermitExpirableSemaphore, OBJECT},
    life::{Life, PermitLife},
};
use crate::{error::Result, service::watchdog::HoldState, types::permit::PermitId};

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
    watch: PermitLife,
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
    pub(super) fn new(
        semaphore: PermitExpirableSemaphore,
        id: PermitId,
        watch: PermitLife,
    ) -> Self {
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
