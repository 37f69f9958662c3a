//! Waiting without busy loops: the shared subscription, its barrier, cancellation and reconnects.

mod common;

use std::{sync::Arc, time::Duration};

use common::{Admin, RedisServer};
use redisson_lock::{Client, Config};
use tokio::time::Instant;

fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_waiter_is_woken_by_the_message_despite_an_immediate_unlock() {
    // 300 rounds: a waiter subscribes and the holder (another client) unlocks right away. The
    // barrier (PING after SUBSCRIBE) plus the re-attempt after subscribing means no waiter has
    // to sit out the 30 s TTL bound.
    let s = RedisServer::start();
    let holder_client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let waiter_client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let mut slowest = Duration::ZERO;
    for round in 0..300 {
        let name = format!("barrier:{round}");
        let holder = holder_client.get_lock(&name);
        let guard = holder.lock().await.unwrap();
        let waiter = waiter_client.get_lock(&name);
        let started = Instant::now();
        let task = tokio::spawn(async move { waiter.lock().await.map(|g| (Instant::now(), g)) });
        // Unlock as soon as the waiter has announced its subscription locally.
        while waiter_client.get_lock(&name).local_waiters() == 0 && !task.is_finished() {
            tokio::task::yield_now().await;
        }
        guard.unlock().await.unwrap();
        let (at, g) = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap_or_else(|_| panic!("round {round}: waiter slept until its TTL bound"))
            .unwrap()
            .unwrap();
        slowest = slowest.max(at - started);
        g.unlock().await.unwrap();
    }
    // The TTL bound is 30 s; every wake came from a message.
    assert!(slowest < Duration::from_secs(5), "slowest wake {slowest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_waiters_share_one_subscription_and_dropped_waiters_leave_nothing() {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let holder_client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let name = "cancel:one";
    let guard = holder_client.get_lock(name).lock().await.unwrap();

    let mut tasks = Vec::new();
    for _ in 0..1000 {
        let lock = client.get_lock(name);
        tasks.push(tokio::spawn(async move {
            lock.try_lock_for(Duration::from_secs(60)).await
        }));
    }
    assert!(
        common::eventually(Duration::from_secs(20), || async {
            client.get_lock(name).local_waiters() == 1000
        })
        .await,
        "waiters: {}",
        client.get_lock(name).local_waiters()
    );
    assert_eq!(client.stats().subscribed_channels, 1);
    assert_eq!(
        admin.numsub(&channel(name)).await,
        1,
        "exactly one subscription"
    );

    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        assert!(t.await.unwrap_err().is_cancelled());
    }
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            admin.numsub(&channel(name)).await == 0
        })
        .await
    );
    assert_eq!(client.stats().subscribed_channels, 0);
    assert_eq!(client.get_lock(name).local_waiters(), 0);
    assert_eq!(client.stats().watchdog_holds, 0);
    // The lock still belongs to the holder alone.
    assert_eq!(admin.hgetall(name).await.len(), 1);
    assert!(admin.hgetall(name).await.contains_key(guard.owner_field()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_future_dropped_mid_acquire_never_leaves_a_lock_behind() {
    // Cancels try_lock at many points (before, during and after the script round trip), with
    // and without an earlier hold by the same owner; the pre-existing count must survive.
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let name = "cancel:mid";
    let lock = Arc::new(client.get_lock(name));
    for i in 0..200u64 {
        let pre = if i % 2 == 0 {
            Some(lock.lock().await.unwrap())
        } else {
            None
        };
        let l = lock.clone();
        let delay = Duration::from_micros((i * 37) % 400);
        let _ = tokio::time::timeout(delay, async move { l.try_lock().await }).await;
        let expected = u64::from(pre.is_some());
        let ok = common::eventually(Duration::from_secs(2), || async {
            lock.hold_count().await.unwrap() == expected
                && client.stats().watchdog_holds == expected as usize
        })
        .await;
        assert!(
            ok,
            "iteration {i}: count {}",
            lock.hold_count().await.unwrap()
        );
        drop(pre);
        assert!(
            common::eventually(Duration::from_secs(2), || async {
                !admin.exists(name).await
            })
            .await
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_still_wake_promptly_after_the_subscriber_connection_is_killed() {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let holder_client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let name = "reconnect:k";
    let guard = holder_client.get_lock(name).lock().await.unwrap();
    let waiter = client.get_lock(name);
    let task = tokio::spawn(async move { waiter.lock().await.map(|g| (Instant::now(), g)) });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            admin.numsub(&channel(name)).await == 1
        })
        .await
    );

    admin
        .cmd(
            "CLIENT",
            vec!["KILL".into(), "TYPE".into(), "pubsub".into()],
        )
        .await
        .unwrap();
    // The registry subscribes again on reconnect.
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            admin.numsub(&channel(name)).await == 1
        })
        .await,
        "channel re-subscribed after reconnect"
    );
    let released = Instant::now();
    guard.unlock().await.unwrap();
    let _g = common::woke_within(task, released, Duration::from_secs(2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_that_misses_every_message_still_wakes_by_its_ttl_bound() {
    // The holder's key is deleted without any PUBLISH (as a spin lock or an expiry would): the
    // waiter re-polls after the TTL it was given.
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let name = "ttl:bound";
    admin
        .java_hold(name, "00000000-0000-4000-8000-000000000000:1", 800)
        .await;
    let started = Instant::now();
    let g = client
        .get_lock(name)
        .try_lock_for(Duration::from_secs(10))
        .await
        .unwrap();
    assert!(g.is_some());
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(700), "{waited:?}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stats_count_holds_channels_and_waiters_per_lock() {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), Config::default()).await.unwrap();
    assert_eq!(client.stats(), redisson_lock::Stats::default());
    // A held reentrant lock with 2 waiters, a held fair lock with 3 (one channel each).
    let held = client.get_lock("st:r").lock().await.unwrap();
    let fair = client.get_fair_lock("st:f");
    let fair_held = fair.lock().await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..2 {
        tasks.push(tokio::spawn(client.get_lock("st:r").lock()).abort_handle());
    }
    for _ in 0..3 {
        tasks.push(tokio::spawn(client.get_fair_lock("st:f").lock()).abort_handle());
    }
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            client.stats().waiters == 5
        })
        .await,
        "{:?}",
        client.stats()
    );
    let stats = client.stats();
    assert_eq!(stats.watchdog_holds, 2);
    assert_eq!(
        stats.subscribed_channels, 4,
        "1 reentrant + 3 fair per-waiter channels"
    );
    assert_eq!(stats.channel_waiters("redisson_lock__channel:{st:r}"), 2);
    assert_eq!(client.get_lock("st:r").local_waiters(), 2);
    assert_eq!(fair.local_waiters(), 3);
    assert_eq!(client.get_lock("st:other").local_waiters(), 0);
    for t in tasks {
        t.abort();
    }
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            client.stats().subscribed_channels == 0
        })
        .await
    );
    held.unlock().await.unwrap();
    fair_held.unlock().await.unwrap();
    let stats = client.stats();
    assert_eq!((stats.watchdog_holds, stats.waiters), (0, 0));
    assert!(stats.channels.is_empty());
}
