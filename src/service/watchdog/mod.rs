//! The renewal service ("watchdog"): one per client, over a map of the holds it keeps alive,
//! renewed every `lock_watchdog_timeout / 3` by one timer task, and the connection-aware state
//! of every hold (held, in doubt, lost).
//!
//! The watchdog does not know any lock's key layout: each hold brings its [`RenewalShape`] (the
//! renewal script, the lock's keys for one entry, and how an entry lists its owner).
//!
//! Its rooms, lowest first (none imports one beside it or above it):
//! - [`loss`]: the [`LossSignal`] a holder watches and the deadline rule;
//! - [`shape`]: the renewal wire shapes ([`RenewalShape`], [`Layout`], [`renewal_call`]);
//! - [`state`]: the state the rooms above share: the renewed holds by [`HoldKey`], the leased
//!   ones, the doubts' bookkeeping;
//! - [`run`]: one renewal run (collect → batch → send → apply);
//! - [`doubt`]: the listener of the connection's events that puts holds in doubt, the leased
//!   holds' check, what a Sentinel failover does to the holds ([`FailoverHolds`]);
//! - this file: the [`Watchdog`] handle the client keeps, and the registry's operations
//!   (register, deregister, leased holds, a TTL set, holds found gone, forced unlocks).

mod doubt;
mod loss;
mod run;
mod shape;
mod state;

use std::{
    sync::{atomic::Ordering, Arc, Weak},
    time::Duration,
};

use tokio::time::Instant;

pub(crate) use doubt::FailoverHolds;
#[allow(unused_imports)] // the entry point for other detectors of a stalled node
pub(crate) use doubt::Node;
pub use loss::HoldState;
pub(crate) use loss::{drift, valid_until, LossSignal};
pub(crate) use shape::{renewal_call, Layout, RenewalShape};
pub(crate) use state::{HoldKey, OnGone};

use crate::conn::{core::Core, scripts::ScriptCall};
use state::{Renewed, WatchdogState};

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
        let task = tokio::spawn(run::run(core.clone(), state.clone()));
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
    /// epoch. `queue`: the kind's local wait line (told if renewal finds the hold gone).
    pub(crate) fn register(
        &self,
        key: &HoldKey,
        shape: RenewalShape,
        queue: Option<crate::types::line::WaitLine>,
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
            to < crate::types::millis::later(Instant::now(), self.timeout / 3 * 2)
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

    /// Puts in doubt every hold on `node` (its slots, on a cluster; every hold elsewhere):
    /// the one entry point for "the connection to a node dropped, stalled or timed out",
    /// whoever detects it (the connection events here, a stalled-connection check, a command
    /// timeout). The holds return to held at the next renewal that confirms them; call
    /// [`reconnected`](Self::reconnected) when the node answers again to make that at once.
    #[allow(dead_code)] // for other detectors (a stalled-connection check, a command timeout)
    pub(crate) fn connection_in_doubt(&self, node: Node<'_>, why: &'static str) {
        if let Some(core) = self.core.upgrade() {
            doubt::in_doubt(&core, &self.state, node, why);
        }
    }

    /// The connection to a node is back: renew at once (confirming or losing the holds in
    /// doubt) and check the leased holds in doubt.
    #[allow(dead_code)] // for other detectors (a stalled-connection check)
    pub(crate) fn reconnected(&self) {
        if let Some(core) = self.core.upgrade() {
            doubt::decide_doubted(&core, &self.state);
        }
    }

    /// A hold whose acquisition was sent at `sent_at` and registered just now: if a connection
    /// event put holds in doubt since it was sent (the reply came, then the connection
    /// dropped, before the guard existed), the hold starts in doubt, and is renewed (watchdog)
    /// or checked (leased) at once.
    pub(crate) fn doubted_since(
        &self,
        key: &HoldKey,
        loss: &Arc<LossSignal>,
        sent_at: Instant,
        leased: bool,
    ) {
        doubt::doubted_since(&self.core, &self.state, key, loss, sent_at, leased);
    }

    /// The handle through which a Sentinel failover puts the holds in doubt and has them
    /// confirmed on the new master.
    pub(crate) fn failover_holds(&self) -> FailoverHolds {
        FailoverHolds::new(self.core.clone(), self.state.clone())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::watchdog::{
        run::{apply, tests::item},
        state::tests::state,
    };

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
}
