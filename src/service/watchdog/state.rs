//! The state the watchdog's rooms share, below all of them: the holds ([`Hold`], by
//! [`HoldKey`]: every owner's hold of every lock a guard stands for, with its parts, renewed or
//! leased), the requests for a run at once, and the connection doubts' bookkeeping ([`Doubts`]). The handle (`mod.rs`) registers into it, the renewal run
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
///
/// Its hash is computed once, when it is made (SipHash with this process's random keys, as a
/// `HashMap`'s), and a map hashes only that number: a lock + unlock looks its key up in the
/// ledger and the watchdog about ten times, and hashing the name and the field each time was
/// a fifth of the crate's own instructions per op (callgrind). Made only by [`HoldKey::new`];
/// its parts are never changed after.
///
/// One allocation shared by every copy (the handle's, its claims', the guards', the ledger's and
/// the watchdog's): a copy is a pointer, so a parked acquisition and a held lock carry 8 bytes of
/// it, not 56.
#[derive(Debug, Clone)]
pub(crate) struct HoldKey(Arc<KeyParts>);

/// What a [`HoldKey`] names (read through the key).
#[derive(Debug)]
pub(crate) struct KeyParts {
    pub(crate) name: Arc<str>,
    pub(crate) field: Arc<str>,
    pub(crate) values: Arc<[String]>,
    hash: u64,
}

impl HoldKey {
    pub(crate) fn new(name: Arc<str>, field: Arc<str>, values: Arc<[String]>) -> Self {
        static KEYS: std::sync::OnceLock<std::hash::RandomState> = std::sync::OnceLock::new();
        let hash = std::hash::BuildHasher::hash_one(
            KEYS.get_or_init(std::hash::RandomState::new),
            (&*name, &*field, &*values),
        );
        Self(Arc::new(KeyParts {
            name,
            field,
            values,
            hash,
        }))
    }
}

impl std::ops::Deref for HoldKey {
    type Target = KeyParts;
    fn deref(&self) -> &KeyParts {
        &self.0
    }
}

impl std::hash::Hash for HoldKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// The hasher of the maps keyed by [`HoldKey`] (the watchdog's holds, the owner ledger): the
/// key's own hash passed through. That hash is already a keyed SipHash of the key's parts,
/// computed once when the key is made; hashing it again with SipHash at every lookup (a lock
/// + unlock makes about ten) was about 2 % of the client's instructions per op.
#[derive(Default, Clone, Copy)]
pub(crate) struct PassThrough(u64);

impl std::hash::Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    /// Not used by [`HoldKey`] (which writes one `u64`); mixes bytes in all the same, so a
    /// map keyed by anything else would still spread its keys.
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 ^= n;
    }
}

/// Builds [`PassThrough`] hashers.
pub(crate) type HoldKeyHash = std::hash::BuildHasherDefault<PassThrough>;

impl PartialEq for HoldKey {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.hash == other.hash
                && self.name == other.name
                && self.field == other.field
                && self.values == other.values)
    }
}

impl Eq for HoldKey {}

/// One owner's hold of one lock as this client keeps it: the parts its guards stand for (every
/// acquisition is a part, a re-entry too), the one loss signal all of them watch, and how the
/// watchdog renews it while a part without a lease remains. In Redis the parts are one field,
/// one count and one TTL: the hold lives as long as its longest part.
pub(super) struct Hold {
    /// The parts acquired without a lease: while there is one, the watchdog renews the hold.
    pub(super) renewed: u32,
    /// The leased parts: (part id, when its TTL ends: its acquisition's send time + its lease,
    /// its lease).
    pub(super) leases: Vec<(u64, Instant, std::time::Duration)>,
    /// A part with a lease was registered here once (the key's TTL then follows the parts, not
    /// the watchdog alone: see [`Need`]).
    pub(super) leased: bool,
    /// The parts of guards kept (given up without a release, Java style), in the order kept:
    /// a handle's unlock releases one of these before any part a guard still follows.
    pub(super) kept: Vec<Parts>,
    pub(super) shape: RenewalShape,
    /// The kind's local wait line, told when renewal finds the hold gone.
    pub(super) queue: Option<crate::types::line::WaitLine>,
    /// How the hold is confirmed after a reconnect when no renewal runs for it and its kind has
    /// no owner field in the lock's hash (a group multi-lock, a permit): a call answering the
    /// hold count. `None`: `HEXISTS <lock> <field>`. Boxed: most holds have none, and every
    /// slot of the holds' map (a hundred thousand holds, a table of 131 072 slots) is as large
    /// as a hold.
    pub(super) presence: Option<Box<ScriptCall>>,
    /// When the latest acquisition registered here was sent.
    pub(super) last_sent: Instant,
    pub(super) epoch: u64,
    pub(super) renewals: u64,
    pub(super) loss: Arc<LossSignal>,
}

/// The parts of an owner's hold one guard stands for: a part without a lease (renewed), a
/// leased part (its id), or both (a watchdog acquisition that set a TTL longer than the
/// timeout: a run-once job's `at_least`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Parts {
    pub(crate) renewed: bool,
    pub(crate) lease: Option<u64>,
}

impl Hold {
    /// `true` while a part without a lease remains (the watchdog renews the hold).
    pub(super) fn is_renewed(&self) -> bool {
        self.renewed > 0
    }

    /// What the parts still need of the key's TTL.
    pub(super) fn need(&self) -> Need {
        Need {
            renewed: self.is_renewed(),
            until: self.leases.iter().map(|&(_, ends, _)| ends).max(),
            longest_lease: self.leases.iter().map(|&(_, _, lease)| lease).max(),
            leased: self.leased,
        }
    }

    /// `true` when no part is left.
    pub(super) fn is_empty(&self) -> bool {
        self.renewed == 0 && self.leases.is_empty()
    }
}

/// What the parts of one owner's hold still need of the key's TTL (a release that leaves some
/// sets the TTL to it): the watchdog timeout while a part without a lease remains, the latest
/// end of the leased parts, whichever is longer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Need {
    /// A part without a lease remains.
    pub(crate) renewed: bool,
    /// The latest end of the leased parts that remain.
    pub(crate) until: Option<Instant>,
    /// The longest lease of the leased parts that remain.
    pub(crate) longest_lease: Option<std::time::Duration>,
    /// The hold had a leased part at some time.
    pub(crate) leased: bool,
}

impl Need {
    /// The TTL the parts need as of `now` (`None`: no part is known).
    pub(crate) fn ttl(
        &self,
        timeout: std::time::Duration,
        now: Instant,
    ) -> Option<std::time::Duration> {
        let renewed = self.renewed.then_some(timeout);
        let leased = self.until.map(|ends| ends.saturating_duration_since(now));
        renewed.max(leased)
    }
}

/// What the watchdog calls when it finds a hold gone whose kind has a local wait line:
/// `(lock name, wait line)`, so the line's head attempts at once.
pub(crate) type OnGone = Box<dyn Fn(&str, crate::types::line::WaitLine) + Send + Sync>;

/// What the watchdog keeps: the holds, the doubts.
pub(crate) struct WatchdogState {
    /// Every hold a guard of this client stands for, renewed or leased.
    /// Boxed holds: a map's table has room for more entries than it holds (a hundred thousand
    /// holds, 131 072 slots), and a slot of a pointer is 16 bytes where one of a hold is 128.
    pub(super) holds: DashMap<HoldKey, Box<Hold>, HoldKeyHash>,
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
            holds: DashMap::default(),
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
    /// The (lock, owner) pairs of holds no renewal confirms (leased only) whose check is running
    /// (one at a time, however many reconnects ask).
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

    /// A hold of the lock `name` with `renewed` parts without a lease and one leased part per
    /// end in `leases`, watched by `loss`, in registration `epoch`.
    pub(crate) fn hold(
        name: &str,
        renewed: u32,
        leases: &[Instant],
        loss: Arc<LossSignal>,
        epoch: u64,
    ) -> Hold {
        Hold {
            renewed,
            leases: leases
                .iter()
                .enumerate()
                .map(|(i, &e)| {
                    let lease = e.saturating_duration_since(Instant::now());
                    (i as u64 + 100, e, lease)
                })
                .collect(),
            leased: !leases.is_empty(),
            kept: Vec::new(),
            shape: RenewalShape::per_hold(name),
            queue: None,
            presence: None,
            last_sent: Instant::now(),
            epoch,
            renewals: 0,
            loss,
        }
    }

    #[test]
    fn a_hold_keys_map_hashes_by_the_keys_own_keyed_hash() {
        use std::hash::BuildHasher;
        let key = |name: &str, field: &str| HoldKey::new(name.into(), field.into(), Arc::from([]));
        let a = key("n", "u:1");
        // Equal parts made apart: one hash, and the map's hash is that hash as it is.
        assert_eq!(a.hash, key("n", "u:1").hash);
        assert_eq!(HoldKeyHash::default().hash_one(&a), a.hash);
        assert_ne!(a.hash, key("n", "u:2").hash);
        assert_ne!(a.hash, key("n:", "u:1").hash);
        let map: std::collections::HashMap<HoldKey, u32, HoldKeyHash> = (0..1000)
            .map(|i| (key(&format!("lock:{i}"), "u:1"), i))
            .collect();
        assert_eq!(map.len(), 1000);
        assert!((0..1000).all(|i| map.get(&key(&format!("lock:{i}"), "u:1")) == Some(&i)));
        // Bytes written to it still spread (nothing keyed by HoldKey writes bytes).
        let bytes = |b: &[u8]| HoldKeyHash::default().hash_one(b);
        assert_ne!(bytes(b"ab"), bytes(b"ba"));
    }
}
