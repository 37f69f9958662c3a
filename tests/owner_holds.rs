//! One owner's several holds of one lock (issue 16): what each guard knows after a re-entry
//! with another lease, a stale guard of an earlier hold, a fair waiter cancelled during its
//! give-up, and a local queue whose holder's field vanished.

use redisson_lock_test_kit as common;

use std::time::Duration;

use common::{
    proxy::{Direction, Proxy},
    replica::{cli, ReplicaSet},
    Admin, RedisServer,
};
use redisson_lock::{
    Client, Config, Error, ErrorKind, HoldState, Kind, Lock, LockGuard, RLock, UnlockOutcome,
};
use tokio::time::Instant;

const SECOND: Duration = Duration::from_secs(1);

async fn client(url: &str, config: Config) -> Client {
    Client::connect(url, config).await.expect("connect")
}

/// One attempt with a lease, which must succeed (a free lock, or a re-entry).
async fn leased(lock: &RLock, lease: Duration) -> LockGuard {
    lock.try_lock_with_lease(Duration::ZERO, lease)
        .await
        .unwrap()
        .expect("a free lock or a re-entry")
}

/// A server of the test's own, a client of it with `config`, and a raw connection.
async fn standalone(config: Config) -> (RedisServer, Client, Admin) {
    let s = RedisServer::start();
    let c = client(&s.url(), config).await;
    let admin = Admin::connect(&s.url()).await;
    (s, c, admin)
}

/// Polls for `span`: the lock key must exist at every look (`why` names who should keep it).
async fn key_lives_for(admin: &Admin, name: &str, span: Duration, why: &str) {
    let end = Instant::now() + span;
    while Instant::now() < end {
        assert!(admin.exists(name).await, "{why}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Item 1: a watchdog hold re-entered with a 2 s lease. The re-entry and the partial release of
/// the inner hold set the key's TTL to 2 s; the watchdog must renew the hold (its guard still
/// holds it) before that TTL runs out, and the outer guard must never claim a hold whose key is
/// gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_leased_re_entry_does_not_let_a_watchdog_hold_expire() {
    // The default 30 s watchdog: its regular renewal comes 10 s after the last one.
    let (_s, c, admin) = standalone(Config::default()).await;
    let lock = c.get_lock("reentry:wd");
    let outer = lock.lock().await.unwrap();
    // A 2 s lease: the watchdog's next regular run is 10 s away.
    let inner = leased(&lock, 2 * SECOND).await;
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    key_lives_for(
        &admin,
        "reentry:wd",
        Duration::from_millis(3000),
        "the key expired with the inner lease while a watchdog guard holds it",
    )
    .await;
    assert_eq!(inner.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    key_lives_for(
        &admin,
        "reentry:wd",
        Duration::from_millis(3000),
        "the key expired after the inner release while a watchdog guard holds it",
    )
    .await;
    assert!(!outer.is_lost());
    assert!(
        admin.pttl("reentry:wd").await > 2_000,
        "renewed to the watchdog timeout"
    );
    assert_eq!(outer.unlock().await.unwrap(), UnlockOutcome::Released);
    assert!(!admin.exists("reentry:wd").await);
}

/// Item 1, as issue 38 settled it: a leased hold (20 s) re-entered with a 1 s lease keeps the
/// longer part (the key lives 20 s, and both guards say so); releasing the longer part sets the
/// TTL to what the shorter has left, and the guard left knows it: lost when the key expires,
/// not valid for 20 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_leased_re_entry_keeps_the_longer_part_until_it_is_released() {
    let (_s, c, admin) = standalone(Config::default()).await;
    let lock = c.get_lock("reentry:leased");
    let outer = leased(&lock, Duration::from_secs(20)).await;
    let inner = leased(&lock, SECOND).await;
    assert!(
        admin.pttl("reentry:leased").await > 19_000,
        "the longer part's TTL"
    );
    let far = Instant::now() + Duration::from_secs(19);
    assert!(outer.valid_until() > far && inner.valid_until() > far);
    let released = Instant::now();
    assert_eq!(outer.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    assert!(
        inner.valid_until() <= released + SECOND,
        "the guard left claims the lock {:?} past its lease",
        inner.valid_until() - (released + SECOND)
    );
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            !admin.exists("reentry:leased").await
        })
        .await,
        "the key expires with what the 1 s part had left"
    );
    assert!(
        inner.is_lost(),
        "the key is gone but the guard says held until {:?} from now",
        inner.valid_until() - Instant::now()
    );
    tokio::time::timeout(Duration::from_millis(100), inner.lost())
        .await
        .expect("lost() resolved");
}

/// Item 1: the `NotReplicated` undo of a leased re-entry releases with the inner lease (2 s):
/// the watchdog hold it re-entered must still be renewed, and its guard stay honest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreplicated_leased_re_entry_undone_does_not_let_the_watchdog_hold_expire() {
    let set = ReplicaSet::start().await;
    let port = set.master.port();
    let c = client(
        &set.url(),
        Config::default().replicas_sync_timeout(Duration::from_millis(300)),
    )
    .await;
    let lock = c.get_lock("reentry:unreplicated");
    let outer = lock.lock().await.unwrap();
    set.proxy.freeze();
    let err = lock
        .try_lock_with_lease(Duration::ZERO, 2 * SECOND)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotReplicated, "{err:?}");
    assert_eq!(
        lock.hold_count().await.unwrap(),
        1,
        "only the re-entry undone"
    );
    let end = Instant::now() + Duration::from_millis(3000);
    while Instant::now() < end {
        let exists = cli(port, &["EXISTS", "reentry:unreplicated"]).await;
        assert_eq!(
            exists,
            "1",
            "the key expired with the undo's 2 s TTL while a watchdog guard holds it (guard lost: \
             {})",
            outer.is_lost()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(!outer.is_lost());
    set.proxy.unfreeze();
    assert_eq!(outer.unlock().await.unwrap(), UnlockOutcome::Released);
}

/// Item 7: a guard whose hold was lost (deleted behind its back) and is dropped after its owner
/// took the lock again must not stop the renewal of the new hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_guard_dropped_after_the_owner_took_the_lock_again_keeps_its_renewal() {
    let (_s, c, admin) =
        standalone(Config::default().lock_watchdog_timeout(Duration::from_millis(1000))).await;
    let lock = c.get_lock("stale:guard");
    let stale = lock.lock().await.unwrap();
    admin.cmd("DEL", vec!["stale:guard".into()]).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), stale.lost())
        .await
        .expect("the watchdog finds the hold gone");
    let held = lock.lock().await.unwrap();
    // A leased re-entry of the new hold (count 2), so the stale guard's release does not end it.
    let leased = leased(&lock, Duration::from_secs(60)).await;
    drop(stale);
    key_lives_for(
        &admin,
        "stale:guard",
        Duration::from_secs(3),
        "the new watchdog hold was not renewed after the stale guard's drop",
    )
    .await;
    assert!(!held.is_lost());
    assert_eq!(c.stats().watchdog_holds, 1);
    assert_eq!(
        lock.hold_count().await.unwrap(),
        2,
        "the stale guard released one of the new holds"
    );
    drop(leased);
    drop(held);
}

/// Item 7 (beside it): the usual way to take a lost lock again, `guard = lock.lock().await?`,
/// drops the lost guard after the new acquisition; its release must not free the new hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_guard_replaced_by_a_new_acquisition_does_not_release_it() {
    let config = Config::default().lock_watchdog_timeout(Duration::from_millis(1000));
    let (_s, c, admin) = standalone(config).await;
    let lock = c.get_lock_with_owner("stale:replaced", redisson_lock::Owner::new());
    let mut guard = lock.lock().await.unwrap();
    admin
        .cmd("DEL", vec!["stale:replaced".into()])
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("the watchdog finds the hold gone");
    guard = lock.lock().await.unwrap();
    // Another owner's attempt waits for the background releases of the lock first.
    let other = c.get_lock_with_owner("stale:replaced", redisson_lock::Owner::new());
    assert!(
        other.try_lock().await.unwrap().is_none(),
        "the lost guard's drop freed the lock its owner holds again"
    );
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert!(!guard.is_lost());
    assert_eq!(guard.unlock().await.unwrap(), UnlockOutcome::Released);
}

/// Item 7: a fair waiter whose wait ran out and which is cancelled while its give-up call is
/// under way (here: between the give-up's `NOSCRIPT` and its `EVAL`) still leaves the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fair_waiter_cancelled_during_its_give_up_still_leaves_the_queue() {
    let s = RedisServer::start();
    let proxy = Proxy::start(s.port()).await;
    let holder = client(&s.url(), Config::default()).await;
    let waiting = client(&proxy.url(), Config::default()).await;
    let admin = Admin::connect(&s.url()).await;
    let name = "fair:give-up-cancelled";
    let _held = holder
        .get_fair_lock_with_owner(name, redisson_lock::Owner::new())
        .lock()
        .await
        .unwrap();
    let waiter = waiting.get_fair_lock_with_owner(name, redisson_lock::Owner::new());
    let field = waiter.owner_field().to_owned();
    let wait = Duration::from_secs(3);
    let started = Instant::now();
    let task = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.try_lock_for(wait).await })
    };
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            admin.fair_queue(name).await.contains(&field) && waiting.stats().waiters == 1
        })
        .await,
        "the waiter queued and subscribed"
    );
    // The scripts are gone from the server: the give-up's EVALSHA answers NOSCRIPT, and that
    // reply is held until the waiter has been cancelled. (An attempt that meets them first is
    // let through: its EVAL loads only the acquisition script.)
    admin.cmd("SCRIPT", vec!["FLUSH".into()]).await.unwrap();
    let noscript = loop {
        let held = proxy.hold_next_reply_matching(|b| b.windows(8).any(|w| w == b"NOSCRIPT"));
        held.wait_caught(Duration::from_secs(10))
            .await
            .expect("the give-up sent after the wait ran out");
        if started.elapsed() >= wait {
            break held;
        }
    };
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert!(
        admin.fair_queue(name).await.contains(&field),
        "cancelled before its give-up ran"
    );
    noscript.release();
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            !admin.fair_queue(name).await.contains(&field)
        })
        .await,
        "the cancelled waiter is still queued: {:?}",
        admin.fair_queue(name).await
    );
}

/// Item 8: when the watchdog finds a local holder's field gone (deleted, evicted, lost in a
/// failover: no unlock message), the local queue's head attempts at once instead of sleeping
/// out the TTL it last saw (about 4 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_found_gone_by_the_watchdog_wakes_the_local_queue_head_at_once() {
    // Renewal every 2 s; a busy head sleeps up to the 6 s TTL.
    let config = Config::default().lock_watchdog_timeout(Duration::from_secs(6));
    let (_s, c, admin) = standalone(config).await;
    let name = "queue:gone";
    let first = c.get_lock(name);
    let held = first.lock().await.unwrap();
    let second = c.get_lock(name);
    let task = tokio::spawn(async move { second.try_lock_for(Duration::from_secs(30)).await });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            first.local_waiters() == 1
        })
        .await
    );
    // The field vanishes without an unlock message (the hash empties, so the key goes).
    admin
        .cmd("HDEL", vec![name.into(), first.owner_field().into()])
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), held.lost())
        .await
        .expect("the watchdog finds the hold gone");
    let found = Instant::now();
    let got = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("acquired")
        .unwrap()
        .unwrap()
        .expect("acquired within its wait");
    assert!(
        found.elapsed() < 2 * SECOND,
        "the head acquired {:?} after the hold was found gone",
        found.elapsed()
    );
    got.unlock().await.unwrap();
}

/// Item 1 (beside it): `force_unlock` tells this client's holders their lock is lost — leased
/// holders as well as watchdog ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_unlock_tells_leased_holders_of_this_client_at_once() {
    let (_s, c, _admin) = standalone(Config::default()).await;
    let lock = c.get_lock("force:leased");
    let leased = leased(&lock, Duration::from_secs(60)).await;
    let other = c.get_lock("force:leased");
    assert!(other.force_unlock().await.unwrap());
    assert!(
        leased.is_lost(),
        "the lock was deleted under a leased guard"
    );
}

// Issue 29, defect 2: a re-acquisition by the same owner after a loss nobody noticed yet (the
// key deleted behind its back, a restart without data) is a new hold, not a re-entry of the
// stale ones: the Java-style nested pattern (outer `lock()`, the loss, inner `lock()` +
// `unlock()` on the same handle) must leave the outer guards Lost, and their unlocks must not
// release the new hold.

/// The scenario on one kind: `mine` holds an outer watchdog hold (and, where the kind
/// re-enters, a leased re-entry), its key `key` is deleted, `mine` locks again. `theirs` is
/// another client's lock that conflicts with `mine`.
async fn a_re_acquisition_after_an_unseen_loss_is_a_new_hold<K: Kind, O: Kind>(
    admin: &Admin,
    key: &str,
    mine: &Lock<K>,
    theirs: &Lock<O>,
    reenters: bool,
) {
    let what = format!("{} lock {key}", K::NAME);
    let outer = mine.lock().await.unwrap();
    let outer_leased = if reenters {
        Some(
            mine.try_lock_with_lease(Duration::ZERO, 60 * SECOND)
                .await
                .unwrap()
                .expect("a re-entry"),
        )
    } else {
        None
    };
    admin.cmd("DEL", vec![key.into()]).await.unwrap();
    let inner = mine.lock().await.unwrap();
    assert_eq!(
        outer.state(),
        HoldState::Lost,
        "{what}: the outer watchdog hold"
    );
    if let Some(g) = &outer_leased {
        assert_eq!(g.state(), HoldState::Lost, "{what}: the outer leased hold");
    }
    assert_eq!(inner.state(), HoldState::Held, "{what}: the new hold");
    // A stale guard's unlock releases nothing: the new hold stays.
    if let Some(g) = outer_leased {
        let unlocked = g.unlock().await;
        assert!(
            matches!(unlocked, Err(Error::NotHeld { .. })),
            "{what}: {unlocked:?}"
        );
        assert_eq!(
            mine.hold_count().await.unwrap(),
            1,
            "{what}: new hold released"
        );
    }
    assert_eq!(
        inner.unlock().await.unwrap(),
        UnlockOutcome::Released,
        "{what}"
    );
    assert!(!mine.is_locked().await.unwrap(), "{what}");
    let t = theirs
        .try_lock()
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{what}: free for another client"));
    assert_eq!(
        outer.state(),
        HoldState::Lost,
        "{what}: beside another client's hold"
    );
    let unlocked = outer.unlock().await;
    assert!(
        matches!(unlocked, Err(Error::NotHeld { .. })),
        "{what}: {unlocked:?}"
    );
    assert_eq!(t.state(), HoldState::Held, "{what}");
    assert!(
        theirs.is_locked().await.unwrap(),
        "{what}: theirs still held"
    );
    t.unlock().await.unwrap();
}

/// The owner's count found lower than this client knew but not zero (a re-entry's increment
/// lost in a failover to a replica that missed it; here an `HINCRBY -1` behind the client's
/// back, after a partial unlock) is an unseen loss too: the next acquisition leaves the earlier
/// holds lost, and their unlocks release nothing of the new one. Otherwise the two earlier
/// guards stayed `Held` on a count of one, and their two unlocks freed the lock under the new
/// guard. A re-entry after a partial unlock alone loses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_acquisition_that_finds_its_owners_count_lower_leaves_the_earlier_holds_lost() {
    let (s, c, admin) = standalone(Config::default()).await;
    let other = client(&s.url(), Config::default()).await;
    let name = "lower:count";
    let mine = c.get_lock(name);
    let outer = mine.lock().await.unwrap();
    let field = outer.owner_field().to_owned();
    let once = mine.lock().await.unwrap();
    assert_eq!(once.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    // The count this client knows is 1 again: a re-entry finds what it knew.
    let second = mine.lock().await.unwrap();
    assert_eq!(
        outer.state(),
        HoldState::Held,
        "a re-entry after a partial unlock"
    );
    let third = mine.lock().await.unwrap();
    assert_eq!(third.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    // Known: 2. On the server: 1.
    admin
        .cmd(
            "HINCRBY",
            vec![name.into(), field.clone().into(), (-1).into()],
        )
        .await
        .unwrap();
    let inner = mine.lock().await.unwrap();
    assert_eq!(outer.state(), HoldState::Lost, "the outer hold");
    assert_eq!(second.state(), HoldState::Lost, "the re-entry");
    assert_eq!(inner.state(), HoldState::Held, "the new hold");
    for stale in [second, outer] {
        let unlocked = stale.unlock().await;
        assert!(
            matches!(unlocked, Err(Error::NotHeld { .. })),
            "a stale guard's unlock: {unlocked:?}"
        );
    }
    assert_eq!(inner.state(), HoldState::Held);
    assert!(
        admin.hgetall(name).await.contains_key(&field),
        "the new hold is on the server"
    );
    assert!(
        other.get_lock(name).try_lock().await.unwrap().is_none(),
        "another client cannot take the lock under the new guard"
    );
    inner.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_acquisition_after_an_unseen_loss_leaves_the_earlier_holds_lost_for_every_kind() {
    // The default 30 s watchdog: no renewal notices the loss during the test.
    let (s, c, admin) = standalone(Config::default()).await;
    let other = client(&s.url(), Config::default()).await;
    a_re_acquisition_after_an_unseen_loss_is_a_new_hold(
        &admin,
        "unseen:r",
        &c.get_lock("unseen:r"),
        &other.get_lock("unseen:r"),
        true,
    )
    .await;
    a_re_acquisition_after_an_unseen_loss_is_a_new_hold(
        &admin,
        "unseen:f",
        &c.get_fair_lock("unseen:f"),
        &other.get_fair_lock("unseen:f"),
        true,
    )
    .await;
    a_re_acquisition_after_an_unseen_loss_is_a_new_hold(
        &admin,
        "unseen:x",
        &c.get_fenced_lock("unseen:x"),
        &other.get_fenced_lock("unseen:x"),
        true,
    )
    .await;
    a_re_acquisition_after_an_unseen_loss_is_a_new_hold(
        &admin,
        "unseen:s",
        &c.get_spin_lock("unseen:s"),
        &other.get_spin_lock("unseen:s"),
        true,
    )
    .await;
    a_re_acquisition_after_an_unseen_loss_is_a_new_hold(
        &admin,
        "unseen:rw",
        c.get_read_write_lock("unseen:rw").read_lock(),
        other.get_read_write_lock("unseen:rw").write_lock(),
        true,
    )
    .await;
    a_re_acquisition_after_an_unseen_loss_is_a_new_hold(
        &admin,
        "unseen:rw",
        c.get_read_write_lock("unseen:rw").write_lock(),
        other.get_read_write_lock("unseen:rw").write_lock(),
        true,
    )
    .await;
    a_re_acquisition_after_an_unseen_loss_is_a_new_hold(
        &admin,
        "unseen:g",
        &c.get_group_lock("unseen:g", ["a", "b"]),
        &other.get_group_lock("unseen:g", ["b"]),
        true,
    )
    .await;
    a_re_acquisition_after_an_unseen_loss_is_a_new_hold(
        &admin,
        "unseen:nr",
        &c.get_non_reentrant_lock("unseen:nr"),
        &other.get_lock("unseen:nr"),
        false,
    )
    .await;
}

/// The same across a doubt: a leased hold in doubt after a connection drop, whose check after
/// the reconnect failed (its connection dropped again), is not confirmed by the owner's field
/// of a hold its owner took after the loss.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_in_doubt_is_not_confirmed_by_a_re_acquisition_after_its_loss() {
    let s = RedisServer::start();
    let proxy = Proxy::start(s.port()).await;
    let retry = 2 * SECOND;
    let config = Config::default()
        .timeout(Duration::from_millis(500))
        .retry_delay(retry)
        .reconnect_max_delay(Duration::from_millis(100));
    let c = client(&proxy.url(), config).await;
    let admin = Admin::connect(&s.url()).await;
    let lock = c.get_lock("unseen:doubt");
    let outer = leased(&lock, 60 * SECOND).await;
    admin.cmd("DEL", vec!["unseen:doubt".into()]).await.unwrap();
    // The leased hold's check after the reconnect (`HEXISTS`) is caught on its way to the
    // server, and its connection dropped: the check fails and waits `retry` to try again.
    let check = proxy.hold_next(
        Direction::Upstream,
        Some(Box::new(|chunk: &[u8]| {
            chunk.windows(7).any(|w| w.eq_ignore_ascii_case(b"HEXISTS"))
        })),
    );
    proxy.reset();
    assert!(
        check.wait_caught(10 * SECOND).await.is_some(),
        "the check after the reconnect"
    );
    assert_eq!(outer.state(), HoldState::InDoubt);
    proxy.reset();
    // Back on a new connection (an acquisition sent while the connection drops fails).
    assert!(common::eventually(10 * SECOND, || async { lock.is_locked().await.is_ok() }).await);
    let inner = lock.lock().await.unwrap();
    assert_eq!(inner.state(), HoldState::Held);
    // The check's next try (after `retry`) finds the owner's field, the new hold's.
    let end = Instant::now() + retry + 2 * SECOND;
    while Instant::now() < end {
        assert_ne!(
            outer.state(),
            HoldState::Held,
            "a hold deleted while in doubt came back held"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(outer.state(), HoldState::Lost);
    let unlocked = outer.unlock().await;
    assert!(
        matches!(unlocked, Err(Error::NotHeld { .. })),
        "{unlocked:?}"
    );
    assert_eq!(lock.hold_count().await.unwrap(), 1, "the new hold stays");
    assert_eq!(inner.unlock().await.unwrap(), UnlockOutcome::Released);
}

/// The same when the client knew the loss was possible: a leased guard kept past its lease
/// (its hold expired, the owner's count forgotten), then the owner locks again. The stale
/// guard's unlock and drop release nothing of the new hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guard_kept_past_its_lease_releases_nothing_of_its_owners_next_hold() {
    let (_s, c, admin) = standalone(Config::default()).await;
    let lock = c.get_lock("unseen:expired");
    let stale = leased(&lock, Duration::from_millis(300)).await;
    let dropped = leased(&lock, Duration::from_millis(300)).await;
    assert!(
        common::eventually(5 * SECOND, || async {
            !admin.exists("unseen:expired").await
        })
        .await
    );
    // The client's ledger forgets the count once the hold can no longer last (swept every
    // second): wait for that, so the next acquisition starts from nothing known.
    assert!(
        common::eventually(5 * SECOND, || async { c.stats().owner_entries == 0 }).await,
        "the ledger entry is swept"
    );
    let held = lock.lock().await.unwrap();
    assert_eq!(stale.state(), HoldState::Lost);
    drop(dropped);
    let unlocked = stale.unlock().await;
    assert!(
        matches!(unlocked, Err(Error::NotHeld { .. })),
        "{unlocked:?}"
    );
    key_lives_for(
        &admin,
        "unseen:expired",
        SECOND,
        "a stale guard released the new hold",
    )
    .await;
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert_eq!(held.state(), HoldState::Held);
    assert_eq!(held.unlock().await.unwrap(), UnlockOutcome::Released);
}
