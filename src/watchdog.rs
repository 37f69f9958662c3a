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
//! renewal script, the lock's keys for one entry, and whether entries are per hold or per lock).
//!
//! Deadline rule: a hold is valid until the send time of its last successful acquire or renewal
//! plus the timeout minus a drift of `timeout × 0.01 + 2 ms`, on the monotonic clock. Redis
//! starts the TTL no earlier than the send time, so the holder always learns of a loss before
//! anybody else can take the lock (barring server clock jumps, restarts and failover).

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use dashmap::DashMap;
use fred::types::{Key, Value};
use parking_lot::Mutex;
use tokio::{sync::Notify, time::Instant};

use crate::{
    core::Core,
    scripts::{ScriptCall, ScriptId},
};

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
    deadline: Mutex<Instant>,
    notify: Notify,
}

impl LossSignal {
    pub(crate) fn new(deadline: Instant) -> Arc<Self> {
        Arc::new(Self {
            lost: AtomicBool::new(false),
            deadline: Mutex::new(deadline),
            notify: Notify::new(),
        })
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire) || Instant::now() >= *self.deadline.lock()
    }

    pub(crate) fn deadline(&self) -> Instant {
        *self.deadline.lock()
    }

    pub(crate) fn mark_lost(&self) {
        self.lost.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Moves the deadline forward after a successful renewal; a hold whose deadline has already
    /// passed stays lost.
    pub(crate) fn extend(&self, to: Instant) {
        let mut d = self.deadline.lock();
        if Instant::now() >= *d {
            drop(d);
            self.mark_lost();
        } else if to > *d {
            *d = to;
        }
    }

    /// Resolves once the hold is lost.
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
    /// One entry per lock: `KEYS += keys`, `ARGV += count, field…` (R-RENEW).
    PerLock,
}

/// How a lock kind's holds are renewed: the script, the lock's keys for one entry, the layout.
/// The reply of such a call is one flag per entry: 1 renewed, 0 gone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RenewalShape {
    pub(crate) script: ScriptId,
    pub(crate) keys: Arc<[Key]>,
    pub(crate) layout: Layout,
}

impl RenewalShape {
    /// One entry per hold with the lock's hash as its only key (L-RENEW).
    pub(crate) fn per_hold(name: &str) -> Self {
        Self {
            script: ScriptId::Renew,
            keys: Arc::from([Key::from(name)]),
            layout: Layout::PerHold,
        }
    }
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
        if shape.layout == Layout::PerLock {
            args.push(Value::from(fields.len() as i64));
        }
        args.extend(fields.iter().map(|f| Value::from(*f)));
    }
    ScriptCall::new(script, keys, args)
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct HoldKey {
    name: Arc<str>,
    field: Arc<str>,
}

struct Hold {
    count: u32,
    shape: RenewalShape,
    epoch: u64,
    renewals: u64,
    loss: Arc<LossSignal>,
}

pub(crate) struct WatchdogState {
    holds: DashMap<HoldKey, Hold>,
    wake: Notify,
    next_epoch: AtomicU64,
    /// Script calls made by renewal runs (for tests and diagnostics).
    renew_calls: AtomicU64,
}

/// The renewal service of one client.
pub(crate) struct Watchdog {
    state: Arc<WatchdogState>,
    timeout: Duration,
    task: tokio::task::JoinHandle<()>,
}

impl Watchdog {
    pub(crate) fn start(core: Arc<Core>) -> Self {
        let state = Arc::new(WatchdogState {
            holds: DashMap::new(),
            wake: Notify::new(),
            next_epoch: AtomicU64::new(1),
            renew_calls: AtomicU64::new(0),
        });
        let timeout = core.config().lock_watchdog_timeout;
        let task = tokio::spawn(run(core, state.clone()));
        Self {
            state,
            timeout,
            task,
        }
    }

    /// Registers one watchdog-mode acquisition (re-entries included) whose script was sent at
    /// `sent_at`, and returns the owner's loss signal for this lock.
    pub(crate) fn register(
        &self,
        name: &Arc<str>,
        field: &Arc<str>,
        shape: RenewalShape,
        sent_at: Instant,
    ) -> Arc<LossSignal> {
        let deadline = valid_until(sent_at, self.timeout);
        // The name and field are shared with the hold (no copy per registration).
        let key = HoldKey {
            name: name.clone(),
            field: field.clone(),
        };
        let loss = {
            let mut hold = self.state.holds.entry(key).or_insert_with(|| Hold {
                count: 0,
                shape,
                epoch: self.state.next_epoch.fetch_add(1, Ordering::Relaxed),
                renewals: 0,
                loss: LossSignal::new(deadline),
            });
            hold.count += 1;
            if hold.loss.is_lost() {
                // A hold already known lost (its deadline passed before the next run removed
                // it) is not revived: this acquisition starts a new registration.
                hold.loss = LossSignal::new(deadline);
                hold.epoch = self.state.next_epoch.fetch_add(1, Ordering::Relaxed);
                hold.renewals = 0;
            } else {
                hold.loss.extend(deadline);
            }
            hold.loss.clone()
        };
        self.state.wake.notify_one();
        loss
    }

    /// Removes one registration of an owner (every unlock attempt does this, whatever its
    /// outcome, so a failed unlock lets the lock expire within one timeout).
    pub(crate) fn deregister(&self, name: &Arc<str>, field: &Arc<str>) {
        let key = HoldKey {
            name: name.clone(),
            field: field.clone(),
        };
        self.state.holds.remove_if_mut(&key, |_, hold| {
            hold.count = hold.count.saturating_sub(1);
            hold.count == 0
        });
    }

    /// Drops every registration of a lock (forced unlock); their holders are told it is lost.
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
        self.state.holds.clear();
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.task.abort();
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
            state.wake.notified().await;
            delay = period;
            continue;
        }
        tokio::time::sleep(delay).await;
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

/// One renewal call and, per reply flag, the items (indices) it speaks for.
struct Batch {
    call: ScriptCall,
    entries: Vec<Vec<usize>>,
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
        if b.entries.len() < 2 || !core.is_clustered() {
            return vec![(b.entries, sent_at, core.run_flags(b.call, "").await)];
        }
        match core.run_flags_or_split(b.call).await {
            Ok(Some(flags)) => vec![(b.entries, sent_at, Ok(flags))],
            Err(e) => vec![(b.entries, sent_at, Err(e))],
            // The slot is being migrated and some of the batch's locks have moved: one call
            // per lock (each one's keys move together, so each goes where they are).
            Ok(None) => {
                let one_by_one = b.entries.into_iter().map(|entry| async move {
                    let shape = &items[entry[0]].shape;
                    let fields = entry.iter().map(|&i| &*items[i].key.field).collect();
                    let call = renewal_call(&[(shape, fields)], lease_ms);
                    let sent_at = Instant::now();
                    let reply = core.run_flags(call, "").await;
                    (vec![entry], sent_at, reply)
                });
                futures::future::join_all(one_by_one).await
            }
        }
    });
    let mut failed = false;
    let replies = futures::future::join_all(calls).await.into_iter().flatten();
    for (entries, sent_at, reply) in replies {
        match reply {
            Ok(flags) if flags.len() == entries.len() => {
                let until = valid_until(sent_at, timeout);
                for (entry, flag) in entries.iter().zip(flags) {
                    for &i in entry {
                        apply(state, &items[i], flag == 1, until);
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

/// Groups items into renewal calls of at most `size` entries each: per-hold shapes one entry
/// per item, per-lock shapes one entry per lock with all of its items; on a cluster, calls are
/// per slot, so a period costs ⌈holds per slot / size⌉ calls for each slot in use.
fn batch(items: &[Item], size: usize, lease_ms: u64, clustered: bool) -> Vec<Batch> {
    // Entries, keyed by (script, layout) and, for per-lock shapes, by the lock's keys.
    let mut groups: Vec<(&RenewalShape, Vec<usize>)> = Vec::new();
    let mut per_lock: std::collections::HashMap<&RenewalShape, usize> = Default::default();
    for (i, item) in items.iter().enumerate() {
        match item.shape.layout {
            Layout::PerHold => groups.push((&item.shape, vec![i])),
            Layout::PerLock => match per_lock.get(&item.shape) {
                Some(&g) => groups[g].1.push(i),
                None => {
                    per_lock.insert(&item.shape, groups.len());
                    groups.push((&item.shape, vec![i]));
                }
            },
        }
    }
    // One script per call, and on a cluster one slot per call (a script may only touch keys of
    // one slot): a stable sort keeps each call's entries in collection order.
    let call_of = |shape: &RenewalShape| {
        let slot = match (clustered, shape.keys.first()) {
            (true, Some(key)) => crate::core::slot_of(key),
            _ => 0,
        };
        (shape.script as usize, slot)
    };
    groups.sort_by_key(|(shape, _)| call_of(shape));
    let mut batches = Vec::new();
    let mut rest = &groups[..];
    while let Some((first, _)) = rest.first() {
        let key = call_of(first);
        let len = rest.iter().take_while(|(s, _)| call_of(s) == key).count();
        let (run, tail) = rest.split_at(len);
        rest = tail;
        for chunk in run.chunks(size.max(1)) {
            let described: Vec<(&RenewalShape, Vec<&str>)> = chunk
                .iter()
                .map(|(shape, members)| {
                    let fields = members.iter().map(|&i| &*items[i].key.field).collect();
                    (*shape, fields)
                })
                .collect();
            batches.push(Batch {
                call: renewal_call(&described, lease_ms),
                entries: chunk.iter().map(|(_, m)| m.clone()).collect(),
            });
        }
    }
    batches
}

/// Applies one entry's flag to one item: renewed moves its deadline, gone drops it and tells
/// its holder. Only the registration the item was collected from is touched (epoch check).
fn apply(state: &WatchdogState, item: &Item, renewed: bool, valid_until: Instant) {
    if renewed {
        if let Some(mut hold) = state.holds.get_mut(&item.key) {
            if hold.epoch == item.epoch {
                hold.renewals += 1;
                hold.loss.extend(valid_until);
                crate::observe::renewed();
            }
        }
    } else if state
        .holds
        .remove_if(&item.key, |_, h| h.epoch == item.epoch)
        .is_some()
    {
        crate::observe::lock_lost(&item.key.name, &item.key.field, "renewal found it gone");
        item.loss.mark_lost();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scripts::tests::assert_matches_header;

    fn state() -> WatchdogState {
        WatchdogState {
            holds: DashMap::new(),
            wake: Notify::new(),
            next_epoch: AtomicU64::new(1),
            renew_calls: AtomicU64::new(0),
        }
    }

    fn item(name: &str, field: &str, shape: RenewalShape) -> Item {
        Item {
            key: HoldKey {
                name: name.into(),
                field: field.into(),
            },
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
        loss.extend(start + Duration::from_secs(2));
        assert_eq!(loss.deadline(), start + Duration::from_secs(2));
        loss.extend(start + Duration::from_millis(1500));
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
        loss.extend(Instant::now() + Duration::from_secs(10));
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
        assert_eq!(first.entries, vec![vec![0], vec![1]]);
        assert_eq!(batches[2].entries, vec![vec![4]]);
    }

    #[test]
    fn per_lock_batches_group_the_readers_of_one_lock() {
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
        assert_eq!(
            read.call.keys,
            ["a", "{a}", "b", "{b}"].map(Key::from).to_vec()
        );
        assert_eq!(
            read.call.args,
            vec![
                Value::from(9_000i64),
                Value::from(2i64),
                Value::from("r1"),
                Value::from("r2"),
                Value::from(1i64),
                Value::from("r1"),
            ]
        );
        assert_eq!(read.entries, vec![vec![0, 2], vec![1]]);
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
            assert!(crate::core::one_slot(&b.call.keys), "{:?}", b.call.keys);
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
                HoldKey {
                    name: name.into(),
                    field: "f".into(),
                },
                Hold {
                    count: 1,
                    shape: RenewalShape::per_hold(name),
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
        let key = HoldKey {
            name: "n".into(),
            field: "f".into(),
        };
        let loss = LossSignal::new(Instant::now() + Duration::from_secs(1));
        state.holds.insert(
            key.clone(),
            Hold {
                count: 1,
                shape: RenewalShape::per_hold("n"),
                epoch: 7,
                renewals: 0,
                loss: loss.clone(),
            },
        );
        let mut it = item("n", "f", RenewalShape::per_hold("n"));
        it.epoch = 7;
        it.loss = loss.clone();
        let later = Instant::now() + Duration::from_secs(5);
        apply(&state, &it, true, later);
        assert_eq!(loss.deadline(), later);
        assert_eq!(state.holds.get(&key).unwrap().renewals, 1);

        let mut stale = item("n", "f", RenewalShape::per_hold("n"));
        stale.epoch = 6; // collected from an earlier registration
        apply(&state, &stale, false, later);
        assert!(
            state.holds.contains_key(&key),
            "a stale reply changes nothing"
        );

        apply(&state, &it, false, later);
        assert!(!state.holds.contains_key(&key));
        assert!(loss.is_lost());
    }
}
