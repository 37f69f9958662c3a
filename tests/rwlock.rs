//! Read-write lock (protocol §8): wire state, timeout keys, messages, interop with simulated
//! Java readers, Redisson's portable RedissonReadWriteLockTest cases.

use common::{acquire_with, backend_tests};
use redisson_lock_test_kit as common;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use common::{eventually, Admin, Backend, RedisServer};
use fred::interfaces::KeysInterface;
use redisson_lock::{Client, Config, Error, HoldState, Ttl, UnlockOutcome};
use tokio::time::Instant;

/// Bound of every wait on an event.
const T: Duration = Duration::from_secs(15);

/// The read-write lock's channel.
fn chan(name: &str) -> String {
    format!("redisson_rwlock:{{{name}}}")
}

/// The timeout key of a reader's `k`-th hold.
fn timeout_key(name: &str, field: &str, k: u32) -> String {
    format!("{{{name}}}:{field}:rwlock_timeout:{k}")
}

async fn read_holds_write_timeout_keys_and_messages_as_specified(b: Backend) {
    let n = b.name("rw");
    let client = b.client().await;
    let admin = b.admin().await;
    let mut rec = b.recorder(&[&chan(&n)]).await;
    let rw = client.get_read_write_lock(&n);
    let f = rw.read_lock().owner_field().to_string();

    let r1 = rw.read_lock().lock().await.unwrap();
    assert_eq!(
        admin.hgetall(&n).await,
        [
            ("mode".to_string(), "read".to_string()),
            (f.clone(), "1".into())
        ]
        .into()
    );
    assert_eq!(admin.type_of(&timeout_key(&n, &f, 1)).await, "string");
    assert!((29_000..=30_000).contains(&admin.pttl(&timeout_key(&n, &f, 1)).await));
    assert!((29_000..=30_000).contains(&admin.pttl(&n).await));

    let r2 = rw.read_lock().lock().await.unwrap();
    assert_eq!(admin.hgetall(&n).await.get(&f).unwrap(), "2");
    assert!(admin.exists(&timeout_key(&n, &f, 2)).await);
    assert_eq!(r2.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    assert!(
        !admin.exists(&timeout_key(&n, &f, 2)).await,
        "newest hold's key deleted"
    );
    assert!(admin.exists(&timeout_key(&n, &f, 1)).await);
    assert!(rec.drain(Duration::from_millis(200)).await.is_empty());
    assert_eq!(r1.unlock().await.unwrap(), UnlockOutcome::Released);
    assert!(!admin.exists(&n).await);
    assert_eq!(
        rec.drain(Duration::from_millis(300)).await,
        vec![(chan(&n), "0".into())]
    );

    // Write: field <uuid>:<id>:write, release publishes 1.
    let wf = rw.write_lock().owner_field().to_string();
    assert_eq!(wf, format!("{f}:write"));
    let w = rw.write_lock().lock().await.unwrap();
    assert_eq!(
        admin.hgetall(&n).await,
        [
            ("mode".to_string(), "write".to_string()),
            (wf.clone(), "1".into())
        ]
        .into()
    );
    w.unlock().await.unwrap();
    assert!(!admin.exists(&n).await);
    assert_eq!(
        rec.drain(Duration::from_millis(300)).await,
        vec![(chan(&n), "1".into())]
    );
}

async fn two_readers_hold_together_and_the_last_release_wakes_the_writer_by_its_message(
    b: Backend,
) {
    let n = b.name("rw");
    let client = b.client().await;
    let other = b.client().await;
    let ra = client.get_read_write_lock(&n);
    let rb = other.get_read_write_lock(&n);
    let ga = ra.read_lock().lock().await.unwrap();
    let gb = rb
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("readers share");
    let writer = client.get_read_write_lock(&n);
    let task = tokio::spawn(async move {
        writer
            .write_lock()
            .lock()
            .await
            .map(|g| (Instant::now(), g))
    });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            client.stats().channel_waiters(&chan(&n)) == 1
        })
        .await
    );
    ga.unlock().await.unwrap();
    // The writer woke on the read release ("0"), found the other reader and sleeps again.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!task.is_finished(), "one reader still holds");
    assert_eq!(client.stats().channel_waiters(&chan(&n)), 1);
    let released = Instant::now();
    gb.unlock().await.unwrap();
    let _w = common::woke_within(task, released, common::WOKEN_BY_MESSAGE).await;
}

async fn a_write_release_wakes_every_waiting_reader_at_once(b: Backend) {
    // Redisson testWriteRead: 20 readers, all in within 1 s of the write release.
    let n = b.name("rw");
    let client = b.client().await;
    let w = client.get_read_write_lock(&n);
    let g = w.write_lock().lock().await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let rw = client.get_read_write_lock(&n);
        tasks.push(tokio::spawn(async move {
            let g = rw.read_lock().lock().await.unwrap();
            let at = Instant::now();
            g.keep();
            at
        }));
    }
    // All 20 readers are asleep on the shared subscription before the release.
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            client.stats().channel_waiters(&chan(&n)) == 20
        })
        .await
    );
    assert_eq!(
        client.stats().subscribed_channels,
        1,
        "one subscription for 20 readers"
    );
    let released = Instant::now();
    g.unlock().await.unwrap();
    for t in tasks {
        let at = tokio::time::timeout(Duration::from_secs(5), t)
            .await
            .unwrap()
            .unwrap();
        assert!(at - released < Duration::from_secs(1));
    }
}

async fn a_readers_timeout_keys_survive_another_clients_read_release(b: Backend) {
    let n = b.name("rw");
    let client = b.client().await;
    let admin = b.admin().await;
    let other = b.client().await;
    let a = client.get_read_write_lock(&n);
    let fa = a.read_lock().owner_field().to_string();
    let _ga = a.read_lock().lock().await.unwrap();
    let b = other.get_read_write_lock(&n);
    b.read_lock().lock().await.unwrap().unlock().await.unwrap();
    assert!(admin.exists(&n).await, "A still reads");
    assert_eq!(
        admin.hgetall(&n).await.get(&fa).map(String::as_str),
        Some("1")
    );
    assert!(admin.exists(&timeout_key(&n, &fa, 1)).await);
    assert!(admin.pttl(&n).await > 25_000);
    // A simulated Java reader's release (R-REL by another owner) also keeps A alive.
    let java = "22222222-2222-4222-8222-222222222222:5";
    let _: i64 = fred::interfaces::HashesInterface::hset(&admin.redis, n.as_str(), (java, "1"))
        .await
        .unwrap();
    let _: () = admin
        .redis
        .set(timeout_key(&n, java, 1), "1", None, None, false)
        .await
        .unwrap();
    let c = other.get_read_write_lock(&n);
    assert!(c.read_lock().is_locked().await.unwrap());
    assert!(admin.exists(&timeout_key(&n, &fa, 1)).await);
}

async fn a_simulated_java_reader_blocks_the_writer_and_its_release_wakes_it(b: Backend) {
    let n = b.name("rw");
    let client = b.client().await;
    let admin = b.admin().await;
    let java = "33333333-3333-4333-8333-333333333333:7";
    let _: i64 = fred::interfaces::HashesInterface::hset(
        &admin.redis,
        n.as_str(),
        [("mode", "read"), (java, "1")],
    )
    .await
    .unwrap();
    let _: i64 = admin.redis.pexpire(n.as_str(), 30_000, None).await.unwrap();
    // A live Java reader has its per-hold timeout key.
    let _: () = admin
        .redis
        .set(
            timeout_key(&n, java, 1),
            "1",
            Some(fred::types::Expiration::PX(30_000)),
            None,
            false,
        )
        .await
        .unwrap();
    let rw = client.get_read_write_lock(&n);
    assert!(rw.write_lock().try_lock().await.unwrap().is_none());
    rw.read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("readers share with Java")
        .keep();
    rw.read_lock().unlock().await.unwrap();
    assert!(
        admin.exists(&n).await,
        "our release keeps the live Java reader's lock"
    );
    assert!(admin.pttl(&n).await > 25_000);
    let task =
        tokio::spawn(async move { rw.write_lock().lock().await.map(|g| (Instant::now(), g)) });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            b.subscribers(&chan(&n)).await == 1
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let released = Instant::now();
    let _: i64 = admin.redis.del(&n).await.unwrap();
    admin.java_publish(&chan(&n), "0").await;
    let _g = common::woke_within(task, released, common::WOKEN_BY_MESSAGE).await;
}

async fn write_then_read_then_write_release_downgrades_without_a_message(b: Backend) {
    // Redisson testWriteReadReentrancy / testWR.
    let n = b.name("rw");
    let client = b.client().await;
    let admin = b.admin().await;
    let mut rec = b.recorder(&[&chan(&n)]).await;
    let rw = client.get_read_write_lock_with_owner(&n, redisson_lock::Owner::new());
    let w = rw.write_lock().lock().await.unwrap();
    let r = rw
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("the writer may read");
    assert!(
        rw.read_lock().is_locked().await.unwrap(),
        "writer-held read counts"
    );
    let other = client.get_read_write_lock_with_owner(&n, redisson_lock::Owner::new());
    assert!(other.read_lock().try_lock().await.unwrap().is_none());
    assert!(rw.write_lock().is_locked().await.unwrap());
    w.unlock().await.unwrap();
    assert_eq!(
        admin.hgetall(&n).await.get("mode").map(String::as_str),
        Some("read")
    );
    assert!(!rw.write_lock().is_locked().await.unwrap());
    assert!(
        rec.drain(Duration::from_millis(200)).await.is_empty(),
        "downgrade publishes nothing"
    );
    assert!(other.write_lock().try_lock().await.unwrap().is_none());
    let o = other
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("readers now share");
    o.unlock().await.unwrap();
    r.unlock().await.unwrap();
    assert!(other.write_lock().try_lock().await.unwrap().is_some());
}

async fn write_reentry_adds_the_lease_and_hold_counts_follow(b: Backend) {
    // Redisson testWriteLockExpiration and testHoldCount.
    let n = b.name("rw");
    let client = b.client().await;
    let admin = b.admin().await;
    let rw = client.get_read_write_lock(&n);
    let a = rw
        .write_lock()
        .try_lock_with_lease(Duration::from_secs(1), Duration::from_secs(10))
        .await
        .unwrap()
        .unwrap();
    let b = rw
        .write_lock()
        .try_lock_with_lease(Duration::from_secs(1), Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    let ttl = admin.pttl(&n).await;
    assert!(
        (10_500..=11_000).contains(&ttl),
        "re-entry adds the lease: {ttl}"
    );
    assert_eq!(rw.write_lock().hold_count().await.unwrap(), 2);
    b.unlock().await.unwrap();
    assert_eq!(rw.write_lock().hold_count().await.unwrap(), 1);
    a.unlock().await.unwrap();
    assert_eq!(rw.write_lock().hold_count().await.unwrap(), 0);
    for expected in [1, 2] {
        rw.read_lock().lock().await.unwrap().keep();
        assert_eq!(rw.read_lock().hold_count().await.unwrap(), expected);
    }
    rw.read_lock().unlock().await.unwrap();
    rw.read_lock().unlock().await.unwrap();
    assert_eq!(rw.read_lock().hold_count().await.unwrap(), 0);
    assert_eq!(
        rw.read_lock().remaining_ttl().await.unwrap(),
        Ttl::NotLocked
    );
}

async fn force_unlock_only_clears_its_own_mode(b: Backend) {
    // Redisson testForceUnlock and testMultiRead's first step.
    let n = b.name("rw");
    let client = b.client().await;
    let rw = client.get_read_write_lock(&n);
    assert!(!rw.read_lock().force_unlock().await.unwrap());
    rw.read_lock().lock().await.unwrap().keep();
    assert!(!rw.write_lock().force_unlock().await.unwrap());
    assert!(rw.read_lock().is_locked().await.unwrap());
    assert!(rw.read_lock().force_unlock().await.unwrap());
    assert!(!rw.read_lock().is_locked().await.unwrap());
    rw.write_lock().lock().await.unwrap().keep();
    assert!(!rw.read_lock().force_unlock().await.unwrap());
    assert!(rw.write_lock().force_unlock().await.unwrap());
    assert!(!rw.write_lock().is_locked().await.unwrap());
}

async fn read_unlock_by_another_owner_and_after_expiry_is_not_held(b: Backend) {
    let n = b.name("rw");
    let client = b.client().await;
    let rw = client.get_read_write_lock_with_owner(&n, redisson_lock::Owner::new());
    let _g = rw.read_lock().lock().await.unwrap();
    let other = client.get_read_write_lock_with_owner(&n, redisson_lock::Owner::new());
    assert!(matches!(
        other.read_lock().unlock().await,
        Err(Error::NotHeld { .. })
    ));
    assert!(matches!(
        other.write_lock().unlock().await,
        Err(Error::NotHeld { .. })
    ));
    let w = client.get_read_write_lock_with_owner(&b.name("rw2"), redisson_lock::Owner::new());
    let g = w
        .write_lock()
        .lock_with_lease(Duration::from_millis(200))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(matches!(g.unlock().await, Err(Error::NotHeld { .. })));
}

async fn the_watchdog_renews_read_holds_their_timeout_keys_and_write_holds(b: Backend) {
    // Redisson testReadWriteTTL / testReadLockExpirationRenewal, with a 1 s watchdog.
    let n = b.name("rw");
    let client = b
        .client_with(b.config().lock_watchdog_timeout(Duration::from_secs(1)))
        .await;
    let admin = b.admin().await;
    let rw = client.get_read_write_lock(&n);
    let f = rw.read_lock().owner_field().to_string();
    let w = rw.write_lock().lock().await.unwrap();
    let r1 = rw.read_lock().lock().await.unwrap();
    let r2 = rw.read_lock().lock().await.unwrap();
    let until = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < until {
        assert!(admin.pttl(&n).await > 0);
        assert!(admin.pttl(&timeout_key(&n, &f, 1)).await > 0);
        assert!(admin.pttl(&timeout_key(&n, &f, 2)).await > 0);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    w.unlock().await.unwrap();
    let until = Instant::now() + Duration::from_millis(2500);
    while Instant::now() < until {
        assert!(admin.pttl(&n).await > 0, "read renewal alone keeps it");
        assert!(admin.pttl(&timeout_key(&n, &f, 2)).await > 0);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!r1.is_lost() && !r2.is_lost());
}

async fn a_dead_readers_expired_keys_do_not_keep_the_lock(b: Backend) {
    // Redisson testMultiInstanceReadLockZombieCleanup, with a 3 s watchdog (a 1 s one left
    // the live reader's renewals 0.7 s of slack: under the suite's load, with the explorer
    // beside it, a late run let the live reader's hold expire too).
    let n = b.name("rw");
    let cfg = b.config().lock_watchdog_timeout(Duration::from_secs(3));
    let zombie = b.client_with(cfg.clone()).await;
    zombie
        .get_read_write_lock_with_owner(&n, redisson_lock::Owner::new())
        .read_lock()
        .lock()
        .await
        .unwrap()
        .keep();
    zombie.shutdown().await;
    let live = b.client_with(cfg).await;
    let rw = live.get_read_write_lock_with_owner(&n, redisson_lock::Owner::new());
    let g = rw.read_lock().lock().await.unwrap();
    // The zombie's key (3 s, no longer renewed) runs out; the live reader is renewed.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    assert_eq!(g.state(), redisson_lock::HoldState::Held);
    g.unlock().await.unwrap();
    assert!(rw
        .write_lock()
        .try_lock_for(Duration::from_secs(5))
        .await
        .unwrap()
        .is_some());
}

async fn write_lock_mutual_exclusion_stress(b: Backend) {
    let n = b.name("rw");
    let clients = [b.client().await, b.client().await];
    let owners = (0..8)
        .map(|i| {
            acquire_with!(clients[i % 2].get_read_write_lock(&n), |l| l
                .write_lock()
                .lock())
        })
        .collect();
    common::assert_exclusive_increments(&b.url(), owners, 60).await;
}

async fn readers_never_overlap_a_writer(b: Backend) {
    let n = b.name("rw");
    let client = b.client().await;
    let writers = Arc::new(AtomicUsize::new(0));
    let readers = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let rw = client.get_read_write_lock(&n);
        let (writers, readers) = (writers.clone(), readers.clone());
        tasks.push(tokio::spawn(async move {
            for round in 0..60 {
                if (i + round) % 3 == 0 {
                    let g = rw.write_lock().lock().await.unwrap();
                    assert_eq!(writers.fetch_add(1, Ordering::SeqCst), 0, "two writers");
                    assert_eq!(readers.load(Ordering::SeqCst), 0, "writer beside a reader");
                    tokio::task::yield_now().await;
                    writers.fetch_sub(1, Ordering::SeqCst);
                    g.unlock().await.unwrap();
                } else {
                    let g = rw.read_lock().lock().await.unwrap();
                    readers.fetch_add(1, Ordering::SeqCst);
                    assert_eq!(writers.load(Ordering::SeqCst), 0, "reader beside a writer");
                    tokio::task::yield_now().await;
                    readers.fetch_sub(1, Ordering::SeqCst);
                    g.unlock().await.unwrap();
                }
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .unwrap()
            .unwrap();
    }
}

backend_tests!(
    read_holds_write_timeout_keys_and_messages_as_specified,
    two_readers_hold_together_and_the_last_release_wakes_the_writer_by_its_message,
    a_write_release_wakes_every_waiting_reader_at_once,
    a_readers_timeout_keys_survive_another_clients_read_release,
    a_simulated_java_reader_blocks_the_writer_and_its_release_wakes_it,
    write_then_read_then_write_release_downgrades_without_a_message,
    write_reentry_adds_the_lease_and_hold_counts_follow,
    force_unlock_only_clears_its_own_mode,
    read_unlock_by_another_owner_and_after_expiry_is_not_held,
    the_watchdog_renews_read_holds_their_timeout_keys_and_write_holds,
    a_dead_readers_expired_keys_do_not_keep_the_lock,
    write_lock_mutual_exclusion_stress,
    readers_never_overlap_a_writer,
);

// Issue 29, defect 1: the read renewal's flag is per reader, not per lock. Owners A and C of
// one client read-lock N; A's field disappears (a restart without data, a failover that
// missed it: here `HDEL`); C read-locks N again. A must not stay Held while C's readers keep
// the hash alive, nor once another client writes.

/// The `rwlock` rig's client: a 1.5 s watchdog (a renewal run every 500 ms), short timeouts.
fn short_watchdog() -> Config {
    Config::default()
        .lock_watchdog_timeout(Duration::from_millis(1500))
        .timeout(Duration::from_millis(500))
        .retry_delay(Duration::from_millis(100))
        .reconnect_max_delay(Duration::from_millis(100))
}

async fn hexists(admin: &Admin, key: &str, field: &str) -> bool {
    admin
        .cmd("HEXISTS", vec![key.into(), field.into()])
        .await
        .unwrap()
        .as_i64()
        == Some(1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_whose_field_is_gone_is_not_held_while_another_reader_of_its_client_reads() {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), short_watchdog()).await.unwrap();
    let other = Client::connect(&s.url(), short_watchdog()).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let n = "rw:gone-reader";
    let (a, c) = (
        client.get_read_write_lock_with_owner(n, redisson_lock::Owner::new()),
        client.get_read_write_lock_with_owner(n, redisson_lock::Owner::new()),
    );
    let fa = a.read_lock().owner_field().to_owned();
    let ga = a.read_lock().lock().await.unwrap();
    let gc1 = c.read_lock().lock().await.unwrap();
    admin
        .cmd("HDEL", vec![n.into(), fa.as_str().into()])
        .await
        .unwrap();
    let gc2 = c.read_lock().lock().await.unwrap();
    let runs = client.stats().renewal_calls;
    assert!(
        eventually(T, || async { client.stats().renewal_calls >= runs + 3 }).await,
        "three renewal runs"
    );
    assert!(!hexists(&admin, n, &fa).await);
    assert_eq!(ga.state(), HoldState::Lost, "A's field is gone");
    assert_eq!(
        (gc1.state(), gc2.state()),
        (HoldState::Held, HoldState::Held)
    );

    gc2.unlock().await.unwrap();
    assert_eq!(gc1.unlock().await.unwrap(), UnlockOutcome::Released);
    let w = other
        .get_read_write_lock_with_owner(n, redisson_lock::Owner::new())
        .write_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("nobody reads N");
    assert_ne!(
        ga.state(),
        HoldState::Held,
        "A beside another client's writer"
    );
    w.unlock().await.unwrap();
    assert!(matches!(ga.unlock().await, Err(Error::NotHeld { .. })));
}

/// The same with the connection killed after the field went: every read hold is in doubt, and
/// the renewal on the new connection confirms C's readers only, not A's (watchdog and leased).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_connection_kill_only_the_readers_still_present_are_held_again() {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), short_watchdog()).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let n = "rw:gone-reader-kill";
    let (a, c) = (
        client.get_read_write_lock_with_owner(n, redisson_lock::Owner::new()),
        client.get_read_write_lock_with_owner(n, redisson_lock::Owner::new()),
    );
    let fa = a.read_lock().owner_field().to_owned();
    let ga = a.read_lock().lock().await.unwrap();
    let gc = c.read_lock().lock().await.unwrap();
    let lease = Duration::from_secs(30);
    let la = a.read_lock().lock_with_lease(lease).await.unwrap();
    let lc = c.read_lock().lock_with_lease(lease).await.unwrap();
    admin
        .cmd("HDEL", vec![n.into(), fa.as_str().into()])
        .await
        .unwrap();
    admin
        .cmd(
            "CLIENT",
            vec![
                "KILL".into(),
                "TYPE".into(),
                "normal".into(),
                "SKIPME".into(),
                "yes".into(),
            ],
        )
        .await
        .unwrap();
    assert!(
        eventually(T, || async {
            gc.state() == HoldState::Held && lc.state() == HoldState::Held
        })
        .await,
        "C's readers are confirmed: {:?} {:?}",
        gc.state(),
        lc.state()
    );
    assert!(
        eventually(T, || async {
            ga.state() == HoldState::Lost && la.state() == HoldState::Lost
        })
        .await,
        "A's readers are not: {:?} {:?}",
        ga.state(),
        la.state()
    );
    let runs = client.stats().renewal_calls;
    assert!(eventually(T, || async { client.stats().renewal_calls >= runs + 2 }).await);
    assert_eq!((ga.state(), la.state()), (HoldState::Lost, HoldState::Lost));
    assert_eq!((gc.state(), lc.state()), (HoldState::Held, HoldState::Held));
}

/// A handle makes each half the first time it is asked for. However a half is made (asked for
/// after the other one holds the lock, or taken with `into_parts`), both halves act as the
/// handle's one owner: the writer reads through the half made later, and the halves taken
/// with `into_parts` count the holds made through the handle.
#[tokio::test]
async fn halves_made_at_different_times_act_as_one_owner() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let rw = client.get_read_write_lock("halves");
    let w = rw.write_lock().lock().await.unwrap();
    let write_field = rw.write_lock().owner_field().to_owned();
    let (read, write) = rw.into_parts();
    assert_eq!(format!("{}:write", read.owner_field()), write_field);
    assert_eq!(write.owner_field(), write_field);
    assert_eq!(write.hold_count().await.unwrap(), 1, "the write half held");
    let r = read
        .try_lock()
        .await
        .unwrap()
        .expect("the writer's own owner may read");
    assert_eq!(read.hold_count().await.unwrap(), 1);

    // Another handle of the same owner, taken whole before any half was asked for.
    let again = client
        .get_read_write_lock_with_owner("halves", read.owner())
        .into_write_lock();
    assert!(
        again.is_held_by_current().await.unwrap(),
        "the same owner's write half"
    );
    r.unlock().await.unwrap();
    w.unlock().await.unwrap();
    let other = client.get_read_write_lock("halves");
    assert!(other.write_lock().try_lock().await.unwrap().is_some());
}

/// The blocking read-write lock, whose halves are made when first asked for, acts as the
/// calling thread whichever thread made the half: the read half, made first on another thread
/// (which may not read while this one writes), lets this thread's writer read.
#[test]
fn the_blocking_halves_act_as_the_calling_thread() {
    let server = RedisServer::start();
    let client =
        redisson_lock::blocking::Client::connect(&server.url(), Config::default()).unwrap();
    let rw = Arc::new(client.get_read_write_lock("halves:blocking"));
    let w = rw.write_lock().lock().unwrap();
    let other = rw.clone();
    let seen = std::thread::spawn(move || {
        (
            // The read half is made here, on this thread.
            other.read_lock().try_lock().unwrap().is_some(),
            other.write_lock().try_lock().unwrap().is_some(),
        )
    })
    .join()
    .unwrap();
    assert_eq!(seen, (false, false), "another thread reads or writes");
    let r = rw
        .read_lock()
        .try_lock()
        .unwrap()
        .expect("the writer's thread may read through the half another thread made");
    w.unlock().unwrap();
    r.unlock().unwrap();
    let other = rw.clone();
    let wrote = std::thread::spawn(move || {
        let g = other.write_lock().try_lock().unwrap();
        g.map(|g| g.unlock().unwrap()).is_some()
    })
    .join()
    .unwrap();
    assert!(wrote, "free once both holds are released");
}

/// A multi-lock over the halves of read-write locks, taken with `into_parts` (the halves are
/// made then): the read half of one and the write half of another, held together, keep
/// another client from writing the first and from reading or writing the second, while
/// another reader of the first still reads; once released, both are free.
#[tokio::test]
async fn a_multi_lock_over_halves_taken_with_into_parts() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let other = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let (read_a, _) = client.get_read_write_lock("multi:a").into_parts();
    let (_, write_b) = client.get_read_write_lock("multi:b").into_parts();
    let multi = redisson_lock::MultiLock::new(vec![read_a.into(), write_b.into()]).unwrap();
    let held = multi.lock().await.unwrap();

    let a = other.get_read_write_lock("multi:a");
    let b = other.get_read_write_lock("multi:b");
    assert!(
        a.write_lock().try_lock().await.unwrap().is_none(),
        "a is read"
    );
    assert!(
        b.write_lock().try_lock().await.unwrap().is_none(),
        "b is written"
    );
    assert!(
        b.read_lock().try_lock().await.unwrap().is_none(),
        "b is written"
    );
    let reader = a
        .read_lock()
        .try_lock()
        .await
        .unwrap()
        .expect("readers share a");
    reader.unlock().await.unwrap();

    held.unlock().await.unwrap();
    let w = a.write_lock().try_lock().await.unwrap().expect("a free");
    w.unlock().await.unwrap();
    let w = b.write_lock().try_lock().await.unwrap().expect("b free");
    w.unlock().await.unwrap();
}
