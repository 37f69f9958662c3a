//! The renewal service ("watchdog"): one per client, over a map of the holds it keeps alive.
//!
//! Every `lock_watchdog_timeout / 3` after the previous run completed, one run
//! [collects](collect) the holds due, [batches](batch) them `lock_watchdog_batch_size` per script
//! call, and [applies](apply) each call's reply: a hold whose owner field is gone is dropped and
//! its holder told through its [`LossSignal`]. Errors keep the registrations and are retried
//! sooner, until the holder's deadline passes: then the hold is reported lost and no longer
//! renewed, so a holder is never told "lost" and later "held" again.
//!
//! The watchdog does not know any lock's key layout: each hold brings its [`RenewalShape`] (the
//! renewal script, the lock's keys for one entry, and how an entry lists its owner). Every entry
//! of a call speaks for exactly one hold, so each reply flag is that hold's own.
//!
//! Deadline rule: a hold is valid until the send time of its last successful acquire or renewal
//! plus the timeout minus a drift of `timeout × 0.01 + 2 ms`, on the monotonic clock. Redis
//! starts the TTL no earlier than the send time, so the holder always learns of a loss before
//! anybody else can take the lock (barring server clock jumps, restarts and failover).

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Weak,
    },
    time::Duration,
};

use dashmap::DashMap;
use fred::types::{Key, Value};
use parking_lot::Mutex;
use tokio::{sync::Notify, time::Instant};

use crate::{
    conn::core::Core,
    conn::scripts::{ScriptCall, ScriptId},
};

mod doubt;
pub(crate) use doubt::FailoverHolds;
pub use doubt::HoldState;
#[allow(unused_imports)] // the entry point for other detectors of a stalled node
pub(crate) use doubt::Node;

/// Safety margin subtracted from a lease to get the holder-side deadline.
pub(crate) fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

/// The holder-side deadline of a hold whose acquire or renewal was sent at `sent_at` with a
/// TTL of `lease`.
pub(crate) fn valid_until(sent_at: Instant, lease: Duration) -> Instant {
    sent_at + lease.saturating_sub(drift(lease))
}

/// Tells a holder that its lock is gone (or may be gone: its deadline passed unrenewed).
#[derive(Debug)]
pub(crate) struct LossSignal {
    lost: AtomicBool,
    /// The hold is known gone (renewal found its field absent after every acquisition of it
    /// was sent): releasing it would take a hold of a later acquisition of the same owner.
    gone: AtomicBool,
    times: Mutex<Times>,
    notify: Notify,
    /// The epoch of the connection doubt the hold is in (0: none); see `doubt`.
    doubt: AtomicU64,
}

#[derive(Debug)]
struct Times {
    deadline: Instant,
    /// When the latest call that shortened the deadline was answered: a renewal sent before
    /// then may have run before that call, so it extends nothing.
    shortened_at: Option<Instant>,
}

impl LossSignal {
    pub(crate) fn new(deadline: Instant) -> Arc<Self> {
        Arc::new(Self {
            lost: AtomicBool::new(false),
            gone: AtomicBool::new(false),
            times: Mutex::new(Times {
                deadline,
                shortened_at: None,
            }),
            notify: Notify::new(),
            doubt: AtomicU64::new(0),
        })
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire) || Instant::now() >= self.times.lock().deadline
    }

    pub(crate) fn deadline(&self) -> Instant {
        self.times.lock().deadline
    }

    pub(crate) fn mark_lost(&self) {
        self.lost.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Lost, and known to hold nothing any more (see [`is_gone`](Self::is_gone)).
    fn mark_gone(&self) {
        self.gone.store(true, Ordering::Release);
        self.mark_lost();
    }

    /// `true` when the hold is known gone from Redis: its guards release nothing (a release
    /// would take a hold its owner acquired since).
    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// Moves the deadline forward to `to` after a successful renewal (or acquisition) sent at
    /// `sent_at`; a hold whose deadline has already passed stays lost, and a renewal sent
    /// before a call that shortened the deadline was answered changes nothing.
    pub(crate) fn extend(&self, sent_at: Instant, to: Instant) {
        let mut t = self.times.lock();
        if Instant::now() >= t.deadline {
            drop(t);
            self.mark_lost();
        } else if to > t.deadline && t.shortened_at.is_none_or(|at| sent_at >= at) {
            t.deadline = to;
        }
    }

    /// An owner-checked renewal of this very hold, answered at `at`, set the lock's TTL so that
    /// the hold lasts until `to`, later or sooner than before (a RedLock part's extension): the
    /// deadline is `to`, unless the hold is already lost.
    pub(crate) fn renewed_to(&self, at: Instant, to: Instant) {
        let mut t = self.times.lock();
        if Instant::now() >= t.deadline {
            drop(t);
            self.mark_lost();
            return;
        }
        t.shortened_at = Some(t.shortened_at.map_or(at, |s| s.max(at)));
        t.deadline = to;
        drop(t);
        self.notify.notify_waiters();
    }

    /// A call answered at `at` set the lock's TTL so that the hold lasts only until `to`: the
    /// deadline comes closer (never moves back) and waiters of [`wait_lost`](Self::wait_lost)
    /// look again.
    pub(crate) fn shorten(&self, at: Instant, to: Instant) {
        let mut t = self.times.lock();
        t.shortened_at = Some(t.shortened_at.map_or(at, |s| s.max(at)));
        if to < t.deadline {
            t.deadline = to;
            drop(t);
            self.notify.notify_waiters();
        }
    }

    /// Resolves once the hold is lost (for good: a doubt does not end this wait).
    #[allow(dead_code)] // guards wait with `wait_not_held` (see `doubt`)
    pub(crate) async fn wait_lost(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.lost.load(Ordering::Acquire) {
                return;
            }
            let deadline = self.deadline();
            if Instant::now() >= deadline {
                return;
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

/// How entries of a renewal call are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Layout {
    /// One entry per hold: `KEYS += keys`, `ARGV += field` (L-RENEW).
    PerHold,
    /// R-RENEW's entry: `KEYS += keys`, `ARGV += count, field…`. The script answers one flag
    /// per entry ("some listed reader is present"), so each entry lists one reader
    /// (`count` = 1): a lock with several readers of this client is listed once per reader,
    /// and a reader whose field is gone is told so even while another reader keeps the hash.
    PerLock,
    /// One entry per hold, with the hold's own values and this machine's clock:
    /// `KEYS += keys`, `ARGV += field, now (epoch ms), count, value…` (G-RENEW: a group
    /// multi-lock's deadlines are client-clock times).
    WithValues,
}

/// How a lock kind's holds are renewed: the script, the lock's keys for one entry, the layout.
/// The reply of such a call is one flag per entry: 1 renewed, 0 gone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RenewalShape {
    pub(crate) script: ScriptId,
    pub(crate) keys: Arc<[Key]>,
    pub(crate) layout: Layout,
    /// The hold's values ([`Layout::WithValues`]; empty otherwise).
    pub(crate) values: Arc<[String]>,
}

impl RenewalShape {
    /// One entry per hold with the lock's hash as its only key (L-RENEW).
    pub(crate) fn per_hold(name: &str) -> Self {
        Self {
            script: ScriptId::Renew,
            keys: Arc::from([Key::from(name)]),
            layout: Layout::PerHold,
            values: Arc::from([]),
        }
    }
}

/// This machine's wall clock in epoch ms.
fn epoch_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Builds one renewal call over `entries` (all of one script and layout): each entry is a
/// shape and the fields renewed under it (exactly one for [`Layout::PerHold`]).
pub(crate) fn renewal_call(entries: &[(&RenewalShape, Vec<&str>)], lease_ms: u64) -> ScriptCall {
    let script = entries.first().map_or(ScriptId::Renew, |(s, _)| s.script);
    let mut keys = Vec::with_capacity(entries.len());
    let mut args = Vec::with_capacity(entries.len() + 1);
    args.push(Value::from(lease_ms as i64));
    for (shape, fields) in entries {
        debug_assert_eq!(shape.script, script, "one script per call");
        keys.extend(shape.keys.iter().cloned());
        match shape.layout {
            Layout::PerHold => {}
            Layout::PerLock => args.push(Value::from(fields.len() as i64)),
            Layout::WithValues => {
                debug_assert_eq!(fields.len(), 1, "one hold per entry");
                args.extend(fields.iter().map(|f| Value::from(*f)));
                args.push(Value::from(epoch_ms()));
                args.push(Value::from(shape.values.len() as i64));
                args.extend(shape.values.iter().map(|v| Value::from(v.as_str())));
                continue;
            }
        }
        args.extend(fields.iter().map(|f| Value::from(*f)));
    }
    ScriptCall::new(script, keys, args)
}

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

/// A hold the watchdog renews: one owner's hold of one lock (not the acquisition's `Hold`),
/// with the count of registrations sharing it.
struct Renewed {
    count: u32,
    shape: RenewalShape,
    /// The kind's local hand-off queue, told when renewal finds the hold gone.
    queue: Option<&'static str>,
    /// When the latest acquisition registered here was sent.
    last_sent: Instant,
    epoch: u64,
    renewals: u64,
    loss: Arc<LossSignal>,
}

/// What the watchdog calls when it finds a hold gone whose kind has a local hand-off queue:
/// `(lock name, queue tag)`, so the queue's head attempts at once.
pub(crate) type OnGone = Box<dyn Fn(&str, &'static str) + Send + Sync>;

pub(crate) struct WatchdogState {
    holds: DashMap<HoldKey, Renewed>,
    /// The loss signals of the leased guards (no renewal) of each owner on each lock, told when
    /// a call of that owner sets the lock's TTL.
    leased: DashMap<HoldKey, Vec<Arc<LossSignal>>>,
    /// How the leased holds of a (lock, owner) are confirmed after a reconnect when their kind
    /// has no owner field in the lock's hash (a group multi-lock): a call answering the hold
    /// count. Absent: `HEXISTS <lock> <field>`.
    presence: DashMap<HoldKey, ScriptCall>,
    wake: Notify,
    /// A hold's deadline came closer than the next regular run: run now.
    urgent: Notify,
    next_epoch: AtomicU64,
    /// Script calls made by renewal runs (for tests and diagnostics).
    renew_calls: AtomicU64,
    on_gone: OnGone,
    /// Connection doubts: the epoch, the leased holds, the routing last seen.
    doubts: doubt::Doubts,
}

impl WatchdogState {
    fn new(on_gone: OnGone) -> Self {
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

/// One watchdog registration of a guard: its owner's loss signal for the lock, and the epoch
/// that names the registration (a guard of an earlier registration deregisters nothing).
pub(crate) struct Registration {
    pub(crate) loss: Arc<LossSignal>,
    pub(crate) epoch: u64,
}

/// The renewal service of one client.
pub(crate) struct Watchdog {
    state: Arc<WatchdogState>,
    timeout: Duration,
    task: tokio::task::JoinHandle<()>,
    /// The client's core, not kept alive by the watchdog (the doubt checks use it).
    core: Weak<Core>,
    /// The listener of the connection's events (see `doubt`).
    events: tokio::task::JoinHandle<()>,
}

impl Watchdog {
    pub(crate) fn start(core: Arc<Core>, on_gone: OnGone) -> Self {
        let state = Arc::new(WatchdogState::new(on_gone));
        let timeout = core.config().lock_watchdog_timeout;
        let task = tokio::spawn(run(core.clone(), state.clone()));
        let events = tokio::spawn(doubt::watch_connection(core.clone(), state.clone()));
        Self {
            state,
            timeout,
            task,
            core: Arc::downgrade(&core),
            events,
        }
    }

    /// Registers one watchdog-mode acquisition (re-entries included) whose script was sent at
    /// `sent_at`, and returns the owner's loss signal for this lock with the registration's
    /// epoch. `queue`: the kind's local hand-off queue (told if renewal finds the hold gone).
    pub(crate) fn register(
        &self,
        key: &HoldKey,
        shape: RenewalShape,
        queue: Option<&'static str>,
        sent_at: Instant,
    ) -> Registration {
        let deadline = valid_until(sent_at, self.timeout);
        // The name and field are shared with the hold (no copy per registration).
        let registration = {
            let mut hold = self
                .state
                .holds
                .entry(key.clone())
                .or_insert_with(|| Renewed {
                    count: 0,
                    shape,
                    queue,
                    last_sent: sent_at,
                    epoch: self.state.next_epoch.fetch_add(1, Ordering::Relaxed),
                    renewals: 0,
                    loss: LossSignal::new(deadline),
                });
            if hold.loss.is_lost() {
                // A hold already known lost (its deadline passed before the next run removed
                // it) is not revived: this acquisition starts a new registration, which the
                // guards of the lost one (another epoch) no longer count in.
                hold.loss = LossSignal::new(deadline);
                hold.epoch = self.state.next_epoch.fetch_add(1, Ordering::Relaxed);
                hold.renewals = 0;
                hold.count = 0;
            } else {
                hold.loss.extend(sent_at, deadline);
            }
            hold.count += 1;
            hold.last_sent = hold.last_sent.max(sent_at);
            Registration {
                loss: hold.loss.clone(),
                epoch: hold.epoch,
            }
        };
        self.state.wake.notify_one();
        registration
    }

    /// Removes one registration of an owner (every unlock attempt does this, whatever its
    /// outcome, so a failed unlock lets the lock expire within one timeout). `epoch`: only from
    /// that registration (a guard's own); `None`: from the current one (the Java-style unlock).
    pub(crate) fn deregister(&self, key: &HoldKey, epoch: Option<u64>) {
        self.state.holds.remove_if_mut(key, |_, hold| {
            if epoch.is_some_and(|e| e != hold.epoch) {
                return false;
            }
            hold.count = hold.count.saturating_sub(1);
            hold.count == 0
        });
    }

    /// Follows a leased guard's loss signal, so calls of its owner that set the lock's TTL
    /// reach it (see [`ttl_set`](Self::ttl_set)) until [`untrack_leased`](Self::untrack_leased).
    pub(crate) fn track_leased(&self, key: &HoldKey, loss: &Arc<LossSignal>) {
        self.state
            .leased
            .entry(key.clone())
            .or_default()
            .push(loss.clone());
    }

    /// Stops following a leased guard's loss signal.
    pub(crate) fn untrack_leased(&self, key: &HoldKey, loss: &Arc<LossSignal>) {
        let gone = self.state.leased.remove_if_mut(key, |_, signals| {
            signals.retain(|s| !Arc::ptr_eq(s, loss));
            signals.is_empty()
        });
        if gone.is_some() {
            self.state.presence.remove(key);
        }
    }

    /// How the leased holds of this (lock, owner) are confirmed after a reconnect, for a kind
    /// whose hold is not one field of the lock's hash: `count` answers the owner's hold count
    /// (more than 0: held). Kept while leased holds are followed.
    pub(crate) fn confirm_leased_with(&self, key: &HoldKey, count: ScriptCall) {
        self.state.presence.insert(key.clone(), count);
    }

    /// A call of the owner `field` on the lock `name`, sent at `sent_at` and answered at
    /// `answered_at`, set the lock's TTL to `lease` (a re-entry, a partial release, an
    /// explicit renewal): every guard of that owner on that lock now lasts at most until
    /// `sent_at + lease − drift`. A watchdog hold whose deadline comes closer than its next
    /// regular renewal is renewed at once.
    pub(crate) fn ttl_set(
        &self,
        key: &HoldKey,
        sent_at: Instant,
        lease: Duration,
        answered_at: Instant,
    ) {
        let to = valid_until(sent_at, lease);
        if let Some(signals) = self.state.leased.get(key) {
            for loss in signals.iter() {
                loss.shorten(answered_at, to);
            }
        }
        let urgent = self.state.holds.get(key).is_some_and(|hold| {
            hold.loss.shorten(answered_at, to);
            // The regular runs keep a deadline at least two periods ahead.
            to < crate::config::later(Instant::now(), self.timeout / 3 * 2)
        });
        if urgent {
            self.state.urgent.notify_one();
        }
    }

    /// The holds `key` names are known to hold nothing in Redis any more (an acquisition of
    /// their owner found the owner's count lower than every hold this client knows of, or
    /// knew it at zero): the watchdog registration is dropped and its guards, with every
    /// leased guard of `key`, are lost and *gone* (their unlocks release nothing: the owner's
    /// count in Redis is a later acquisition's). Called before that acquisition's attempt, so
    /// it starts a registration of its own. A hold in doubt is lost too: a later confirmation
    /// would only find the new hold's field.
    pub(crate) fn holds_gone(&self, key: &HoldKey) {
        if let Some((_, hold)) = self.state.holds.remove(key) {
            if !hold.loss.is_lost() {
                crate::observe::lock_lost(&key.name, &key.field, "its owner's count was lower");
            }
            hold.loss.mark_gone();
            if let Some(tag) = hold.queue {
                (self.state.on_gone)(&key.name, tag);
            }
        }
        if let Some(signals) = self.state.leased.get(key) {
            for loss in signals.iter() {
                if !loss.is_lost() {
                    crate::observe::lock_lost(&key.name, &key.field, "its owner's count was lower");
                }
                loss.mark_gone();
            }
        }
    }

    /// Drops every registration of a lock (forced unlock); their holders, and the lock's leased
    /// holders, are told it is lost.
    pub(crate) fn remove_lock(&self, name: &str) {
        let keys: Vec<HoldKey> = self
            .state
            .holds
            .iter()
            .filter(|e| &*e.key().name == name)
            .map(|e| e.key().clone())
            .collect();
        for key in keys {
            if let Some((_, hold)) = self.state.holds.remove(&key) {
                hold.loss.mark_lost();
            }
        }
        // The leased guards of the lock too (they stay followed until they go).
        for signals in self.state.leased.iter().filter(|e| &*e.key().name == name) {
            for loss in signals.iter() {
                loss.mark_lost();
            }
        }
    }

    /// Whether the hold `key` is being renewed.
    pub(crate) fn renews(&self, key: &HoldKey) -> bool {
        self.state.holds.contains_key(key)
    }

    /// Number of (lock, owner) pairs being renewed.
    pub(crate) fn len(&self) -> usize {
        self.state.holds.len()
    }

    /// Renewal script calls made so far.
    pub(crate) fn renew_calls(&self) -> u64 {
        self.state.renew_calls.load(Ordering::Relaxed)
    }

    /// Stops renewing everything (client shutdown): the locks expire one timeout later.
    pub(crate) fn stop(&self) {
        self.task.abort();
        self.events.abort();
        self.state.holds.clear();
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.task.abort();
        self.events.abort();
    }
}

async fn run(core: Arc<Core>, state: Arc<WatchdogState>) {
    let config = core.config();
    let timeout = config.lock_watchdog_timeout;
    let period = timeout / 3;
    let retry = config
        .retry_delay
        .min(period)
        .max(Duration::from_millis(10));
    let mut delay = period;
    loop {
        if state.holds.is_empty() {
            doubt::forget_urgent(&state);
            state.wake.notified().await;
            // A hold came: its first renewal is one period away. Not idle again before that,
            // even if it is gone by now: with short holds coming and going (a hot lock taken
            // in turn, one owner locking in a loop), idling whenever none is held meant one
            // wake-up of this task, on another thread, per acquisition.
            delay = period;
        }
        doubt::pause(&state, delay).await;
        let failed = renew_all(&core, &state, timeout).await;
        delay = if failed { retry } else { period };
    }
}

/// A hold due for renewal, as collected at the start of a run.
struct Item {
    key: HoldKey,
    shape: RenewalShape,
    epoch: u64,
    loss: Arc<LossSignal>,
}

/// One renewal call and, per reply flag, the item (index) it speaks for.
struct Batch {
    call: ScriptCall,
    entries: Vec<usize>,
}

/// One renewal run: collect, batch, send every batch at once, apply. Returns `true` if any
/// batch failed.
async fn renew_all(core: &Core, state: &WatchdogState, timeout: Duration) -> bool {
    let items = collect(state, Instant::now(), core.config().max_renewals);
    if items.is_empty() {
        return false;
    }
    let batches = batch(
        &items,
        core.config().lock_watchdog_batch_size,
        timeout.as_millis() as u64,
        core.is_clustered(),
    );
    state
        .renew_calls
        .fetch_add(batches.len() as u64, Ordering::Relaxed);
    let lease_ms = timeout.as_millis() as u64;
    let items = &items;
    let calls = batches.into_iter().map(|b| async move {
        let sent_at = Instant::now();
        let sent_epoch = state.doubts.current();
        if b.entries.len() < 2 || !core.is_clustered() {
            return vec![(
                b.entries,
                sent_at,
                sent_epoch,
                core.run_flags(b.call, "").await,
            )];
        }
        match core.run_flags_or_split(b.call).await {
            Ok(Some(flags)) => vec![(b.entries, sent_at, sent_epoch, Ok(flags))],
            Err(e) => vec![(b.entries, sent_at, sent_epoch, Err(e))],
            // The slot is being migrated and some of the batch's locks have moved: one call
            // per lock (each one's keys move together, so each goes where they are).
            Ok(None) => {
                let one_by_one = b.entries.into_iter().map(|entry| async move {
                    let item = &items[entry];
                    let call = renewal_call(&[(&item.shape, vec![&*item.key.field])], lease_ms);
                    let sent_at = Instant::now();
                    let sent_epoch = state.doubts.current();
                    let reply = core.run_flags(call, "").await;
                    (vec![entry], sent_at, sent_epoch, reply)
                });
                futures::future::join_all(one_by_one).await
            }
        }
    });
    let mut failed = false;
    let replies = futures::future::join_all(calls).await.into_iter().flatten();
    for (entries, sent_at, sent_epoch, reply) in replies {
        match reply {
            Ok(flags) if flags.len() == entries.len() => {
                let until = valid_until(sent_at, timeout);
                for (&i, flag) in entries.iter().zip(flags) {
                    apply(state, &items[i], flag == 1, sent_at, until);
                    if flag == 1 {
                        doubt::confirmed(&items[i], sent_epoch);
                    }
                }
            }
            Ok(flags) => {
                failed = true;
                log::warn!(
                    "renewal script answered {} flags for {} entries",
                    flags.len(),
                    entries.len()
                );
            }
            Err(e) => {
                failed = true;
                crate::observe::renewal_failed(entries.len(), &e);
                let batch: Vec<&Item> = entries.iter().map(|&i| &items[i]).collect();
                doubt::renewal_failed(state, &batch, &e);
            }
        }
    }
    failed
}

/// Takes the holds due: drops (and reports lost) those whose deadline has passed, skips those
/// that reached `max_renewals` (they stay registered until their deadline passes).
fn collect(state: &WatchdogState, now: Instant, max_renewals: Option<u64>) -> Vec<Item> {
    let mut items = Vec::with_capacity(state.holds.len());
    let mut expired = Vec::new();
    for entry in state.holds.iter() {
        let hold = entry.value();
        if hold.loss.deadline() <= now || hold.loss.is_lost() {
            expired.push((entry.key().clone(), hold.epoch));
        } else if max_renewals.is_none_or(|m| hold.renewals < m) {
            items.push(Item {
                key: entry.key().clone(),
                shape: hold.shape.clone(),
                epoch: hold.epoch,
                loss: hold.loss.clone(),
            });
        }
    }
    for (key, epoch) in expired {
        if let Some((_, hold)) = state.holds.remove_if(&key, |_, h| h.epoch == epoch) {
            crate::observe::lock_lost(&key.name, &key.field, "not renewed before its deadline");
            hold.loss.mark_lost();
        }
    }
    items
}

/// Groups items into renewal calls of at most `size` entries each, one entry per item (per
/// hold: a read lock with several readers of this client is listed once per reader, so each
/// reply flag is one reader's); on a cluster, calls are per slot, so a period costs
/// ⌈holds per slot / size⌉ calls for each slot in use.
fn batch(items: &[Item], size: usize, lease_ms: u64, clustered: bool) -> Vec<Batch> {
    // One script per call, and on a cluster one slot per call (a script may only touch keys of
    // one slot): a stable sort keeps each call's entries in collection order.
    let call_of = |shape: &RenewalShape| {
        let slot = match (clustered, shape.keys.first()) {
            (true, Some(key)) => crate::conn::cluster::slot_of(key),
            _ => 0,
        };
        (shape.script as usize, slot)
    };
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by_key(|&i| call_of(&items[i].shape));
    let mut batches = Vec::new();
    let mut rest = &order[..];
    while let Some(&first) = rest.first() {
        let key = call_of(&items[first].shape);
        let len = rest
            .iter()
            .take_while(|&&i| call_of(&items[i].shape) == key)
            .count();
        let (run, tail) = rest.split_at(len);
        rest = tail;
        for chunk in run.chunks(size.max(1)) {
            let described: Vec<(&RenewalShape, Vec<&str>)> = chunk
                .iter()
                .map(|&i| (&items[i].shape, vec![&*items[i].key.field]))
                .collect();
            batches.push(Batch {
                call: renewal_call(&described, lease_ms),
                entries: chunk.to_vec(),
            });
        }
    }
    batches
}

/// Applies one entry's flag to one item: renewed moves its deadline, gone drops it and tells
/// its holder. Only the registration the item was collected from is touched (epoch check).
/// A hold found gone also tells its kind's local queue, whose head then attempts at once (no
/// unlock message comes when a field is deleted, evicted or lost in a failover).
fn apply(
    state: &WatchdogState,
    item: &Item,
    renewed: bool,
    sent_at: Instant,
    valid_until: Instant,
) {
    if renewed {
        if let Some(mut hold) = state.holds.get_mut(&item.key) {
            if hold.epoch == item.epoch {
                hold.renewals += 1;
                hold.loss.extend(sent_at, valid_until);
                crate::observe::renewed();
            }
        }
    } else if let Some((_, hold)) = state
        .holds
        .remove_if(&item.key, |_, h| h.epoch == item.epoch)
    {
        crate::observe::lock_lost(&item.key.name, &item.key.field, "renewal found it gone");
        if hold.last_sent <= sent_at {
            // Every acquisition of this registration ran before the renewal: all gone.
            item.loss.mark_gone();
        } else {
            // One may have run after it (and be held): lost, but its guards still release.
            item.loss.mark_lost();
        }
        if let Some(tag) = hold.queue {
            (state.on_gone)(&item.key.name, tag);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::scripts::tests::assert_matches_header;

    pub(super) fn state() -> WatchdogState {
        WatchdogState::new(Box::new(|_, _| {}))
    }

    fn item(name: &str, field: &str, shape: RenewalShape) -> Item {
        Item {
            key: HoldKey::new(name.into(), field.into(), Arc::from([])),
            shape,
            epoch: 1,
            loss: LossSignal::new(Instant::now() + Duration::from_secs(10)),
        }
    }

    fn per_lock(name: &str, prefix: &str) -> RenewalShape {
        RenewalShape {
            script: ScriptId::ReadRenew,
            keys: Arc::from([Key::from(name), Key::from(prefix)]),
            layout: Layout::PerLock,
            values: Arc::from([]),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_is_send_time_plus_timeout_minus_drift() {
        let sent = Instant::now();
        let timeout = Duration::from_secs(30);
        // 30 s × 1 % + 2 ms = 302 ms.
        assert_eq!(
            valid_until(sent, timeout),
            sent + Duration::from_millis(29_698)
        );
        assert_eq!(
            valid_until(sent, Duration::from_millis(1)),
            sent,
            "a lease shorter than the drift is valid for no time at all"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_loss_signal_extends_until_its_deadline_passes_and_never_comes_back() {
        let start = Instant::now();
        let loss = LossSignal::new(start + Duration::from_secs(1));
        loss.extend(start, start + Duration::from_secs(2));
        assert_eq!(loss.deadline(), start + Duration::from_secs(2));
        loss.extend(start, start + Duration::from_millis(1500));
        assert_eq!(
            loss.deadline(),
            start + Duration::from_secs(2),
            "never back"
        );
        tokio::time::advance(Duration::from_millis(1999)).await;
        assert!(!loss.is_lost());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(loss.is_lost(), "lost at the deadline");
        // A renewal that arrives after the deadline does not revive the hold.
        loss.extend(Instant::now(), Instant::now() + Duration::from_secs(10));
        assert!(loss.is_lost());
        assert!(loss.lost.load(Ordering::Acquire), "marked lost for good");
    }

    #[tokio::test(start_paused = true)]
    async fn wait_lost_resolves_at_the_deadline_or_on_mark_lost() {
        let start = Instant::now();
        let loss = LossSignal::new(start + Duration::from_secs(3));
        loss.wait_lost().await;
        assert_eq!(start.elapsed(), Duration::from_secs(3));

        let loss = LossSignal::new(Instant::now() + Duration::from_secs(60));
        let waiter = {
            let loss = loss.clone();
            tokio::spawn(async move { loss.wait_lost().await })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiter.is_finished());
        loss.mark_lost();
        tokio::time::timeout(Duration::from_millis(1), waiter)
            .await
            .expect("woken by mark_lost")
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_shortened_deadline_wakes_wait_lost_and_ignores_renewals_sent_before_it() {
        let start = Instant::now();
        let loss = LossSignal::new(start + Duration::from_secs(30));
        let waiter = {
            let loss = loss.clone();
            tokio::spawn(async move {
                loss.wait_lost().await;
                Instant::now()
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        // A call sent at 100 ms, answered at 110 ms, set a 1 s TTL.
        let sent = Instant::now();
        tokio::time::advance(Duration::from_millis(10)).await;
        loss.shorten(Instant::now(), sent + Duration::from_secs(1));
        assert_eq!(loss.deadline(), sent + Duration::from_secs(1));
        loss.shorten(Instant::now(), sent + Duration::from_secs(5));
        assert_eq!(loss.deadline(), sent + Duration::from_secs(1), "never back");
        // A renewal sent before the answer may have run before that call: it extends nothing.
        loss.extend(sent, sent + Duration::from_secs(30));
        assert_eq!(loss.deadline(), sent + Duration::from_secs(1));
        // One sent after it does.
        loss.extend(Instant::now(), Instant::now() + Duration::from_secs(30));
        assert_eq!(loss.deadline(), Instant::now() + Duration::from_secs(30));
        loss.shorten(Instant::now(), Instant::now() + Duration::from_millis(200));
        let at = waiter.await.unwrap();
        assert_eq!(
            at - start,
            Duration::from_millis(310),
            "wait_lost follows the shortened deadline"
        );
    }

    fn watchdog(timeout: Duration) -> Watchdog {
        Watchdog {
            state: Arc::new(state()),
            timeout,
            task: tokio::spawn(async {}),
            core: Weak::new(),
            events: tokio::spawn(async {}),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_guard_of_a_lost_registration_deregisters_nothing_of_the_next() {
        let wd = watchdog(Duration::from_secs(1));
        let key = HoldKey::new("n".into(), "f".into(), Arc::from([]));
        let shape = || RenewalShape::per_hold("n");
        let stale = wd.register(&key, shape(), None, Instant::now());
        stale.loss.mark_lost();
        let next = wd.register(&key, shape(), None, Instant::now());
        assert_ne!(stale.epoch, next.epoch);
        assert!(!next.loss.is_lost());
        wd.deregister(&key, Some(stale.epoch));
        assert_eq!(
            wd.len(),
            1,
            "the stale guard leaves the new registration alone"
        );
        wd.deregister(&key, Some(next.epoch));
        assert_eq!(
            wd.len(),
            0,
            "counted from one: the lost registration's guard is not"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_found_gone_is_gone_only_if_every_acquisition_ran_before_the_renewal() {
        let wd = watchdog(Duration::from_secs(30));
        let key = HoldKey::new("n".into(), "f".into(), Arc::from([]));
        let shape = || RenewalShape::per_hold("n");
        let collected = |r: &Registration| {
            let mut it = item("n", "f", shape());
            it.epoch = r.epoch;
            it.loss = r.loss.clone();
            it
        };
        let until = Instant::now() + Duration::from_secs(30);
        let first = wd.register(&key, shape(), None, Instant::now());
        tokio::time::advance(Duration::from_millis(10)).await;
        let renewal_sent = Instant::now();
        apply(&wd.state, &collected(&first), false, renewal_sent, until);
        assert!(first.loss.is_gone(), "acquired before the renewal was sent");

        let second = wd.register(&key, shape(), None, Instant::now());
        let renewal_sent = Instant::now();
        tokio::time::advance(Duration::from_millis(10)).await;
        // A re-entry sent while that renewal was in flight may have run after it.
        wd.register(&key, shape(), None, Instant::now());
        apply(&wd.state, &collected(&second), false, renewal_sent, until);
        assert!(second.loss.is_lost());
        assert!(!second.loss.is_gone(), "its guards still release");
    }

    #[tokio::test(start_paused = true)]
    async fn holds_found_gone_by_their_owner_are_lost_for_good_and_release_nothing() {
        let wd = watchdog(Duration::from_secs(30));
        let key = HoldKey::new("n".into(), "f".into(), Arc::from([]));
        let other = HoldKey::new("n".into(), "f".into(), Arc::from(["v".to_owned()]));
        let renewed = wd.register(&key, RenewalShape::per_hold("n"), None, Instant::now());
        let leased = LossSignal::new(Instant::now() + Duration::from_secs(20));
        let others = LossSignal::new(Instant::now() + Duration::from_secs(20));
        wd.track_leased(&key, &leased);
        wd.track_leased(&other, &others);
        // In doubt (a connection drop): a later confirmation would find the new hold's field.
        assert!(leased.doubt(1));
        wd.holds_gone(&key);
        assert!(renewed.loss.is_gone() && leased.is_gone());
        assert_eq!(wd.len(), 0, "the registration is dropped");
        assert!(!leased.confirm(1));
        assert_eq!(leased.state(), HoldState::Lost, "never confirmed again");
        assert_eq!(others.state(), HoldState::Held, "another set of the owner");
        // The next acquisition starts a registration of its own.
        let next = wd.register(&key, RenewalShape::per_hold("n"), None, Instant::now());
        assert_ne!(next.epoch, renewed.epoch);
        assert_eq!(next.loss.state(), HoldState::Held);
        wd.untrack_leased(&key, &leased);
        wd.untrack_leased(&other, &others);
    }

    #[tokio::test(start_paused = true)]
    async fn a_ttl_set_reaches_every_guard_of_the_owner_and_hurries_the_watchdog() {
        let timeout = Duration::from_secs(30);
        let wd = watchdog(timeout);
        let key = HoldKey::new("n".into(), "f".into(), Arc::from([]));
        let other = HoldKey::new("n".into(), "g".into(), Arc::from([]));
        let held = wd.register(&key, RenewalShape::per_hold("n"), None, Instant::now());
        let leased = LossSignal::new(Instant::now() + Duration::from_secs(20));
        let others = LossSignal::new(Instant::now() + Duration::from_secs(20));
        wd.track_leased(&key, &leased);
        wd.track_leased(&other, &others);
        // A 25 s TTL: the regular runs still renew in time.
        let sent = Instant::now();
        wd.ttl_set(&key, sent, Duration::from_secs(25), sent);
        assert_eq!(leased.deadline(), sent + Duration::from_secs(20));
        assert_eq!(
            held.loss.deadline(),
            valid_until(sent, Duration::from_secs(25))
        );
        assert!(futures::FutureExt::now_or_never(wd.state.urgent.notified()).is_none());
        // A 1 s TTL: every guard of that owner learns it, the renewal comes at once.
        wd.ttl_set(&key, sent, Duration::from_secs(1), sent);
        let to = valid_until(sent, Duration::from_secs(1));
        assert_eq!((leased.deadline(), held.loss.deadline()), (to, to));
        assert_eq!(
            others.deadline(),
            sent + Duration::from_secs(20),
            "another owner's"
        );
        assert!(futures::FutureExt::now_or_never(wd.state.urgent.notified()).is_some());
        wd.untrack_leased(&key, &leased);
        wd.untrack_leased(&other, &others);
        assert!(wd.state.leased.is_empty());
    }

    #[test]
    fn per_hold_batches_list_one_key_and_one_field_per_hold() {
        let items: Vec<Item> = (0..5)
            .map(|i| {
                item(
                    &format!("n{i}"),
                    &format!("f{i}"),
                    RenewalShape::per_hold(&format!("n{i}")),
                )
            })
            .collect();
        let batches = batch(&items, 2, 30_000, false);
        assert_eq!(batches.len(), 3, "⌈5 / 2⌉ calls");
        let first = &batches[0];
        assert_matches_header(&first.call);
        assert_eq!(first.call.script, ScriptId::Renew);
        assert_eq!(first.call.keys, vec![Key::from("n0"), Key::from("n1")]);
        assert_eq!(
            first.call.args,
            vec![Value::from(30_000i64), Value::from("f0"), Value::from("f1")]
        );
        assert_eq!(first.entries, vec![0, 1]);
        assert_eq!(batches[2].entries, vec![4]);
    }

    #[test]
    fn per_lock_batches_list_each_reader_of_a_lock_as_an_entry_of_its_own() {
        let items = vec![
            item("a", "r1", per_lock("a", "{a}")),
            item("b", "r1", per_lock("b", "{b}")),
            item("a", "r2", per_lock("a", "{a}")),
            item("c", "w", RenewalShape::per_hold("c")),
        ];
        let batches = batch(&items, 100, 9_000, false);
        assert_eq!(batches.len(), 2, "one call per script");
        let read = batches
            .iter()
            .find(|b| b.call.script == ScriptId::ReadRenew)
            .unwrap();
        assert_matches_header(&read.call);
        // The lock `a` is listed once per reader: one flag per reader (R-RENEW's reply is one
        // flag per entry, "some listed reader is present").
        assert_eq!(
            read.call.keys,
            ["a", "{a}", "b", "{b}", "a", "{a}"].map(Key::from).to_vec()
        );
        assert_eq!(
            read.call.args,
            vec![
                Value::from(9_000i64),
                Value::from(1i64),
                Value::from("r1"),
                Value::from(1i64),
                Value::from("r1"),
                Value::from(1i64),
                Value::from("r2"),
            ]
        );
        assert_eq!(read.entries, vec![0, 1, 2]);
    }

    #[test]
    fn on_a_cluster_each_call_touches_one_slot() {
        // Ten locks over a few slots, batch size 3.
        let items: Vec<Item> = (0..10)
            .map(|i| {
                let name = format!("{{tag{}}}:lock{i}", i % 3);
                item(&name, "f", RenewalShape::per_hold(&name))
            })
            .collect();
        let batches = batch(&items, 3, 30_000, true);
        for b in &batches {
            assert!(
                crate::conn::cluster::one_slot(&b.call.keys),
                "{:?}",
                b.call.keys
            );
            assert_matches_header(&b.call);
        }
        // Slots hold 4, 3 and 3 locks: ⌈4/3⌉ + 1 + 1 calls.
        assert_eq!(batches.len(), 4);
        let renewed: usize = batches.iter().map(|b| b.entries.len()).sum();
        assert_eq!(renewed, 10);
    }

    #[tokio::test(start_paused = true)]
    async fn collect_drops_expired_holds_and_skips_those_at_max_renewals() {
        let state = state();
        let now = Instant::now();
        let add = |name: &str, deadline: Instant, renewals: u64| {
            state.holds.insert(
                HoldKey::new(name.into(), "f".into(), Arc::from([])),
                Renewed {
                    count: 1,
                    shape: RenewalShape::per_hold(name),
                    queue: None,
                    last_sent: now,
                    epoch: 1,
                    renewals,
                    loss: LossSignal::new(deadline),
                },
            );
        };
        add("due", now + Duration::from_secs(5), 0);
        add("expired", now, 0);
        add("capped", now + Duration::from_secs(5), 3);
        let items = collect(&state, now, Some(3));
        let names: Vec<&str> = items.iter().map(|i| &*i.key.name).collect();
        assert_eq!(names, vec!["due"]);
        assert_eq!(state.holds.len(), 2, "the expired hold is dropped");
    }

    #[tokio::test(start_paused = true)]
    async fn apply_renews_or_reports_lost_only_the_collected_registration() {
        let state = state();
        let key = HoldKey::new("n".into(), "f".into(), Arc::from([]));
        let loss = LossSignal::new(Instant::now() + Duration::from_secs(1));
        state.holds.insert(
            key.clone(),
            Renewed {
                count: 1,
                shape: RenewalShape::per_hold("n"),
                queue: None,
                last_sent: Instant::now(),
                epoch: 7,
                renewals: 0,
                loss: loss.clone(),
            },
        );
        let mut it = item("n", "f", RenewalShape::per_hold("n"));
        it.epoch = 7;
        it.loss = loss.clone();
        let later = Instant::now() + Duration::from_secs(5);
        apply(&state, &it, true, Instant::now(), later);
        assert_eq!(loss.deadline(), later);
        assert_eq!(state.holds.get(&key).unwrap().renewals, 1);

        let mut stale = item("n", "f", RenewalShape::per_hold("n"));
        stale.epoch = 6; // collected from an earlier registration
        apply(&state, &stale, false, Instant::now(), later);
        assert!(
            state.holds.contains_key(&key),
            "a stale reply changes nothing"
        );

        apply(&state, &it, false, Instant::now(), later);
        assert!(!state.holds.contains_key(&key));
        assert!(loss.is_lost());
    }
}
