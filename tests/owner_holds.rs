//! One owner's several holds of one lock (issue 16): what each guard knows after a re-entry
//! with another lease, a stale guard of an earlier hold, a fair waiter cancelled during its
//! give-up, and a local queue whose holder's field vanished.

mod common;

use std::time::Duration;

use common::{
    proxy::Proxy,
    replica::{cli, ReplicaSet},
    Admin, RedisServer,
};
use redisson_lock::{Client, Config, ErrorKind, LockGuard, RLock, UnlockOutcome};
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

/// Item 1: a leased hold (20 s) re-entered with a 1 s lease: the key then lives 1 s, and the
/// outer guard must know it (its deadline comes closer), not report the lock valid for 20 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shorter_leased_re_entry_moves_the_outer_leased_deadline_closer() {
    let (_s, c, admin) = standalone(Config::default()).await;
    let lock = c.get_lock("reentry:leased");
    let outer = leased(&lock, Duration::from_secs(20)).await;
    let inner = leased(&lock, SECOND).await;
    let after = Instant::now();
    assert!(
        outer.valid_until() <= after + SECOND,
        "the outer guard claims the lock {:?} past the inner lease",
        outer.valid_until() - (after + SECOND)
    );
    assert_eq!(inner.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            !admin.exists("reentry:leased").await
        })
        .await,
        "the key expires with the 1 s TTL the last calls set"
    );
    assert!(
        outer.is_lost(),
        "the key is gone but the outer guard says held until {:?} from now",
        outer.valid_until() - Instant::now()
    );
    tokio::time::timeout(Duration::from_millis(100), outer.lost())
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
    let lock = c.get_lock("stale:replaced");
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
    let other = c.get_lock("stale:replaced");
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
    let _held = holder.get_fair_lock(name).lock().await.unwrap();
    let waiter = waiting.get_fair_lock(name);
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
