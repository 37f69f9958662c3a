//! The renewal service ("watchdog"): one per client, over a map of the locks it holds in
//! watchdog mode.
//!
//! Every `lock_watchdog_timeout / 3` after the previous run completed, it renews all held locks,
//! `lock_watchdog_batch_size` per script call, and only where the owner field still exists
//! (L-RENEW; read locks use R-RENEW, which also re-arms this client's reader timeout keys). A lock the script reports gone is dropped from the map and its holder is told
//! through its [`LossSignal`]. Errors keep the registrations and are retried sooner, until the
//! holder's deadline passes: then the hold is reported lost and no longer renewed, so a holder is
//! never told "lost" and later "held" again.
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

use crate::{client::Core, scripts::ScriptId};

/// Safety margin subtracted from a lease to get the holder-side deadline.
pub(crate) fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
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
    fn extend(&self, to: Instant) {
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

/// How a hold is renewed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Renewal {
    /// L-RENEW: `PEXPIRE` the hash where the owner field exists.
    Standard,
    /// R-RENEW: a reader; `prefix` is the suffix-rule base of its timeout keys.
    Read { prefix: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct HoldKey {
    name: Arc<str>,
    field: Arc<str>,
}

struct Hold {
    count: u32,
    renewal: Renewal,
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
        let timeout = core.config.lock_watchdog_timeout;
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
        name: &str,
        field: &str,
        renewal: Renewal,
        sent_at: Instant,
    ) -> Arc<LossSignal> {
        let deadline = sent_at + self.timeout - drift(self.timeout);
        let key = HoldKey {
            name: name.into(),
            field: field.into(),
        };
        let loss = {
            let mut hold = self.state.holds.entry(key).or_insert_with(|| Hold {
                count: 0,
                renewal,
                epoch: self.state.next_epoch.fetch_add(1, Ordering::Relaxed),
                renewals: 0,
                loss: LossSignal::new(deadline),
            });
            hold.count += 1;
            hold.loss.extend(deadline);
            hold.loss.clone()
        };
        self.state.wake.notify_one();
        loss
    }

    /// Removes one registration of an owner (every unlock attempt does this, whatever its
    /// outcome, so a failed unlock lets the lock expire within one timeout).
    pub(crate) fn deregister(&self, name: &str, field: &str) {
        let key = HoldKey {
            name: name.into(),
            field: field.into(),
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

/// One renewal script call: the holds behind each reply flag, the keys and the arguments.
type Batch<'a> = (Vec<Vec<&'a Item>>, Vec<Key>, Vec<Value>);

struct Item {
    key: HoldKey,
    renewal: Renewal,
    epoch: u64,
    loss: Arc<LossSignal>,
}

async fn run(core: Arc<Core>, state: Arc<WatchdogState>) {
    let timeout = core.config.lock_watchdog_timeout;
    let period = timeout / 3;
    let retry = core
        .config
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

/// One renewal run. Returns `true` if any batch failed.
async fn renew_all(core: &Core, state: &WatchdogState, timeout: Duration) -> bool {
    let now = Instant::now();
    let max = core.config.max_renewals;
    let mut items = Vec::with_capacity(state.holds.len());
    let mut expired = Vec::new();
    for entry in state.holds.iter() {
        let hold = entry.value();
        if hold.loss.deadline() <= now || hold.loss.is_lost() {
            expired.push((entry.key().clone(), hold.epoch));
        } else if max.map_or(true, |m| hold.renewals < m) {
            items.push(Item {
                key: entry.key().clone(),
                renewal: hold.renewal.clone(),
                epoch: hold.epoch,
                loss: hold.loss.clone(),
            });
        }
        // A hold that reached max_renewals stays registered until its deadline passes.
    }
    for (key, epoch) in expired {
        if let Some((_, hold)) = state.holds.remove_if(&key, |_, h| h.epoch == epoch) {
            hold.loss.mark_lost();
        }
    }
    if items.is_empty() {
        return false;
    }
    let timeout_ms = Value::from(timeout.as_millis() as i64);
    let batch = core.config.lock_watchdog_batch_size;
    let (standard, read): (Vec<Item>, Vec<Item>) = items
        .into_iter()
        .partition(|i| i.renewal == Renewal::Standard);

    // L-RENEW batches: one (name, field) pair per key.
    let standard_batches: Vec<Batch> = standard
        .chunks(batch)
        .map(|chunk| {
            let keys = chunk.iter().map(|i| Key::from(&*i.key.name)).collect();
            let mut args = vec![timeout_ms.clone()];
            args.extend(chunk.iter().map(|i| Value::from(&*i.key.field)));
            (chunk.iter().map(|i| vec![i]).collect(), keys, args)
        })
        .collect();
    // R-RENEW batches: one lock per entry, with all of this client's readers of it.
    let mut by_lock: Vec<(Arc<str>, Vec<&Item>)> = Vec::new();
    for item in &read {
        match by_lock.iter_mut().find(|(n, _)| *n == item.key.name) {
            Some((_, v)) => v.push(item),
            None => by_lock.push((item.key.name.clone(), vec![item])),
        }
    }
    let read_batches: Vec<Batch> = by_lock
        .chunks(batch)
        .map(|chunk| {
            let mut keys = Vec::new();
            let mut args = vec![timeout_ms.clone()];
            for (name, readers) in chunk {
                let Renewal::Read { prefix } = &readers[0].renewal else {
                    unreachable!("partitioned by renewal kind")
                };
                keys.push(Key::from(&**name));
                keys.push(Key::from(prefix.as_str()));
                args.push(Value::from(readers.len() as i64));
                args.extend(readers.iter().map(|i| Value::from(&*i.key.field)));
            }
            (chunk.iter().map(|(_, r)| r.clone()).collect(), keys, args)
        })
        .collect();

    let calls = standard_batches
        .into_iter()
        .map(|b| (ScriptId::Renew, b))
        .chain(read_batches.into_iter().map(|b| (ScriptId::ReadRenew, b)))
        .map(|(script, (groups, keys, args))| {
            state.renew_calls.fetch_add(1, Ordering::Relaxed);
            async move {
                let sent_at = Instant::now();
                let reply = core
                    .scripts
                    .run::<Vec<i64>>(&core.redis, script, keys, args)
                    .await;
                (groups, sent_at, reply)
            }
        });
    let mut failed = false;
    for (groups, sent_at, reply) in futures::future::join_all(calls).await {
        match reply {
            Ok(flags) if flags.len() == groups.len() => {
                let valid_until = sent_at + timeout - drift(timeout);
                for (group, flag) in groups.iter().zip(flags) {
                    for item in group {
                        apply(state, item, flag == 1, valid_until);
                    }
                }
            }
            Ok(flags) => {
                failed = true;
                log::warn!(
                    "renewal script answered {} flags for {} locks",
                    flags.len(),
                    groups.len()
                );
            }
            Err(e) => {
                failed = true;
                log::warn!("can't renew {} locks, will retry: {e}", groups.len());
            }
        }
    }
    failed
}

fn apply(state: &WatchdogState, item: &Item, renewed: bool, valid_until: Instant) {
    if renewed {
        if let Some(mut hold) = state.holds.get_mut(&item.key) {
            if hold.epoch == item.epoch {
                hold.renewals += 1;
                hold.loss.extend(valid_until);
            }
        }
    } else if state
        .holds
        .remove_if(&item.key, |_, h| h.epoch == item.epoch)
        .is_some()
    {
        log::info!(
            "lock {} is no longer held by {}; renewal stopped",
            item.key.name,
            item.key.field
        );
        item.loss.mark_lost();
    }
}
