//! The [`Watchdog`] handle the client keeps, and the registry's operations: register a
//! guard's parts of its owner's hold ([`Registration`], with the hold's [`Upkeep`]), let them
//! go, what the parts left need, a TTL set by an owner's call ([`TtlSet`]), holds found gone,
//! forced unlocks; the doubt entry points handed to `doubt`.

use std::{
    sync::{atomic::Ordering, Arc, Weak},
    time::Duration,
};

use tokio::time::Instant;

use super::{
    doubt::{self, FailoverHolds, Node},
    loss::{valid_until, LossSignal},
    run,
    shape::RenewalShape,
    state::{Hold, HoldKey, Need, OnGone, WatchdogState},
};
use crate::conn::{core::Core, scripts::ScriptCall};

pub(crate) use super::state::Parts;

/// How one hold is kept: the renewal of its kind ([`RenewalShape`]), the local wait line told
/// when renewal finds it gone, and the call that confirms it after a reconnect where it is not
/// a field of the lock's hash (a group multi-lock's set of values, a permit: a call answering
/// the hold count; `None`: `HEXISTS <lock> <field>`).
pub(crate) struct Upkeep {
    pub(crate) shape: RenewalShape,
    pub(crate) queue: Option<crate::types::line::WaitLine>,
    pub(crate) presence: Option<ScriptCall>,
}

/// How a call set a lock's TTL (see [`Watchdog::ttl_set`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TtlSet {
    /// It may have set it, or a shorter one: the guards last at most that long.
    AtMost,
    /// It set it: the guards last exactly that long; `part`, the leased part of the guard
    /// whose call it was, now ends then (the others no later).
    Exactly { part: Option<u64> },
    /// A partial release re-armed it to the leases of the parts left: every one of them now
    /// ends then.
    Rearmed,
}

/// One guard's registration: the loss signal of its owner's hold of the lock (every guard of
/// that hold watches the same one), the epoch that names the hold's registration (a guard of an
/// earlier one lets nothing go of the next), and the guard's parts.
pub(crate) struct Registration {
    pub(crate) loss: Arc<LossSignal>,
    pub(crate) epoch: u64,
    pub(crate) parts: Parts,
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

    /// Registers one acquisition of `key` (re-entries included) whose script was sent at
    /// `sent_at`: a part without a lease (`renewed`: renewed while it lasts) and, with `lease`, a
    /// leased part ending at `sent_at + lease`. Returns the registration the guard keeps. `queue`:
    /// the kind's local wait line (told if renewal finds the hold gone); `presence`: how the
    /// hold is confirmed after a reconnect where it is not a field of the lock's hash.
    pub(crate) fn register(
        &self,
        key: &HoldKey,
        upkeep: Upkeep,
        sent_at: Instant,
        renewed: bool,
        lease: Option<Duration>,
    ) -> Registration {
        let Upkeep {
            shape,
            queue,
            presence,
        } = upkeep;
        let part = if renewed {
            self.timeout
        } else {
            Duration::ZERO
        };
        let deadline = valid_until(sent_at, part.max(lease.unwrap_or_default()));
        let part_id = lease.map(|_| self.state.next_epoch.fetch_add(1, Ordering::Relaxed));
        let registration = {
            let mut hold = self.state.holds.entry(key.clone()).or_insert_with(|| {
                Box::new(Hold {
                    renewed: 0,
                    leases: Vec::new(),
                    leased: false,
                    kept: Vec::new(),
                    shape,
                    queue,
                    presence: None,
                    last_sent: sent_at,
                    epoch: self.state.next_epoch.fetch_add(1, Ordering::Relaxed),
                    renewals: 0,
                    loss: LossSignal::new(deadline),
                })
            });
            if hold.loss.is_lost() {
                // A hold already known lost (its deadline passed before the next run removed
                // it) is not revived: this acquisition starts a new registration, which the
                // guards of the lost one (another epoch) no longer count in.
                hold.loss = LossSignal::new(deadline);
                hold.epoch = self.state.next_epoch.fetch_add(1, Ordering::Relaxed);
                hold.renewals = 0;
                hold.renewed = 0;
                hold.leases.clear();
                hold.kept.clear();
            } else {
                hold.loss.extend(sent_at, deadline);
            }
            if renewed {
                hold.renewed += 1;
            }
            if let (Some(id), Some(lease)) = (part_id, lease) {
                hold.leases
                    .push((id, crate::types::millis::later(sent_at, lease), lease));
                hold.leased = true;
            }
            if presence.is_some() {
                hold.presence = presence.map(Box::new);
            }
            hold.last_sent = hold.last_sent.max(sent_at);
            Registration {
                loss: hold.loss.clone(),
                epoch: hold.epoch,
                parts: Parts {
                    renewed,
                    lease: part_id,
                },
            }
        };
        // The run also forgets leased holds whose end passed (a kept leased guard's).
        self.state.wake.notify_one();
        registration
    }

    /// Lets the parts of one guard go (every release does this first, whatever its outcome, so
    /// a failed release lets a renewed part expire within one timeout and a leased one at its
    /// end). `None`: one part of the current registration (the Java-style unlock through a
    /// handle): a kept guard's part if there is one (the hold such an unlock is for: a
    /// guard that still follows its part releases it itself), else a renewed part if there
    /// is one, else the leased part that ends first (what the others need is unchanged).
    /// The hold is forgotten once no part is left.
    /// Returns the parts let go (`None`: nothing of the current registration).
    pub(crate) fn let_go(&self, key: &HoldKey, guard: Option<(u64, Parts)>) -> Option<Parts> {
        let mut gone = None;
        self.state.holds.remove_if_mut(key, |_, hold| {
            let parts = match guard {
                Some((epoch, _)) if epoch != hold.epoch => return false,
                Some((_, parts)) => parts,
                None if !hold.kept.is_empty() => hold.kept.remove(0),
                None if hold.is_renewed() => Parts {
                    renewed: true,
                    lease: None,
                },
                None => Parts {
                    renewed: false,
                    lease: hold
                        .leases
                        .iter()
                        .min_by_key(|(_, ends, _)| *ends)
                        .map(|p| p.0),
                },
            };
            if parts.renewed {
                hold.renewed = hold.renewed.saturating_sub(1);
            }
            if let Some(id) = parts.lease {
                hold.leases.retain(|(part, _, _)| *part != id);
            }
            gone = Some(parts);
            hold.is_empty()
        });
        gone
    }

    /// The loss signal of the current registration of `key`, if any.
    pub(crate) fn loss_of(&self, key: &HoldKey) -> Option<Arc<LossSignal>> {
        self.state.holds.get(key).map(|hold| hold.loss.clone())
    }

    /// A guard of the registration `epoch` of `key` was kept: its `parts` stay registered,
    /// and a handle's unlock releases them first (see [`let_go`](Self::let_go)).
    pub(crate) fn keep(&self, key: &HoldKey, epoch: u64, parts: Parts) {
        if let Some(mut hold) = self.state.holds.get_mut(key) {
            if hold.epoch == epoch {
                hold.kept.push(parts);
            }
        }
    }

    /// What the parts of `key` still need of the key's TTL (see [`Need`]).
    pub(crate) fn need(&self, key: &HoldKey) -> Need {
        self.state
            .holds
            .get(key)
            .map_or_else(Need::default, |hold| hold.need())
    }

    /// A call of the owner of `key`, sent at `sent_at` and answered at `answered_at`, set the
    /// lock's TTL to `lease`: every guard of that owner on that lock now lasts until
    /// `sent_at + lease − drift`: exactly (`set`: the call ran and set it; with a guard's
    /// leased part that now ends then), or at most (the call may not have run, or may have set
    /// a shorter TTL). A renewed hold whose deadline comes closer than its next regular renewal
    /// is renewed at once.
    pub(crate) fn ttl_set(
        &self,
        key: &HoldKey,
        sent_at: Instant,
        lease: Duration,
        answered_at: Instant,
        set: TtlSet,
    ) {
        let to = valid_until(sent_at, lease);
        let ends = crate::types::millis::later(sent_at, lease);
        let urgent = self.state.holds.get_mut(key).is_some_and(|mut hold| {
            match set {
                TtlSet::AtMost => hold.loss.shorten(answered_at, to),
                TtlSet::Exactly { part } => {
                    hold.loss.renewed_to(answered_at, to);
                    for (id, end, _) in hold.leases.iter_mut() {
                        *end = if Some(*id) == part {
                            ends
                        } else {
                            (*end).min(ends)
                        };
                    }
                }
                TtlSet::Rearmed => {
                    hold.loss.renewed_to(answered_at, to);
                    for (_, end, _) in hold.leases.iter_mut() {
                        *end = ends;
                    }
                }
            }
            // The regular runs keep a deadline at least two periods ahead.
            hold.is_renewed()
                && to < crate::types::millis::later(Instant::now(), self.timeout / 3 * 2)
        });
        if urgent {
            self.state.urgent.notify_one();
        }
    }

    /// The hold `key` names is known to hold nothing in Redis any more (an acquisition of its
    /// owner found the owner's count lower than every hold this client knows of, or knew it at
    /// zero): it is forgotten and its guards are lost and *gone* (their unlocks release
    /// nothing: the owner's count in Redis is a later acquisition's). Called before that
    /// acquisition's attempt, so it starts a registration of its own. A hold in doubt is lost
    /// too: a later confirmation would only find the new hold's field.
    pub(crate) fn holds_gone(&self, key: &HoldKey) {
        self.forget_gone(key, "its owner's count was lower");
    }

    /// A release of the owner of `key` found nothing left to hold (it freed the lock, or the
    /// owner held nothing): the parts still registered (of other guards) stand for nothing in
    /// Redis; as [`holds_gone`](Self::holds_gone).
    pub(crate) fn holds_released(&self, key: &HoldKey) {
        self.forget_gone(key, "a release of its owner left nothing to hold");
    }

    fn forget_gone(&self, key: &HoldKey, why: &'static str) {
        if let Some((_, hold)) = self.state.holds.remove(key) {
            if !hold.loss.is_lost() {
                crate::observe::lock_lost(&key.name, &key.field, why);
            }
            hold.loss.mark_gone();
            if let Some(tag) = hold.queue {
                (self.state.on_gone)(&key.name, tag);
            }
        }
    }

    /// Forgets every hold of a lock (forced unlock); their guards are told it is lost.
    pub(crate) fn remove_lock(&self, name: &str) {
        self.state.holds.retain(|key, hold| {
            if &*key.name != name {
                return true;
            }
            hold.loss.mark_lost();
            false
        });
    }

    /// Whether the hold `key` is being renewed.
    pub(crate) fn renews(&self, key: &HoldKey) -> bool {
        self.state.holds.get(key).is_some_and(|h| h.is_renewed())
    }

    /// Number of (lock, owner) holds being renewed.
    pub(crate) fn len(&self) -> usize {
        self.state.holds.iter().filter(|h| h.is_renewed()).count()
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
    pub(crate) fn doubted_since(&self, key: &HoldKey, loss: &Arc<LossSignal>, sent_at: Instant) {
        doubt::doubted_since(&self.core, &self.state, key, loss, sent_at);
    }

    /// The handle through which a Sentinel failover puts the holds in doubt and has them
    /// confirmed on the new master.
    pub(crate) fn failover_holds(&self) -> FailoverHolds {
        FailoverHolds::new(self.core.clone(), self.state.clone())
    }

    /// Stops renewing everything (client shutdown): the locks expire one timeout later, and
    /// every guard of a hold still registered is told it is lost. Returns how many holds.
    pub(crate) fn stop(&self) -> usize {
        self.task.abort();
        self.events.abort();
        let mut kept = 0;
        self.state.holds.retain(|_, hold| {
            hold.loss.mark_lost();
            kept += 1;
            false
        });
        kept
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
    use crate::service::watchdog::HoldState;
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

    fn key() -> HoldKey {
        HoldKey::new("n".into(), "f".into(), Arc::from([]))
    }

    fn upkeep() -> Upkeep {
        Upkeep {
            shape: RenewalShape::per_hold("n"),
            queue: None,
            presence: None,
        }
    }

    /// A part without a lease, acquired now.
    fn renewed(wd: &Watchdog, key: &HoldKey) -> Registration {
        wd.register(key, upkeep(), Instant::now(), true, None)
    }

    /// A leased part, acquired now.
    fn leased(wd: &Watchdog, key: &HoldKey, lease: Duration) -> Registration {
        wd.register(key, upkeep(), Instant::now(), false, Some(lease))
    }

    fn let_go(wd: &Watchdog, key: &HoldKey, r: &Registration) {
        wd.let_go(key, Some((r.epoch, r.parts)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_guard_of_a_lost_registration_lets_nothing_go_of_the_next() {
        let wd = watchdog(Duration::from_secs(1));
        let key = key();
        let stale = renewed(&wd, &key);
        stale.loss.mark_lost();
        let next = renewed(&wd, &key);
        assert_ne!(stale.epoch, next.epoch);
        assert!(!next.loss.is_lost());
        let_go(&wd, &key, &stale);
        assert_eq!(
            wd.len(),
            1,
            "the stale guard leaves the new registration alone"
        );
        let_go(&wd, &key, &next);
        assert_eq!(
            wd.len(),
            0,
            "counted from one: the lost registration's guard is not"
        );
        assert!(wd.state.holds.is_empty(), "no part left: forgotten");
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_found_gone_is_gone_only_if_every_acquisition_ran_before_the_renewal() {
        let wd = watchdog(Duration::from_secs(30));
        let key = key();
        let shape = || RenewalShape::per_hold("n");
        let collected = |r: &Registration| {
            let mut it = item("n", "f", shape());
            it.epoch = r.epoch;
            it.loss = r.loss.clone();
            it
        };
        let until = Instant::now() + Duration::from_secs(30);
        let first = renewed(&wd, &key);
        tokio::time::advance(Duration::from_millis(10)).await;
        let renewal_sent = Instant::now();
        apply(&wd.state, &collected(&first), false, renewal_sent, until);
        assert!(first.loss.is_gone(), "acquired before the renewal was sent");

        let second = renewed(&wd, &key);
        let renewal_sent = Instant::now();
        tokio::time::advance(Duration::from_millis(10)).await;
        // A re-entry sent while that renewal was in flight may have run after it.
        renewed(&wd, &key);
        apply(&wd.state, &collected(&second), false, renewal_sent, until);
        assert!(second.loss.is_lost());
        assert!(!second.loss.is_gone(), "its guards still release");
    }

    #[tokio::test(start_paused = true)]
    async fn holds_found_gone_by_their_owner_are_lost_for_good_and_release_nothing() {
        let wd = watchdog(Duration::from_secs(30));
        let key = key();
        let other = HoldKey::new("n".into(), "f".into(), Arc::from(["v".to_owned()]));
        let renewed_part = renewed(&wd, &key);
        let leased_part = leased(&wd, &key, Duration::from_secs(20));
        let others = leased(&wd, &other, Duration::from_secs(20));
        assert!(
            Arc::ptr_eq(&renewed_part.loss, &leased_part.loss),
            "one hold, one signal"
        );
        // In doubt (a connection drop): a later confirmation would find the new hold's field.
        assert!(leased_part.loss.doubt(1));
        wd.holds_gone(&key);
        assert!(renewed_part.loss.is_gone());
        assert_eq!(wd.len(), 0, "the registration is dropped");
        assert!(!leased_part.loss.confirm(1));
        assert_eq!(
            leased_part.loss.state(),
            HoldState::Lost,
            "never confirmed again"
        );
        assert_eq!(
            others.loss.state(),
            HoldState::Held,
            "another set of the owner"
        );
        // The next acquisition starts a registration of its own.
        let next = renewed(&wd, &key);
        assert_ne!(next.epoch, renewed_part.epoch);
        assert_eq!(next.loss.state(), HoldState::Held);
        let_go(&wd, &key, &renewed_part);
        let_go(&wd, &key, &leased_part);
        assert!(wd.renews(&key), "the earlier guards let nothing of it go");
    }

    #[tokio::test(start_paused = true)]
    async fn a_ttl_set_reaches_every_guard_of_the_owner_and_hurries_the_watchdog() {
        let timeout = Duration::from_secs(30);
        let wd = watchdog(timeout);
        let key = key();
        let other = HoldKey::new("n".into(), "g".into(), Arc::from([]));
        let held = renewed(&wd, &key);
        let others = leased(&wd, &other, Duration::from_secs(20));
        // A 25 s TTL at most: the regular runs still renew in time.
        let sent = Instant::now();
        wd.ttl_set(&key, sent, Duration::from_secs(25), sent, TtlSet::AtMost);
        assert_eq!(
            held.loss.deadline(),
            valid_until(sent, Duration::from_secs(25))
        );
        assert!(futures::FutureExt::now_or_never(wd.state.urgent.notified()).is_none());
        // A 1 s TTL: every guard of that owner learns it, the renewal comes at once.
        wd.ttl_set(&key, sent, Duration::from_secs(1), sent, TtlSet::AtMost);
        let to = valid_until(sent, Duration::from_secs(1));
        assert_eq!(held.loss.deadline(), to);
        assert_eq!(
            others.loss.deadline(),
            valid_until(sent, Duration::from_secs(20)),
            "another owner's"
        );
        assert!(futures::FutureExt::now_or_never(wd.state.urgent.notified()).is_some());
        // Set exactly (the call ran): later too.
        tokio::time::advance(Duration::from_millis(10)).await;
        let sent = Instant::now();
        wd.ttl_set(
            &key,
            sent,
            Duration::from_secs(29),
            sent,
            TtlSet::Exactly { part: None },
        );
        assert_eq!(
            held.loss.deadline(),
            valid_until(sent, Duration::from_secs(29))
        );
        let_go(&wd, &key, &held);
        let_go(&wd, &other, &others);
        assert!(wd.state.holds.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_needs_the_longest_of_the_parts_it_has_left() {
        let timeout = Duration::from_secs(30);
        let wd = watchdog(timeout);
        let key = key();
        let t0 = Instant::now();
        let need = |wd: &Watchdog| wd.need(&key).ttl(timeout, Instant::now());
        assert_eq!(need(&wd), None, "nothing known");
        let watchdog_part = renewed(&wd, &key);
        assert_eq!(need(&wd), Some(timeout));
        let long = leased(&wd, &key, Duration::from_secs(300));
        let short = leased(&wd, &key, Duration::from_secs(5));
        assert_eq!(need(&wd), Some(Duration::from_secs(300)));
        assert_eq!(
            watchdog_part.loss.deadline(),
            valid_until(t0, Duration::from_secs(300)),
            "every guard of the hold lasts as long as its longest part"
        );
        let_go(&wd, &key, &long);
        assert_eq!(
            need(&wd),
            Some(timeout),
            "renewed, longer than the 5 s part"
        );
        tokio::time::advance(Duration::from_secs(1)).await;
        let_go(&wd, &key, &watchdog_part);
        assert_eq!(
            need(&wd),
            Some(Duration::from_secs(4)),
            "what the short part has left"
        );
        assert!(!wd.renews(&key));
        assert!(wd.need(&key).leased);
        let_go(&wd, &key, &short);
        assert_eq!(need(&wd), None);
        assert!(wd.state.holds.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_java_style_release_lets_a_renewed_part_go_first_then_the_lease_that_ends_first() {
        let timeout = Duration::from_secs(30);
        let wd = watchdog(timeout);
        let key = key();
        renewed(&wd, &key);
        leased(&wd, &key, Duration::from_secs(300));
        leased(&wd, &key, Duration::from_secs(100));
        wd.let_go(&key, None);
        assert!(!wd.renews(&key), "the renewed part went first");
        assert_eq!(
            wd.need(&key).ttl(timeout, Instant::now()),
            Some(Duration::from_secs(300))
        );
        wd.let_go(&key, None);
        assert_eq!(
            wd.need(&key).ttl(timeout, Instant::now()),
            Some(Duration::from_secs(300)),
            "the 100 s part went: what the others need is unchanged"
        );
        wd.let_go(&key, None);
        assert!(wd.state.holds.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_exact_set_moves_the_guards_leased_part_and_caps_the_others() {
        let timeout = Duration::from_secs(30);
        let wd = watchdog(timeout);
        let key = key();
        let mine = leased(&wd, &key, Duration::from_secs(10));
        leased(&wd, &key, Duration::from_secs(300));
        let sent = Instant::now();
        wd.ttl_set(
            &key,
            sent,
            Duration::from_secs(60),
            sent,
            TtlSet::Exactly {
                part: mine.parts.lease,
            },
        );
        assert_eq!(
            wd.need(&key).ttl(timeout, sent),
            Some(Duration::from_secs(60)),
            "the 300 s part ends with the key now"
        );
        assert_eq!(
            mine.loss.deadline(),
            valid_until(sent, Duration::from_secs(60))
        );
    }
}
