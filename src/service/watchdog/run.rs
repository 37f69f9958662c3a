//! One renewal run, every `lock_watchdog_timeout / 3` after the previous one completed (or at
//! once when a hold's deadline came closer, or a doubt wants deciding): it
//! [collects](collect) the holds due, [batches](batch) them `lock_watchdog_batch_size` per
//! script call, and [applies](apply) each call's reply: a hold whose owner field is gone is
//! dropped and its holder told through its [`LossSignal`]. Errors keep the registrations and
//! are retried sooner, until the holder's deadline passes: then the hold is reported lost and
//! no longer renewed, so a holder is never told "lost" and later "held" again. A renewal sent
//! after a doubt began confirms its holds; one that gets no reply puts them in doubt.

use std::{
    sync::{atomic::Ordering, Arc},
    time::Duration,
};

use tokio::time::Instant;

use super::{
    loss::{valid_until, LossSignal},
    shape::{renewal_call, Layout, RenewalShape},
    state::{HoldKey, WatchdogState},
};
use crate::{
    conn::{core::Core, scripts::ScriptCall},
    error::Error,
};

/// The renewal loop of one client, for as long as it lives.
pub(super) async fn run(core: Arc<Core>, state: Arc<WatchdogState>) {
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
            forget_urgent(&state);
            state.wake.notified().await;
            // A hold came: its first renewal is one period away. Not idle again before that,
            // even if it is gone by now: with short holds coming and going (a hot lock taken
            // in turn, one owner locking in a loop), idling whenever none is held meant one
            // wake-up of this task, on another thread, per acquisition.
            delay = period;
        }
        pause(&state, delay).await;
        let failed = renew_all(&core, &state, timeout).await;
        delay = if failed { retry } else { period };
    }
}

/// A hold due for renewal, as collected at the start of a run.
pub(super) struct Item {
    pub(super) key: HoldKey,
    pub(super) shape: RenewalShape,
    pub(super) epoch: u64,
    pub(super) loss: Arc<LossSignal>,
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
    let lease_ms = timeout.as_millis() as u64;
    let groups = groups(
        &items,
        core.config().lock_watchdog_batch_size,
        core.is_clustered(),
    );
    state
        .renew_calls
        .fetch_add(groups.len() as u64, Ordering::Relaxed);
    let items = &items;
    // Each call is made when it is sent, at most `RENEWALS_IN_FLIGHT` at once: a hundred
    // thousand holds are a thousand calls, and all of them made and sent at once were
    // tens of MB of arguments and buffers for a moment (which the allocator then keeps).
    let calls = groups.into_iter().map(|entries| async move {
        let b = Batch {
            call: group_call(items, &entries, lease_ms),
            entries,
        };
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
    let mut replies =
        futures::StreamExt::buffer_unordered(futures::stream::iter(calls), RENEWALS_IN_FLIGHT);
    while let Some(replies) = futures::StreamExt::next(&mut replies).await {
        for reply in replies {
            failed |= apply_reply(state, items, timeout, reply);
        }
    }
    failed
}

/// At most this many renewal calls of one run are in flight at once (each of up to
/// `lock_watchdog_batch_size` holds): enough to keep the connection's pipeline full, few enough
/// that a run over a hundred thousand holds keeps a few calls' arguments in memory, not all.
const RENEWALS_IN_FLIGHT: usize = 32;

/// One renewal call's reply: its holds (indexes into the run's items), when it was sent and in
/// which doubt epoch, and the reply flags or the error.
type Reply = (Vec<usize>, Instant, u64, crate::error::Result<Vec<i64>>);

/// Applies one renewal call's reply to its holds; `true` when the call failed.
fn apply_reply(state: &WatchdogState, items: &[Item], timeout: Duration, reply: Reply) -> bool {
    let (entries, sent_at, sent_epoch, reply) = reply;
    match reply {
        Ok(flags) if flags.len() == entries.len() => {
            let until = valid_until(sent_at, timeout);
            for (&i, flag) in entries.iter().zip(flags) {
                apply(state, &items[i], flag == 1, sent_at, until);
                if flag == 1 {
                    confirmed(&items[i], sent_epoch);
                }
            }
            false
        }
        Ok(flags) => {
            log::warn!(
                "renewal script answered {} flags for {} entries",
                flags.len(),
                entries.len()
            );
            true
        }
        Err(e) => {
            crate::observe::renewal_failed(entries.len(), &e);
            let batch: Vec<&Item> = entries.iter().map(|&i| &items[i]).collect();
            renewal_failed(state, &batch, &e);
            true
        }
    }
}

/// Takes the holds due: forgets (and reports lost) those whose deadline has passed, skips those
/// that reached `max_renewals` (they stay registered until their deadline passes) and those with
/// no part to renew (leased: they end with their leases).
fn collect(state: &WatchdogState, now: Instant, max_renewals: Option<u64>) -> Vec<Item> {
    let mut items = Vec::with_capacity(state.holds.len());
    let mut expired = Vec::new();
    for entry in state.holds.iter() {
        let hold = entry.value();
        if hold.loss.deadline() <= now || hold.loss.is_lost() {
            expired.push((entry.key().clone(), hold.epoch));
        } else if hold.is_renewed() && max_renewals.is_none_or(|m| hold.renewals < m) {
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
            if hold.is_renewed() {
                crate::observe::lock_lost(&key.name, &key.field, "not renewed before its deadline");
            }
            hold.loss.mark_lost();
        }
    }
    items
}

/// Groups items into renewal calls of at most `size` entries each, one entry per item (per
/// hold: a read lock with several readers of this client is listed once per reader, so each
/// reply flag is one reader's); on a cluster, calls are per slot, so a period costs
/// ⌈holds per slot / size⌉ calls for each slot in use. (The run makes each call as it sends
/// it: [`groups`] and [`group_call`].)
#[cfg(test)]
fn batch(items: &[Item], size: usize, lease_ms: u64, clustered: bool) -> Vec<Batch> {
    groups(items, size, clustered)
        .into_iter()
        .map(|entries| Batch {
            call: group_call(items, &entries, lease_ms),
            entries,
        })
        .collect()
}

/// The renewal call over the items `entries` (one group of [`groups`]).
fn group_call(items: &[Item], entries: &[usize], lease_ms: u64) -> ScriptCall {
    let described: Vec<(&RenewalShape, Vec<&str>)> = entries
        .iter()
        .map(|&i| (&items[i].shape, vec![&*items[i].key.field]))
        .collect();
    renewal_call(&described, lease_ms)
}

/// The items of each renewal call (see [`batch`]), made before the calls are.
fn groups(items: &[Item], size: usize, clustered: bool) -> Vec<Vec<usize>> {
    // One script per call, and on a cluster one slot per call (a script may only touch keys of
    // one slot): a stable sort keeps each call's entries in collection order.
    let call_of = |shape: &RenewalShape| {
        let slot = match (clustered, shape.keys.first_bytes()) {
            (true, Some(key)) => fred::util::redis_keyslot(key),
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
            batches.push(chunk.to_vec());
        }
    }
    batches
}

/// Applies one entry's flag to one item: renewed moves its deadline, gone drops it and tells
/// its holder. Only the registration the item was collected from is touched (epoch check).
/// A hold found gone also tells its kind's local queue, whose head then attempts at once (no
/// unlock message comes when a field is deleted, evicted or lost in a failover).
pub(super) fn apply(
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
                if item.shape.layout == Layout::PermitLease {
                    crate::observe::permit_renewed();
                }
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

/// Forgets a request for a run at once made while there was nothing to renew (the renewal
/// loop calls this when it goes idle), so the next hold's first renewal comes on time.
fn forget_urgent(state: &WatchdogState) {
    use futures::FutureExt;
    let _ = state.urgent.notified().now_or_never();
}

/// Sleeps `delay` before the next renewal run, or less if a run is asked for at once.
async fn pause(state: &WatchdogState, delay: std::time::Duration) {
    tokio::select! {
        _ = tokio::time::sleep(delay) => {}
        _ = state.urgent.notified() => {}
    }
}

/// A renewal sent at `sent_epoch` found the item's owner field and renewed it.
fn confirmed(item: &Item, sent_epoch: u64) {
    if item.loss.confirm(sent_epoch) {
        crate::observe::lock_confirmed(&item.key.name, &item.key.field);
    }
}

/// A renewal call failed: a timeout or a lost connection puts the holds it was renewing in
/// doubt (their node did not answer); other errors change nothing.
fn renewal_failed(state: &WatchdogState, items: &[&Item], error: &Error) {
    if !matches!(error, Error::Timeout(_) | Error::Connection(_)) {
        return;
    }
    let epoch = state.doubts.next();
    for item in items {
        if item.loss.doubt(epoch) {
            crate::observe::lock_in_doubt(&item.key.name, &item.key.field, "renewal got no reply");
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use fred::types::{Key, Value};

    use super::*;
    use crate::conn::scripts::{tests::assert_matches_header, ScriptId};
    use crate::service::watchdog::{state::tests::state, state::Hold};

    pub(crate) fn item(name: &str, field: &str, shape: RenewalShape) -> Item {
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
            keys: crate::service::watchdog::ShapeKeys::from([Key::from(name), Key::from(prefix)]),
            layout: Layout::PerLock,
            values: Arc::from([]),
        }
    }

    #[test]
    fn per_hold_batches_list_one_key_and_one_field_per_hold() {
        let items: Vec<Item> = (0..5)
            .map(|i| {
                item(
                    &format!("n{i}"),
                    &format!("f{i}"),
                    RenewalShape::per_hold(format!("n{i}")),
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
                Hold {
                    renewed: 1,
                    leases: Vec::new(),
                    leased: false,
                    kept: Vec::new(),
                    shape: RenewalShape::per_hold(name),
                    queue: None,
                    presence: None,
                    last_sent: now,
                    epoch: 1,
                    renewals,
                    loss: LossSignal::new(deadline),
                }
                .into(),
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
            Hold {
                renewed: 1,
                leases: Vec::new(),
                leased: false,
                kept: Vec::new(),
                shape: RenewalShape::per_hold("n"),
                queue: None,
                presence: None,
                last_sent: Instant::now(),
                epoch: 7,
                renewals: 0,
                loss: loss.clone(),
            }
            .into(),
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

    #[tokio::test(start_paused = true)]
    async fn a_run_asked_for_at_once_cuts_the_pause_unless_it_was_forgotten_when_idle() {
        let state = state();
        let start = Instant::now();
        state.urgent.notify_one();
        pause(&state, Duration::from_secs(10)).await;
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "a reconnect: renew at once"
        );

        state.urgent.notify_one();
        forget_urgent(&state);
        pause(&state, Duration::from_secs(10)).await;
        assert_eq!(
            start.elapsed(),
            Duration::from_secs(10),
            "a request made while idle does not cut the next hold's first period"
        );
    }
}
