//! One watched hold, what every guard of the crate stands on (a lock guard's `Held`, a
//! permit's watch): its name in the watchdog's bookkeeping ([`HoldKey`]), its parts registered
//! with the watchdog (renewed while a part without a lease remains, or counted until the lease
//! ends), the doubts it was born under, and its [`LossSignal`]; let go once, or kept
//! registered when the guard is given up without a release.

use std::{sync::Arc, time::Duration};

use tokio::time::Instant;

use super::{
    handle::{Parts, Upkeep, Watchdog},
    loss::{HoldState, LossSignal},
    state::HoldKey,
};
use crate::types::millis::later;

/// A hold its guard watches, registered with the watchdog until let go.
#[derive(Debug)]
pub(crate) struct Watched {
    key: HoldKey,
    loss: Arc<LossSignal>,
    /// The hold's registration epoch and the guard's parts of it (renewed, leased: the leased
    /// part's id is kept for an owner's exact TTL set after the guard let go)...
    epoch: u64,
    parts: Parts,
    /// ...which the guard follows (releases on drop) until it lets them go or keeps them;
    /// `false` from the start for a hold nothing follows.
    followed: bool,
}

impl Watched {
    /// Starts watching a hold acquired by a call sent at `sent_at`: a part without a lease
    /// (`renewed`: the watchdog renews it while it lasts), a leased part (`lease`), or both.
    /// With neither, nothing follows the hold (a permit that never expires): its signal is
    /// `Held` for ever unless marked.
    pub(crate) fn start(
        watchdog: &Watchdog,
        key: HoldKey,
        upkeep: Upkeep,
        sent_at: Instant,
        renewed: bool,
        lease: Option<Duration>,
    ) -> Self {
        if !renewed && lease.is_none() {
            return Self {
                key,
                loss: LossSignal::new(later(sent_at, Duration::MAX)),
                epoch: 0,
                parts: Parts::default(),
                followed: false,
            };
        }
        let r = watchdog.register(&key, upkeep, sent_at, renewed, lease);
        watchdog.doubted_since(&key, &r.loss, sent_at);
        Self {
            key,
            loss: r.loss,
            epoch: r.epoch,
            parts: r.parts,
            followed: true,
        }
    }

    /// The hold's loss signal (shared by every guard of the hold).
    pub(crate) fn loss(&self) -> &Arc<LossSignal> {
        &self.loss
    }

    /// Where the hold stands.
    pub(crate) fn state(&self) -> HoldState {
        self.loss.state()
    }

    /// The leased part's id in the hold, for a TTL set that moves that part's end.
    pub(crate) fn lease_part(&self) -> Option<u64> {
        self.parts.lease
    }

    /// Whether the guard still follows the hold (not let go, not kept).
    pub(crate) fn is_followed(&self) -> bool {
        self.followed
    }

    /// Lets the guard's parts go (idempotent): the hold is no longer renewed for them, and its
    /// deadline is what the parts left need.
    pub(crate) fn let_go(&mut self, watchdog: &Watchdog) {
        if std::mem::take(&mut self.followed) {
            watchdog.let_go(&self.key, Some((self.epoch, self.parts)));
        }
    }

    /// Stops following the hold while its parts stay registered (a guard given up without a
    /// release: a part without a lease goes on being renewed, a leased one counts until its
    /// end).
    pub(crate) fn keep(&mut self, watchdog: &Watchdog) {
        if std::mem::take(&mut self.followed) {
            watchdog.keep(&self.key, self.epoch, self.parts);
        }
    }
}
