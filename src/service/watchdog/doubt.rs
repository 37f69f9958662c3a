//! Connection-aware hold state: a hold is *in doubt* from the moment the connection to its
//! node drops (or a command to it times out) until a renewal sent after that moment confirms
//! the owner's field; a renewal that finds the field gone makes it lost for good.
//!
//! The state machine lives in the [`LossSignal`] (a doubt *epoch* beside its lost flag and
//! deadline, `loss.rs`), the client-wide epoch counter in the watchdog's state (`Doubts`,
//! `state.rs`); this room owns the listener of the command connection's events (fred's error,
//! reconnect, unresponsive and cluster-change streams), the check of the leased holds (no
//! watchdog renewal: they are checked once after a reconnect), the request for a renewal run
//! right after a reconnect, so the doubt is short, and what a Sentinel failover does to the
//! holds ([`FailoverHolds`]). A renewal's own verdicts (confirmed, or in doubt for want of a
//! reply) are the run's (`run.rs`).
//!
//! Epochs: every doubt event takes a new epoch `e` and raises each affected signal's doubt to
//! at least `e`; a renewal reads the counter when it is sent, and its success clears the doubt
//! only if it was sent at or after the doubt's epoch. A renewal sent before the connection
//! dropped (whose reply may come back after) never clears a doubt.
//!
//! No command is added to the hot path: doubts come from connection events and from renewals
//! that already run; the only extra commands are one renewal run per reconnect and one
//! `HEXISTS` per leased hold in doubt after a reconnect.

use std::sync::{atomic::Ordering, Arc, Weak};

use fred::{
    interfaces::{ClusterInterface, EventInterface},
    types::{cluster::ClusterRouting, config::Server, ClusterStateChange},
};
use tokio::{sync::broadcast::error::RecvError, time::Instant};

use super::{
    loss::{HoldState, LossSignal},
    state::{HoldKey, WatchdogState},
};
use crate::conn::core::Core;

/// Which holds a doubt event concerns.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Node<'a> {
    /// Every hold of the client (standalone, Sentinel, or a cluster event naming no node).
    All,
    /// The holds whose slot this node serves (any hold on a non-cluster deployment).
    Server(&'a Server),
}

/// Asks for a renewal run at once if some renewed hold is in doubt.
fn renew_doubted_now(state: &WatchdogState) {
    if state
        .holds
        .iter()
        .any(|h| h.value().is_renewed() && h.value().loss.state() == HoldState::InDoubt)
    {
        state.urgent.notify_one();
    }
}

/// The slot of a lock name.
fn slot(name: &str) -> u16 {
    fred::util::redis_keyslot(name.as_bytes())
}

/// Puts in doubt every hold of `state` for which `affected(name)` holds (watchdog-renewed and
/// leased alike) and reports each that was held.
fn doubt_where(state: &WatchdogState, affected: impl Fn(&str) -> bool, why: &'static str) {
    *state.doubts.last_at.lock() = Some(Instant::now());
    let epoch = state.doubts.next();
    for entry in state.holds.iter() {
        let key = entry.key();
        if affected(&key.name) && entry.value().loss.doubt(epoch) {
            crate::observe::lock_in_doubt(&key.name, &key.field, why);
        }
    }
}

/// A hold whose acquisition was sent at `sent_at` and registered just now: if a connection
/// event put holds in doubt since it was sent (the reply came, then the connection dropped,
/// before the guard existed), the hold starts in doubt, and is renewed (a renewed hold) or
/// checked (a leased one) at once.
pub(super) fn doubted_since(
    core: &Weak<Core>,
    state: &Arc<WatchdogState>,
    key: &HoldKey,
    loss: &Arc<LossSignal>,
    sent_at: Instant,
) {
    let doubts = &state.doubts;
    let failover = doubts.failover.load(Ordering::Acquire);
    if !failover && !doubts.last_at.lock().is_some_and(|at| at >= sent_at) {
        return;
    }
    if loss.doubt(doubts.next()) {
        crate::observe::lock_in_doubt(&key.name, &key.field, "connection lost while acquiring");
    }
    if state.holds.get(key).is_some_and(|h| h.is_renewed()) {
        state.urgent.notify_one();
    } else if let Some(core) = core.upgrade() {
        check_leased(&core, state, key.clone());
    }
}

/// What a Sentinel failover does to the holds (see `service::failover`): a handle the
/// failover watcher keeps for the client's life.
#[derive(Clone)]
pub(crate) struct FailoverHolds {
    core: Weak<Core>,
    state: Arc<WatchdogState>,
}

impl FailoverHolds {
    /// The handle over the watchdog's state; `core` is not kept alive by it.
    pub(super) fn new(core: Weak<Core>, state: Arc<WatchdogState>) -> Self {
        Self { core, state }
    }

    /// The sentinels began failing the master over: every hold is in doubt, and stays so (no
    /// renewal confirms it, a new hold starts in doubt) until [`ended`](Self::ended).
    pub(crate) fn began(&self, why: &'static str) {
        self.state.doubts.failover.store(true, Ordering::Release);
        doubt_where(&self.state, |_| true, why);
    }

    /// The failover ended and the connections reach the master the sentinels name now (or it
    /// was abandoned): a renewal sent from now on confirms a hold or finds it gone; one runs at
    /// once, and the leased holds are checked.
    pub(crate) fn ended(&self) {
        // A new epoch after the flag is down: renewals sent before it (to the old master, or
        // carrying 0) clear nothing.
        self.state.doubts.failover.store(false, Ordering::Release);
        doubt_where(&self.state, |_| true, "the master was replaced");
        if let Some(core) = self.core.upgrade() {
            decide_doubted(&core, &self.state);
        }
    }

    /// `true` while a failover is under way (between `began` and `ended`).
    pub(crate) fn under_way(&self) -> bool {
        self.state.doubts.failover.load(Ordering::Acquire)
    }
}

pub(super) fn in_doubt(core: &Core, state: &WatchdogState, node: Node<'_>, why: &'static str) {
    let server = match node {
        Node::Server(s) if core.is_clustered() => s,
        _ => return doubt_where(state, |_| true, why),
    };
    let current = core.redis().cached_cluster_state();
    let last = state.doubts.routing.lock().clone();
    if current.is_none() && last.is_none() {
        return doubt_where(state, |_| true, why);
    }
    let serves = |routing: &Option<ClusterRouting>, name: &str| {
        routing
            .as_ref()
            .and_then(|r| r.get_server(slot(name)))
            .is_some_and(|s| s == server)
    };
    doubt_where(
        state,
        |name| serves(&current, name) || serves(&last, name),
        why,
    );
}

/// The cluster's routing changed: holds whose slot moved to another node are in doubt (a
/// failover may have lost the last writes; a migration keeps them), and are decided at once on
/// the new owner: a renewal run for the watchdog holds, the check of the leased ones (no
/// reconnect follows a migration, so nothing else would check them before their deadline).
fn routing_changed(core: &Arc<Core>, state: &Arc<WatchdogState>) {
    let current = core.redis().cached_cluster_state();
    let last = std::mem::replace(&mut *state.doubts.routing.lock(), current.clone());
    let (Some(current), Some(last)) = (current, last) else {
        return;
    };
    doubt_where(
        state,
        |name| {
            let s = slot(name);
            last.get_server(s) != current.get_server(s)
        },
        "the cluster moved its slot",
    );
    decide_doubted(core, state);
}

/// Decides the holds in doubt now (after a reconnect, a failover's end, a slot's move): a
/// renewal run at once for the renewed holds, and the check of each leased hold in doubt.
pub(super) fn decide_doubted(core: &Arc<Core>, state: &Arc<WatchdogState>) {
    renew_doubted_now(state);
    let doubted: Vec<HoldKey> = state
        .holds
        .iter()
        .filter(|e| !e.value().is_renewed() && e.value().loss.state() == HoldState::InDoubt)
        .map(|e| e.key().clone())
        .collect();
    for key in doubted {
        check_leased(core, state, key);
    }
}

/// Starts the check of one owner's leased holds of one lock, unless one is running.
fn check_leased(core: &Arc<Core>, state: &Arc<WatchdogState>, key: HoldKey) {
    if check_begins(state, &key) {
        tokio::spawn(verify_leased(core.clone(), state.clone(), key));
    }
}

/// A check of `key`'s leased holds is asked for (their doubt was raised first): `true` when
/// none is running, so the caller starts one.
fn check_begins(state: &WatchdogState, key: &HoldKey) -> bool {
    state.doubts.checking.lock().insert(key.clone())
}

/// The running check of `key` found nothing in doubt any more: `true` when it ends. Looked at
/// again under the lock [`check_begins`] takes: a doubt is raised before its check is asked
/// for, so a doubt raised after the check's last look either is seen here (the check goes on)
/// or asks after the check is gone (and starts one); never neither.
fn check_ends(state: &WatchdogState, key: &HoldKey) -> bool {
    let mut checking = state.doubts.checking.lock();
    if doubted_lease(state, key).is_some() {
        return false;
    }
    checking.remove(key);
    true
}

/// The hold `key` if it is in doubt with no renewal to decide it (leased parts only), with how
/// it is confirmed.
fn doubted_lease(
    state: &WatchdogState,
    key: &HoldKey,
) -> Option<(Arc<LossSignal>, Option<crate::conn::scripts::ScriptCall>)> {
    state.holds.get(key).and_then(|hold| {
        (!hold.is_renewed() && hold.loss.state() == HoldState::InDoubt)
            .then(|| (hold.loss.clone(), hold.presence.as_deref().cloned()))
    })
}

/// Checks one owner's leased hold of one lock in doubt after a reconnect: the owner's field
/// present confirms it, absent loses it; an error is retried until it is no longer in doubt
/// (its deadline passes at the latest).
async fn verify_leased(core: Arc<Core>, state: Arc<WatchdogState>, key: HoldKey) {
    let retry = core
        .config()
        .retry_delay
        .max(std::time::Duration::from_millis(10));
    let (name, field) = (&key.name, &key.field);
    loop {
        let Some((loss, count)) = doubted_lease(&state, &key) else {
            if check_ends(&state, &key) {
                return;
            }
            continue;
        };
        let sent_epoch = state.doubts.current();
        let present = match count {
            None => core.has_field(name, field).await,
            Some(call) => core
                .run(call, name)
                .await
                .map(|v| v.as_i64().is_some_and(|n| n > 0)),
        };
        match present {
            Ok(true) => {
                if loss.confirm(sent_epoch) {
                    crate::observe::lock_confirmed(name, field);
                }
                if loss.state() == HoldState::InDoubt {
                    // A newer doubt began while the check was in flight: check again.
                    tokio::time::sleep(retry).await;
                }
            }
            Ok(false) => {
                if !loss.is_lost() {
                    crate::observe::lock_lost(name, field, "gone after a reconnect");
                }
                loss.mark_lost();
            }
            Err(_) => {
                let next = Instant::now() + retry;
                tokio::time::sleep_until(loss.deadline().min(next)).await;
            }
        }
    }
}

/// Listens to the command connection's events for as long as the client lives.
pub(super) async fn watch_connection(core: Arc<Core>, state: Arc<WatchdogState>) {
    let redis = core.redis().clone();
    let mut errors = redis.error_rx();
    let mut reconnects = redis.reconnect_rx();
    let mut unresponsive = redis.unresponsive_rx();
    let mut changes = redis.cluster_change_rx();
    if core.is_clustered() {
        *state.doubts.routing.lock() = redis.cached_cluster_state();
    }
    loop {
        tokio::select! {
            e = errors.recv() => match e {
                Ok((_, Some(server))) => {
                    in_doubt(&core, &state, Node::Server(&server), "connection to its node lost")
                }
                // On a cluster, an error naming no node is a failed attempt to reconnect: the
                // node that dropped was named by its reader's error (and nodes still connected
                // did not restart), so it puts nothing more in doubt.
                Ok((_, None)) if core.is_clustered() => {}
                Ok((_, None)) | Err(RecvError::Lagged(_)) => {
                    in_doubt(&core, &state, Node::All, "connection lost")
                }
                Err(RecvError::Closed) => return,
            },
            e = unresponsive.recv() => match e {
                Ok(server) => in_doubt(&core, &state, Node::Server(&server), "its node stopped answering"),
                Err(RecvError::Lagged(_)) => in_doubt(&core, &state, Node::All, "a node stopped answering"),
                Err(RecvError::Closed) => return,
            },
            e = changes.recv() => match e {
                Ok(list) => {
                    for change in &list {
                        if let ClusterStateChange::Remove(server) = change {
                            in_doubt(&core, &state, Node::Server(server), "its node left the cluster");
                        }
                    }
                    routing_changed(&core, &state);
                }
                Err(RecvError::Lagged(_)) => {
                    in_doubt(&core, &state, Node::All, "cluster changes missed");
                    routing_changed(&core, &state);
                }
                Err(RecvError::Closed) => return,
            },
            e = reconnects.recv() => match e {
                Ok(_) | Err(RecvError::Lagged(_)) => decide_doubted(&core, &state),
                Err(RecvError::Closed) => return,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::service::watchdog::state::{tests::hold, Doubts};

    #[tokio::test(start_paused = true)]
    async fn a_doubt_clears_only_by_a_renewal_sent_after_it_began() {
        let doubts = Doubts::default();
        let loss = LossSignal::new(Instant::now() + Duration::from_secs(30));
        assert_eq!(loss.state(), HoldState::Held);

        // A renewal is sent, then the connection drops before its reply is applied.
        let before_drop = doubts.current();
        let e = doubts.next();
        assert!(loss.doubt(e), "reported once");
        assert_eq!(loss.state(), HoldState::InDoubt);
        assert!(!loss.is_lost(), "in doubt is not lost for good");
        assert!(
            !loss.confirm(before_drop),
            "a reply to a renewal sent before the drop does not clear the doubt"
        );
        assert_eq!(loss.state(), HoldState::InDoubt);

        // A second drop while in doubt: not reported again, and moves the epoch on.
        let after_first = doubts.current();
        let e2 = doubts.next();
        assert!(!loss.doubt(e2));
        assert!(
            !loss.confirm(after_first),
            "a renewal sent between the two drops does not clear the later doubt"
        );

        // The renewal on the new connection confirms it.
        assert!(loss.confirm(doubts.current()));
        assert_eq!(loss.state(), HoldState::Held);
        assert!(!loss.confirm(doubts.current()), "nothing left to clear");
    }

    #[tokio::test(start_paused = true)]
    async fn a_doubt_that_outlasts_the_deadline_is_a_loss_for_good() {
        let doubts = Doubts::default();
        let start = Instant::now();
        let loss = LossSignal::new(start + Duration::from_secs(2));
        loss.doubt(doubts.next());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(loss.state(), HoldState::Lost);
        // A late confirmation does not revive it.
        loss.confirm(doubts.current());
        loss.extend(Instant::now(), Instant::now() + Duration::from_secs(10));
        assert_eq!(loss.state(), HoldState::Lost);

        // A hold found gone while in doubt is lost, whatever comes after.
        let loss = LossSignal::new(Instant::now() + Duration::from_secs(30));
        loss.doubt(doubts.next());
        loss.mark_lost();
        assert!(!loss.confirm(doubts.current()));
        assert_eq!(loss.state(), HoldState::Lost);
        assert!(
            !loss.doubt(doubts.next()),
            "a lost hold is not reported in doubt"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn during_a_failover_nothing_confirms_a_hold_and_after_it_a_later_renewal_does() {
        let state = Arc::new(crate::service::watchdog::state::tests::state());
        let leased = LossSignal::new(Instant::now() + Duration::from_secs(30));
        let ends = Instant::now() + Duration::from_secs(30);
        state.holds.insert(
            HoldKey::new("b".into(), "f".into(), Arc::from([])),
            hold("b", 0, &[ends], leased.clone(), 1).into(),
        );
        let holds = FailoverHolds {
            core: Weak::new(),
            state: state.clone(),
        };
        let before = state.doubts.current();
        holds.began("test");
        assert!(holds.under_way());
        assert_eq!(leased.state(), HoldState::InDoubt);
        // A renewal sent during the failover (perhaps to the old master) carries 0.
        assert_eq!(state.doubts.current(), 0);
        assert!(!leased.confirm(state.doubts.current()));
        assert!(!leased.confirm(before), "nor one sent before it began");
        assert_eq!(leased.state(), HoldState::InDoubt);

        holds.ended();
        assert!(!holds.under_way());
        assert_eq!(
            leased.state(),
            HoldState::InDoubt,
            "until the new master confirms it"
        );
        let after = state.doubts.current();
        assert!(after > before);
        assert!(
            leased.confirm(after),
            "a renewal sent after the switch confirms it"
        );
        assert_eq!(leased.state(), HoldState::Held);
    }

    /// Issue 29: a doubt raised while the check of its leased holds is finishing (it looked,
    /// found nothing in doubt, and has not left yet) is checked: either that check goes on or
    /// a new one starts, never neither.
    #[test]
    fn a_doubt_raised_while_the_leased_check_finishes_is_checked() {
        let state = crate::service::watchdog::state::tests::state();
        let key = HoldKey::new("b".into(), "f".into(), Arc::from([]));
        let leased = LossSignal::new(Instant::now() + Duration::from_secs(30));
        let ends = Instant::now() + Duration::from_secs(30);
        state
            .holds
            .insert(key.clone(), hold("b", 0, &[ends], leased.clone(), 1).into());
        assert!(check_begins(&state, &key), "the first check starts");
        // The running check looks: nothing in doubt, it is about to end.
        assert!(doubted_lease(&state, &key).is_none());
        // A reconnect now: the hold is in doubt, and a check is asked for.
        assert!(leased.doubt(state.doubts.next()));
        let started = check_begins(&state, &key);
        let ended = check_ends(&state, &key);
        assert!(
            started || !ended,
            "the doubt is left unchecked until the deadline: no new check, and the running one ended"
        );
        if !ended {
            assert!(
                doubted_lease(&state, &key).is_some(),
                "the running check goes on"
            );
            leased.confirm(state.doubts.current());
            assert!(
                check_ends(&state, &key),
                "and ends once nothing is in doubt"
            );
        }
        assert!(
            check_begins(&state, &key),
            "the next doubt starts a check again"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn doubts_reach_watchdog_and_leased_holds_of_the_affected_node() {
        let state = crate::service::watchdog::state::tests::state();
        let renewed = LossSignal::new(Instant::now() + Duration::from_secs(30));
        state.holds.insert(
            HoldKey::new("a".into(), "f".into(), Arc::from([])),
            hold("a", 1, &[], renewed.clone(), 1).into(),
        );
        let leased = LossSignal::new(Instant::now() + Duration::from_secs(30));
        let ends = Instant::now() + Duration::from_secs(30);
        state.holds.insert(
            HoldKey::new("b".into(), "f".into(), Arc::from([])),
            hold("b", 0, &[ends], leased.clone(), 1).into(),
        );
        doubt_where(&state, |name| name != "b", "test");
        assert_eq!(renewed.state(), HoldState::InDoubt);
        assert_eq!(leased.state(), HoldState::Held, "not on the affected node");
        doubt_where(&state, |_| true, "test");
        assert_eq!(leased.state(), HoldState::InDoubt);
    }
}
