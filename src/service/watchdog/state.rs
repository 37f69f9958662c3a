//! The state the watchdog's rooms share, below all of them: the renewed holds ([`Renewed`], by
//! [`HoldKey`]), the leased ones, the requests for a run at once, and the connection doubts'
//! bookkeeping ([`Doubts`]). The handle (`mod.rs`) registers into it, the renewal run
//! (`run.rs`) and the doubt listener (`doubt.rs`) read and change it; none of them imports
//! another.

use std::{
    collections::HashSet,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
};

use dashmap::DashMap;
use fred::types::cluster::ClusterRouting;
use parking_lot::Mutex;
use tokio::{sync::Notify, time::Instant};

use super::{loss::LossSignal, shape::RenewalShape};
use crate::conn::scripts::ScriptCall;

/// What names one owner's hold of one lock in this client's bookkeeping (the watchdog's
/// registrations and leased guards, the owner ledger): the lock, the owner field, and for a
/// group multi-lock the set of values (one owner may hold several sets of one group, each a
/// hold of its own, renewed, confirmed and released on its own). Empty `values` for every
/// other kind.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct HoldKey {
    pub(crate) name: Arc<str>,
    pub(crate) field: Arc<str>,
    pub(crate) values: Arc<[String]>,
}

impl HoldKey {
    pub(crate) fn new(name: Arc<str>, field: Arc<str>, values: Arc<[String]>) -> Self {
        Self {
            name,
            field,
            values,
        }
    }
}

/// A hold the watchdog renews: one owner's hold of one lock (not the acquisition's `Claim`),
/// with the count of registrations sharing it.
pub(super) struct Renewed {
    pub(super) count: u32,
    pub(super) shape: RenewalShape,
    /// The kind's local wait line, told when renewal finds the hold gone.
    pub(super) queue: Option<crate::types::line::WaitLine>,
    /// When the latest acquisition registered here was sent.
    pub(super) last_sent: Instant,
    pub(super) epoch: u64,
    pub(super) renewals: u64,
    pub(super) loss: Arc<LossSignal>,
}

/// What the watchdog calls when it finds a hold gone whose kind has a local wait line:
/// `(lock name, wait line)`, so the line's head attempts at once.
pub(crate) type OnGone = Box<dyn Fn(&str, crate::types::line::WaitLine) + Send + Sync>;

/// What the watchdog keeps: the renewed holds, the leased ones, the doubts.
pub(crate) struct WatchdogState {
    pub(super) holds: DashMap<HoldKey, Renewed>,
    /// The loss signals of the leased guards (no renewal) of each owner on each lock, told when
    /// a call of that owner sets the lock's TTL.
    pub(super) leased: DashMap<HoldKey, Vec<Arc<LossSignal>>>,
    /// How the leased holds of a (lock, owner) are confirmed after a reconnect when their kind
    /// has no owner field in the lock's hash (a group multi-lock): a call answering the hold
    /// count. Absent: `HEXISTS <lock> <field>`.
    pub(super) presence: DashMap<HoldKey, ScriptCall>,
    pub(super) wake: Notify,
    /// A hold's deadline came closer than the next regular run: run now.
    pub(super) urgent: Notify,
    pub(super) next_epoch: AtomicU64,
    /// Script calls made by renewal runs (for tests and diagnostics).
    pub(super) renew_calls: AtomicU64,
    pub(super) on_gone: OnGone,
    /// Connection doubts: the epoch, the leased holds, the routing last seen.
    pub(super) doubts: Doubts,
}

impl WatchdogState {
    pub(super) fn new(on_gone: OnGone) -> Self {
        Self {
            holds: DashMap::new(),
            leased: DashMap::new(),
            presence: DashMap::new(),
            wake: Notify::new(),
            urgent: Notify::new(),
            next_epoch: AtomicU64::new(1),
            renew_calls: AtomicU64::new(0),
            on_gone,
            doubts: Default::default(),
        }
    }
}

/// The doubt bookkeeping of one client (a part of the watchdog's state).
#[derive(Default)]
pub(crate) struct Doubts {
    /// The last doubt epoch taken (0: none yet).
    epoch: AtomicU64,
    /// The (lock, owner) pairs of leased holds whose check is running (one at a time, however
    /// many reconnects ask). The leased holds themselves are the watchdog's `leased` registry.
    pub(super) checking: Mutex<HashSet<HoldKey>>,
    /// The cluster routing as last seen (to tell which slots a dropped or removed node served).
    pub(super) routing: Mutex<Option<ClusterRouting>>,
    /// When the last connection event put holds in doubt (for an acquisition sent before it
    /// and registered after it).
    pub(super) last_at: Mutex<Option<Instant>>,
    /// A Sentinel failover is under way: the master answering now may be the one being
    /// replaced, so nothing it says confirms a hold (renewals carry epoch 0, which clears no
    /// doubt) and a hold registered meanwhile starts in doubt.
    pub(super) failover: AtomicBool,
}

impl Doubts {
    /// The epoch a renewal sent now carries (0, which confirms nothing, during a failover).
    pub(crate) fn current(&self) -> u64 {
        if self.failover.load(Ordering::Acquire) {
            return 0;
        }
        self.epoch.load(Ordering::Acquire)
    }

    /// Takes a new epoch (a doubt event).
    pub(super) fn next(&self) -> u64 {
        self.epoch.fetch_add(1, Ordering::AcqRel) + 1
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A state whose found-gone callback does nothing.
    pub(crate) fn state() -> WatchdogState {
        WatchdogState::new(Box::new(|_, _| {}))
    }
}
