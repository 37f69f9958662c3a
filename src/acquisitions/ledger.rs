//! The owner ledger: what this client knows of each owner's hold count on each lock, and the
//! gate that serialises every call that changes that count.
//!
//! An owner field (`<client uuid>:<owner id>`) belongs to one client, so only this client's
//! acquisitions and releases change its count in Redis (expiry and force-unlock only ever remove
//! the field). Each call that may change the count — an acquisition attempt, a release, the
//! reconciliation of an ambiguous attempt — holds the entry's gate while it runs, so the count
//! before an attempt is known exactly and an ambiguous attempt can be undone by comparing the
//! count with it (see `Claim::attempt`). Nothing of this is stored in Redis.
//!
//! The entry also orders an owner's releases handed to the background (a dropped guard) before
//! that owner's next acquisition of the lock ([`Ledgers::releasing`], [`Ledgers::enter_to_acquire`]),
//! however long they wait for their turn, and names the owner's hold by a *generation*: a new
//! one each time an acquisition finds the owner holding nothing. A guard remembers the
//! generation it was made in; its release sends nothing once the owner's hold is a later one
//! (the guard's hold expired and the owner acquired again), so it never takes a later hold.
//!
//! An entry is dropped when its count is back to zero through this client, and otherwise once
//! it can no longer matter: each entry knows until when a hold its calls made or re-armed can
//! last (the end of the call + the hold's lease, or a later TTL set by an owner-checked
//! renewal); past that, with nobody using the entry and the watchdog not renewing the hold,
//! the hold has expired in Redis, whatever count the entry says (a kept leased guard left to
//! expire, a count unknown after an error). [`Ledgers::sweep`] removes those; the client runs
//! it every [`SWEEP_EVERY`].

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use tokio::{
    sync::{Notify, Semaphore},
    time::Instant,
};

use crate::service::watchdog::{HoldKey, HoldKeyHash};

/// How often the client sweeps its ledger.
pub(crate) const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// What the client knows of one owner's hold count on one lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    /// The count in Redis is this (or lower: a hold may have expired unseen).
    Count(u64),
    /// The count must be read from Redis before it is relied on.
    Unknown,
}

/// The lock's raw name, the owner's field (and a group multi-lock's set of values), shared
/// with the hold (no copy per entry).
type Key = HoldKey;

/// One owner's entry: the gate around what is known of its count, and until when a hold of
/// it can last unless the watchdog renews it.
///
/// One allocation per entry (a held lock keeps its owner's entry): the gate is a semaphore of
/// one permit, taken by [`Ledgers::enter`] (the permit forgotten, the entry holding the slot)
/// and given back when the [`Entry`] is dropped; what is known of the count is read and
/// written only by the gate's holder.
struct Slot {
    gate: Semaphore,
    known: Mutex<Known>,
    /// Until when a hold of the entry can last (a [`Stamps::end`]).
    lasts_until: AtomicU64,
    /// The owner's hold the count is of (0: none yet); written only by the gate's holder.
    generation: AtomicU64,
    /// Releases of this owner handed to the background and not finished; the owner's next
    /// acquisition waits for them.
    releasing: AtomicUsize,
    /// Told when `releasing` drops to zero.
    released: Notify,
}

/// Instants as an entry keeps them: milliseconds since the ledger began (its client's clock:
/// a paused test clock too), rounded up for an end, down for a now, so an end is never read as
/// past before it is.
#[derive(Clone, Copy)]
struct Stamps(Instant);

impl Stamps {
    fn millis(self, at: Instant) -> (u64, bool) {
        let since = at.saturating_duration_since(self.0);
        let ms = u64::try_from(since.as_millis()).unwrap_or(u64::MAX);
        (ms, !since.subsec_nanos().is_multiple_of(1_000_000))
    }

    fn end(self, at: Instant) -> u64 {
        let (ms, part) = self.millis(at);
        ms.saturating_add(u64::from(part))
    }

    fn now(self, at: Instant) -> u64 {
        self.millis(at).0
    }
}

impl Slot {
    fn known(&self) -> Known {
        *self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn extend(&self, stamps: Stamps, until: Instant) {
        self.lasts_until
            .fetch_max(stamps.end(until), Ordering::AcqRel);
    }
}

/// Every owner's entry, created on first use and dropped when back to a count of zero, or by a
/// sweep once it can no longer matter.
#[derive(Clone)]
pub(crate) struct Ledgers {
    map: Arc<Mutex<HashMap<Key, Arc<Slot>, HoldKeyHash>>>,
    stamps: Stamps,
    /// The last generation given out (see [`Entry::new_generation`]).
    generations: Arc<AtomicU64>,
}

impl Default for Ledgers {
    fn default() -> Self {
        Ledgers {
            map: Default::default(),
            stamps: Stamps(Instant::now()),
            generations: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Ledgers {
    /// Waits for the entry of `field` on `lock` and holds its gate until the returned value is
    /// dropped. `lease_ms`: the TTL the calls made under the gate may set; a hold they leave
    /// lasts until at most `lease_ms` after the gate is let go (unless renewed).
    pub(crate) async fn enter(&self, key: Key, lease_ms: u64) -> Entry {
        let slot = self.slot(&key);
        // Cancelled while waiting for the gate: the entry's holder may have left meanwhile and
        // kept the entry for this waiter, so whoever is last out removes an idle one.
        let mut entering = Entering {
            slot: Some(slot),
            key: Some(key),
            ledgers: self,
        };
        let slot = entering.slot.as_ref().expect("set above");
        // Taken and forgotten in the same poll: the entry made below gives it back on drop.
        // (Nothing closes the gate; were it closed, the entry would run without it and give
        // nothing back.)
        let gated = match slot.gate.acquire().await {
            Ok(permit) => {
                permit.forget();
                true
            }
            Err(_) => false,
        };
        Entry {
            gated,
            slot: entering.slot.take().expect("taken once, here"),
            lease: Duration::from_millis(lease_ms),
            key: entering.key.take().expect("taken once, here"),
            ledgers: self.clone(),
        }
    }

    /// The slot of `key`, made if there is none.
    fn slot(&self, key: &Key) -> Arc<Slot> {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.entry(key.clone())
            .or_insert_with(|| {
                Arc::new(Slot {
                    gate: Semaphore::new(1),
                    known: Mutex::new(Known::Count(0)),
                    lasts_until: AtomicU64::new(self.stamps.end(Instant::now())),
                    generation: AtomicU64::new(0),
                    releasing: AtomicUsize::new(0),
                    released: Notify::new(),
                })
            })
            .clone()
    }

    /// As [`enter`](Self::enter), for an acquisition: also waits until no release of this
    /// owner handed to the background before it is left, so the owner's releases and
    /// acquisitions reach Redis in the order they were made. `None` when `deadline` passed first.
    pub(crate) async fn enter_to_acquire(
        &self,
        key: Key,
        lease_ms: u64,
        deadline: Option<Instant>,
    ) -> Option<Entry> {
        loop {
            let enter = self.enter(key.clone(), lease_ms);
            let entry = match deadline {
                None => enter.await,
                Some(d) => tokio::time::timeout_at(d, enter).await.ok()?,
            };
            let slot = entry.slot.clone();
            let released = slot.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if slot.releasing.load(Ordering::Acquire) == 0 {
                return Some(entry);
            }
            // The release takes the gate when its turn comes.
            drop(entry);
            match deadline {
                None => released.await,
                Some(d) => tokio::time::timeout_at(d, released).await.ok()?,
            }
        }
    }

    /// A release of the hold `key` handed to the background: until the returned value is
    /// dropped (when the release ended), the owner's next acquisition waits for it.
    pub(crate) fn releasing(&self, key: &Key) -> Releasing {
        let slot = self.slot(key);
        slot.releasing.fetch_add(1, Ordering::AcqRel);
        Releasing {
            slot: Some(slot),
            key: key.clone(),
            ledgers: self.clone(),
        }
    }

    /// Removes the entry of `key` if it is idle: a count of zero, and nobody else holds or
    /// waits for it (the map's reference and `refs - 1` of the caller's are the only ones).
    fn forget_if_idle(&self, key: &Key, refs: usize) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let unused = map.get(key).is_some_and(|s| {
            Arc::strong_count(s) == refs
                && s.gate
                    .try_acquire()
                    .is_ok_and(|_gate| s.known() == Known::Count(0))
        });
        if unused {
            map.remove(key);
        }
    }

    /// An owner-checked renewal set the TTL of the hold `key` to last until `until`.
    pub(crate) fn extend(&self, key: &Key, until: Instant) {
        let slot = self
            .map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(key)
            .cloned();
        if let Some(slot) = slot {
            slot.extend(self.stamps, until);
        }
    }

    /// Removes the entries that can no longer matter at `now`: nobody uses or waits for them,
    /// every hold they may count has run out by then, and `renewed(lock, field)` (the
    /// watchdog renews that hold) is false. Returns how many were removed.
    pub(crate) fn sweep(&self, now: Instant, renewed: impl Fn(&Key) -> bool) -> usize {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let before = map.len();
        // The map's reference is the only one: no entry is held or awaited (a new `enter`
        // clones it under this lock first).
        map.retain(|key, slot| {
            let idle = Arc::strong_count(slot) == 1 && slot.gate.available_permits() == 1;
            let over = slot.lasts_until.load(Ordering::Acquire) <= self.stamps.now(now);
            !(idle && over && !renewed(key))
        });
        before - map.len()
    }

    /// `true` when this client may know of the hold `key`: an entry exists (a count above
    /// zero, an unknown count, or a call in flight).
    pub(crate) fn may_hold(&self, key: &Key) -> bool {
        self.map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(key)
    }

    /// Number of entries kept.
    pub(crate) fn len(&self) -> usize {
        self.map.lock().unwrap().len()
    }
}

/// One owner's entry, gate held.
pub(crate) struct Entry {
    /// The entry took the gate's permit (given back on drop).
    gated: bool,
    slot: Arc<Slot>,
    lease: Duration,
    key: Key,
    ledgers: Ledgers,
}

impl Entry {
    pub(crate) fn known(&self) -> Known {
        self.slot.known()
    }

    pub(crate) fn set(&mut self, known: Known) {
        *self.slot.known.lock().unwrap_or_else(|p| p.into_inner()) = known;
    }

    /// The owner's hold the count is of (0: none was made through this entry).
    pub(crate) fn generation(&self) -> u64 {
        self.slot.generation.load(Ordering::Acquire)
    }

    /// The owner holds nothing from here on: the next hold is a new one (a guard of an earlier
    /// generation releases nothing of it).
    pub(crate) fn new_generation(&mut self) {
        let next = self.ledgers.generations.fetch_add(1, Ordering::AcqRel) + 1;
        self.slot.generation.store(next, Ordering::Release);
    }
}

/// A release of an owner's hold handed to the background, until it ended (see
/// [`Ledgers::releasing`]).
pub(crate) struct Releasing {
    slot: Option<Arc<Slot>>,
    key: Key,
    ledgers: Ledgers,
}

impl Drop for Releasing {
    fn drop(&mut self) {
        let Some(slot) = self.slot.take() else {
            return;
        };
        if slot.releasing.fetch_sub(1, Ordering::AcqRel) == 1 {
            slot.released.notify_waiters();
        }
        drop(slot);
        self.ledgers.forget_if_idle(&self.key, 1);
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let idle = self.known() == Known::Count(0);
        self.slot.extend(
            self.ledgers.stamps,
            crate::types::millis::later(Instant::now(), self.lease),
        );
        if std::mem::take(&mut self.gated) {
            self.slot.gate.add_permits(1);
        }
        if idle {
            // The map's reference and this one.
            self.ledgers.forget_if_idle(&self.key, 2);
        }
    }
}

/// An `enter` waiting for its gate; dropped before it got it (cancelled), it removes the entry
/// if that left it idle.
struct Entering<'a> {
    slot: Option<Arc<Slot>>,
    key: Option<Key>,
    ledgers: &'a Ledgers,
}

impl Drop for Entering<'_> {
    fn drop(&mut self) {
        if let (Some(slot), Some(key)) = (self.slot.take(), self.key.take()) {
            drop(slot);
            self.ledgers.forget_if_idle(&key, 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(lock: &str, field: &str) -> Key {
        HoldKey::new(lock.into(), field.into(), Arc::from([]))
    }

    /// A holder whose entry ends at `left` while another `enter` of its key waits for the
    /// gate; the waiter is cancelled before it runs again (its `Acquire` had been given the
    /// gate: the cancellation gives it back). Returns the ledgers afterwards.
    async fn holder_leaves_then_the_queued_enter_is_cancelled(left: Known) -> Ledgers {
        let ledgers = Ledgers::default();
        let mut first = ledgers.enter(key("k", "f"), 0).await;
        first.set(left);
        let queued = {
            let ledgers = ledgers.clone();
            tokio::spawn(async move {
                let _entry = ledgers.enter(key("k", "f"), 0).await;
            })
        };
        tokio::task::yield_now().await;
        assert!(!queued.is_finished(), "waiting for the gate");
        drop(first);
        queued.abort();
        assert!(queued.await.unwrap_err().is_cancelled());
        ledgers
    }

    /// An `enter` cancelled while it waited for the gate leaves no entry behind, even when the
    /// holder it waited for left first (its clean-up then saw the waiter's reference).
    #[tokio::test(flavor = "current_thread")]
    async fn an_enter_cancelled_while_queued_leaves_no_entry() {
        let ledgers = holder_leaves_then_the_queued_enter_is_cancelled(Known::Count(0)).await;
        assert_eq!(ledgers.len(), 0, "an idle entry left for the next sweep");
        assert!(!ledgers.may_hold(&key("k", "f")));
    }

    /// ... and keeps a count the holder it waited for left behind (a hold still counted is
    /// never forgotten by a cancelled bystander).
    #[tokio::test(flavor = "current_thread")]
    async fn an_enter_cancelled_while_queued_keeps_the_count_it_waited_behind() {
        let ledgers = holder_leaves_then_the_queued_enter_is_cancelled(Known::Count(1)).await;
        assert_eq!(ledgers.len(), 1, "the count of 1 is kept");
        assert!(ledgers.may_hold(&key("k", "f")));
        assert_eq!(
            ledgers.enter(key("k", "f"), 0).await.known(),
            Known::Count(1)
        );
    }

    /// A release of the owner handed to the background before an acquisition goes first,
    /// however long it waits for its turn; the acquisition takes the gate after it, not before.
    #[tokio::test(start_paused = true)]
    async fn an_acquisition_waits_for_the_owners_releases_handed_over_before_it() {
        let ledgers = Ledgers::default();
        let k = key("k", "f");
        let releasing = ledgers.releasing(&k);
        let acquiring = {
            let (ledgers, k) = (ledgers.clone(), k.clone());
            tokio::spawn(async move {
                ledgers
                    .enter_to_acquire(k, 0, None)
                    .await
                    .expect("no deadline")
                    .known()
            })
        };
        // Long after any command timeout, the release has not run: the acquisition waits.
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!acquiring.is_finished());
        // The release runs (takes the gate, sets the count) and ends.
        let mut release = ledgers.enter(k.clone(), 0).await;
        release.set(Known::Count(3));
        drop(release);
        tokio::task::yield_now().await;
        assert!(!acquiring.is_finished(), "the release has not ended");
        drop(releasing);
        assert_eq!(acquiring.await.unwrap(), Known::Count(3));
        // Another owner is never held up.
        let other = ledgers.releasing(&key("k", "g"));
        assert!(ledgers.enter_to_acquire(k.clone(), 0, None).await.is_some());
        drop(other);
    }

    /// An acquisition with a deadline gives up at it while its owner's release is pending; the
    /// entry of a release that ended with a count of zero is forgotten.
    #[tokio::test(start_paused = true)]
    async fn an_acquisition_behind_its_owners_release_gives_up_at_its_deadline() {
        let ledgers = Ledgers::default();
        let k = key("k", "f");
        let releasing = ledgers.releasing(&k);
        let start = Instant::now();
        let deadline = start + Duration::from_secs(3);
        assert!(ledgers
            .enter_to_acquire(k.clone(), 0, Some(deadline))
            .await
            .is_none());
        assert_eq!(Instant::now(), deadline);
        drop(releasing);
        assert_eq!(ledgers.len(), 0, "nothing counted, nothing kept");
    }

    /// Each hold of an owner has a generation of its own; an entry forgotten and made again
    /// has none until a hold is made through it.
    #[tokio::test]
    async fn each_hold_of_an_owner_has_a_generation_of_its_own() {
        let ledgers = Ledgers::default();
        let k = key("k", "f");
        let mut e = ledgers.enter(k.clone(), 0).await;
        assert_eq!(e.generation(), 0);
        e.new_generation();
        let first = e.generation();
        assert_ne!(first, 0);
        e.set(Known::Count(1));
        drop(e);
        let mut e = ledgers.enter(k.clone(), 0).await;
        assert_eq!(e.generation(), first, "kept while counted");
        e.new_generation();
        assert!(e.generation() > first);
        e.set(Known::Count(0));
        drop(e);
        assert_eq!(ledgers.len(), 0);
        assert_eq!(ledgers.enter(k, 0).await.generation(), 0);
    }

    #[tokio::test]
    async fn entries_serialise_and_are_dropped_when_back_to_zero() {
        let ledgers = Ledgers::default();
        let mut e = ledgers.enter(key("k", "f"), 0).await;
        assert_eq!(e.known(), Known::Count(0));
        e.set(Known::Count(2));
        let waiter = {
            let ledgers = ledgers.clone();
            tokio::spawn(async move { ledgers.enter(key("k", "f"), 0).await.known() })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "the gate is held");
        drop(e);
        assert_eq!(waiter.await.unwrap(), Known::Count(2));
        assert_eq!(ledgers.len(), 1, "a non-zero count is kept");
        ledgers.enter(key("k", "f"), 0).await.set(Known::Count(0));
        assert_eq!(ledgers.len(), 0, "a zero count is forgotten");
    }

    /// A count left by a leased hold (or unknown after an error) is kept while that hold can
    /// last, then swept; a renewed (watchdog) hold or an entry in use is never swept.
    #[tokio::test(start_paused = true)]
    async fn entries_are_swept_once_their_holds_can_have_expired() {
        let ledgers = Ledgers::default();
        let (kept, unknown, renewed) = (key("k", "kept"), key("k", "unknown"), key("k", "renewed"));
        let never = |_: &Key| false;
        ledgers
            .enter(kept.clone(), 1_000)
            .await
            .set(Known::Count(1));
        ledgers
            .enter(unknown.clone(), 2_000)
            .await
            .set(Known::Unknown);
        ledgers
            .enter(renewed.clone(), 1_000)
            .await
            .set(Known::Count(1));
        assert_eq!(ledgers.len(), 3);
        let start = Instant::now();
        assert_eq!(ledgers.sweep(start + Duration::from_millis(999), never), 0);
        // A renewal with a longer lease moves the bound.
        ledgers.extend(&kept, start + Duration::from_millis(1_500));
        let is_renewed = |k: &Key| &*k.field == "renewed";
        assert_eq!(
            ledgers.sweep(start + Duration::from_millis(1_000), is_renewed),
            0
        );
        assert_eq!(
            ledgers.sweep(start + Duration::from_millis(1_500), is_renewed),
            1
        );
        // An entry in use is not swept, even past its bound.
        let held = ledgers.enter(unknown.clone(), 2_000).await;
        assert_eq!(ledgers.sweep(start + Duration::from_secs(5), is_renewed), 0);
        drop(held);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(ledgers.sweep(Instant::now(), is_renewed), 1);
        assert!(ledgers.may_hold(&renewed), "the renewed hold stays");
        assert_eq!(ledgers.sweep(Instant::now(), never), 1);
        assert_eq!(ledgers.len(), 0);
    }
}
