//! Fenced lock (protocol §9) and spin lock (protocol §10).

use common::{acquire_with, backend_tests};
use redisson_lock_test_kit as common;

use std::time::Duration;

use common::Backend;
use redisson_lock::{BackOff, Error, Owner};
use tokio::time::Instant;

/// The unlock channel of an RLock-layout lock.
fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

async fn every_acquisition_path_increments_the_token(b: Backend) {
    // Redisson testTokenIncrease: 1, 2, 3, 4, 5 over lock, re-entry, lease and try-lock.
    let fenced = b.name("fenced");
    let client = b.client().await;
    let admin = b.admin().await;
    let mut rec = b.recorder(&[&channel(&fenced)]).await;
    let lock = client.get_fenced_lock_with_owner(&fenced, Owner::new());
    assert_eq!(lock.token().await.unwrap(), 0);
    let g = lock.lock().await.unwrap();
    assert_eq!(g.token(), 1);
    g.unlock().await.unwrap();
    let g = lock.lock().await.unwrap();
    assert_eq!(g.token(), 2);
    let again = lock.lock().await.unwrap();
    assert_eq!(again.token(), 3, "re-entry increments too");
    assert_eq!(lock.token().await.unwrap(), 3);
    drop(again);
    // A dropped guard releases in the background: wait for it, or the lease hold below could
    // be a re-entry (no token message of its own) and the background release publish instead.
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            lock.hold_count().await.unwrap() == 1
        })
        .await
    );
    g.unlock().await.unwrap();
    let l = lock.lock_with_lease(Duration::from_secs(10)).await.unwrap();
    assert_eq!(l.token(), 4);
    l.unlock().await.unwrap();
    let t = lock.try_lock().await.unwrap().unwrap();
    assert_eq!(t.token(), 5);
    // Same hash as an RLock of the same name; the token key has no TTL.
    assert_eq!(admin.type_of(&fenced).await, "hash");
    assert_eq!(
        admin
            .pttl(&format!("redisson_lock_token:{{{fenced}}}"))
            .await,
        -1
    );
    assert!(client
        .get_lock_with_owner(&fenced, Owner::new())
        .try_lock()
        .await
        .unwrap()
        .is_none());
    let other = client.get_fenced_lock_with_owner(&fenced, Owner::new());
    assert!(other.try_lock().await.unwrap().is_none());
    assert_eq!(
        lock.token().await.unwrap(),
        5,
        "a failed attempt takes no token"
    );
    t.unlock().await.unwrap();
    // Unlocks publish on the RLock channel, as RLock does.
    let msgs = rec.drain(Duration::from_millis(300)).await;
    assert_eq!(msgs.len(), 4);
    assert!(msgs.iter().all(|(_, v)| v == "0"));
}

async fn tokens_strictly_increase_across_clients_and_a_waiter_gets_the_next(b: Backend) {
    let fenced = b.name("fenced");
    let client = b.client().await;
    let other = b.client().await;
    let mut last = 0;
    for i in 0..20 {
        let c = if i % 2 == 0 { &client } else { &other };
        let g = c.get_fenced_lock(&fenced).lock().await.unwrap();
        let t = g.token();
        assert!(t > last);
        last = t;
        g.unlock().await.unwrap();
    }
    let held = client.get_fenced_lock(&fenced).lock().await.unwrap();
    let waiter = other.get_fenced_lock(&fenced);
    let task = tokio::spawn(async move { waiter.lock().await.unwrap().token() });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            other.get_fenced_lock(&fenced).local_waiters() == 1
        })
        .await
    );
    let t_held = held.token();
    held.unlock().await.unwrap();
    assert_eq!(task.await.unwrap(), t_held + 1);
}

async fn spin_lock_excludes_never_publishes_and_polls_by_the_back_off(b: Backend) {
    let spin = b.name("spin");
    let client = b.client().await;
    let admin = b.admin().await;
    let holder = client.get_spin_lock_with(&spin, Owner::new(), Default::default());
    let g = holder.lock().await.unwrap();
    assert_eq!(admin.hgetall(&spin).await.len(), 1, "RLock layout");
    let waiter = client.get_spin_lock_with(&spin, Owner::new(), Default::default());
    // The waiter's attempts are the script calls on its key (MONITOR, filtered by the key:
    // the shared cluster's masters serve parallel tests).
    let monitor = b.monitor(&spin);
    let started = Instant::now();
    assert!(waiter
        .try_lock_for(Duration::from_secs(1))
        .await
        .unwrap()
        .is_none());
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(990) && waited < Duration::from_millis(1500),
        "{waited:?}"
    );
    // Back-off 1, 2-3, 4-7, ... capped at 128 ms: at most ~16 attempts in 1 s, no pub/sub.
    let attempts = monitor.count("evalsha", &spin).await;
    assert!((5..=20).contains(&attempts), "attempts: {attempts}");
    drop(monitor);
    assert_eq!(b.subscribers(&channel(&spin)).await, 0);
    assert_eq!(client.stats().subscribed_channels, 0);

    let mut rec = b.recorder(&[&channel(&spin)]).await;
    // Redisson testTryLockAsync: the waiter gets in soon after the unlock. By now its back-off
    // is at the cap (128 ms), so its next attempt comes at most that long after the release;
    // the bound allows the loaded suite's scheduling beside it (a run took 211 ms against a
    // bound of 200), and still tells a poll by the back-off from a wait for the 30 s TTL.
    let waiter = client.get_spin_lock_with(&spin, Owner::new(), Default::default());
    let task = tokio::spawn(async move { waiter.lock().await.map(|g| (Instant::now(), g)) });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let released = Instant::now();
    g.unlock().await.unwrap();
    let g2 = common::woke_within(task, released, Duration::from_millis(500)).await;
    g2.unlock().await.unwrap();
    assert!(
        rec.drain(Duration::from_millis(300)).await.is_empty(),
        "spin locks never publish"
    );
    assert!(!holder.is_locked().await.unwrap());
    holder.lock().await.unwrap().keep();
    assert!(holder.force_unlock().await.unwrap());
    assert!(rec.drain(Duration::from_millis(200)).await.is_empty());
}

async fn spin_lock_basics_follow_the_rlock_tests(b: Backend) {
    let spin = b.name("spin");
    let client = b.client().await;
    let lock = client.get_spin_lock_with(
        &spin,
        Owner::new(),
        BackOff::constant(Duration::from_millis(20)),
    );
    assert_eq!(lock.hold_count().await.unwrap(), 0);
    let a = lock.lock().await.unwrap();
    let b = lock.try_lock().await.unwrap().unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    let other = client.get_spin_lock(&spin);
    assert!(other.try_lock().await.unwrap().is_none());
    assert!(matches!(other.unlock().await, Err(Error::NotHeld { .. })));
    b.unlock().await.unwrap();
    assert!(other.try_lock().await.unwrap().is_none());
    a.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    // Expiry: a leased hold ends and the waiter's back-off notices.
    let g = lock
        .lock_with_lease(Duration::from_millis(500))
        .await
        .unwrap();
    let started = Instant::now();
    let w = other.lock().await.unwrap();
    assert!(started.elapsed() < Duration::from_millis(1500));
    assert!(matches!(g.unlock().await, Err(Error::NotHeld { .. })));
    w.unlock().await.unwrap();
}

async fn spin_and_fenced_lock_mutual_exclusion_stress(b: Backend) {
    let spin = b.name("spin");
    let fenced = b.name("fenced");
    let clients = [b.client().await, b.client().await];
    let spin = (0..8)
        .map(|i| acquire_with!(clients[i % 2].get_spin_lock(&spin), |l| l.lock()))
        .collect();
    common::assert_exclusive_increments(&b.url(), spin, 50).await;
    let fenced = (0..8)
        .map(|i| acquire_with!(clients[i % 2].get_fenced_lock(&fenced), |l| l.lock()))
        .collect();
    common::assert_exclusive_increments(&b.url(), fenced, 50).await;
}

async fn a_simulated_java_holder_blocks_the_fenced_lock_and_its_release_wakes_it(b: Backend) {
    let fenced = b.name("fenced");
    let client = b.client().await;
    let admin = b.admin().await;
    admin
        .java_hold(&fenced, "44444444-4444-4444-8444-444444444444:3", 30_000)
        .await;
    let lock = client.get_fenced_lock(&fenced);
    assert!(lock.try_lock().await.unwrap().is_none());
    let task = tokio::spawn(async move { lock.lock().await.map(|g| (Instant::now(), g)) });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            b.subscribers(&channel(&fenced)).await == 1
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let released = Instant::now();
    admin.java_release(&fenced).await;
    let g = common::woke_within(task, released, common::WOKEN_BY_MESSAGE).await;
    assert_eq!(g.token(), 1);
}

backend_tests!(
    every_acquisition_path_increments_the_token,
    tokens_strictly_increase_across_clients_and_a_waiter_gets_the_next,
    spin_lock_excludes_never_publishes_and_polls_by_the_back_off,
    spin_lock_basics_follow_the_rlock_tests,
    spin_and_fenced_lock_mutual_exclusion_stress,
    a_simulated_java_holder_blocks_the_fenced_lock_and_its_release_wakes_it,
);
