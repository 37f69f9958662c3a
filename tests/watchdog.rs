//! The renewal service: keeps watchdog locks alive, stops at unlock, batches, reports loss.
//! Ports Redisson's RedissonLockExpirationRenewalTest and the watchdog parts of RedissonLockTest.

mod common;

use std::time::Duration;

use common::{Admin, RedisServer};
use fred::interfaces::KeysInterface;
use redisson_lock::{Client, Config, Error};
use tokio::time::Instant;

fn wd(ms: u64) -> Config {
    Config::default().lock_watchdog_timeout(Duration::from_millis(ms))
}

#[tokio::test]
async fn a_watchdog_lock_held_three_timeouts_never_expires() {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), wd(1000)).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let g = client.get_lock("wd:held").lock().await.unwrap();
    let until = Instant::now() + Duration::from_secs(3);
    let mut min_ttl = i64::MAX;
    while Instant::now() < until {
        let ttl = admin.pttl("wd:held").await;
        assert!(ttl > 0, "lock expired while held (ttl {ttl})");
        min_ttl = min_ttl.min(ttl);
        assert!(ttl <= 1000, "never extended beyond the watchdog timeout");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!g.is_lost());
    assert!(client.stats().renewal_calls >= 6);
    g.unlock().await.unwrap();
}

#[tokio::test]
async fn after_unlock_no_renewal_reaches_the_key() {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), wd(600)).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let lock = client.get_lock("wd:stop");
    let g = lock.lock().await.unwrap();
    let g2 = lock.lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    g2.unlock().await.unwrap();
    g.unlock().await.unwrap();
    assert_eq!(client.stats().watchdog_holds, 0);
    let calls = client.stats().renewal_calls;
    admin.reset_stats().await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        client.stats().renewal_calls,
        calls,
        "no renewal run after the final unlock"
    );
    assert_eq!(admin.command_calls("pexpire").await, 0);
    assert_eq!(admin.command_calls("evalsha").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewing_a_thousand_locks_costs_ten_script_calls_per_period() {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), wd(3000).lock_watchdog_batch_size(100))
        .await
        .unwrap();
    let admin = Admin::connect(&s.url()).await;
    let mut guards = Vec::new();
    for i in 0..1000 {
        guards.push(
            client
                .get_lock(&format!("wd:many:{i}"))
                .lock()
                .await
                .unwrap(),
        );
    }
    assert_eq!(client.stats().watchdog_holds, 1000);
    admin.reset_stats().await;
    tokio::time::sleep(Duration::from_millis(3100)).await; // about three periods of 1 s
    let server_calls = admin.command_calls("evalsha").await;
    assert_eq!(
        admin.command_calls("eval").await,
        0,
        "scripts were loaded at connect"
    );
    // Each run is exactly 10 script calls (1000 locks / batch 100), each renewing 100 keys.
    assert_eq!(
        server_calls % 10,
        0,
        "whole runs of 10 batches: {server_calls}"
    );
    assert!(
        (20..=40).contains(&server_calls),
        "renewal calls: {server_calls}"
    );
    assert_eq!(admin.command_calls("pexpire").await, server_calls * 100);
    for g in &guards {
        assert!(!g.is_lost());
    }
}

#[tokio::test]
async fn a_lock_deleted_behind_the_holders_back_is_reported_lost() {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), wd(900)).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let g = client.get_lock("wd:lost").lock().await.unwrap();
    let _: i64 = admin.redis.del("wd:lost").await.unwrap();
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), g.lost())
        .await
        .expect("loss reported");
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    assert!(g.is_lost());
    assert_eq!(client.stats().watchdog_holds, 0, "renewal for it stopped");
    assert!(matches!(g.unlock().await, Err(Error::NotHeld { .. })));
}

#[tokio::test]
async fn max_renewals_caps_renewal_and_the_guard_then_reports_loss() {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), wd(600).max_renewals(Some(2)))
        .await
        .unwrap();
    let admin = Admin::connect(&s.url()).await;
    let g = client.get_lock("wd:cap").lock().await.unwrap();
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), g.lost())
        .await
        .expect("lost");
    // 2 renewals at ~200 ms intervals, then the 600 ms TTL runs out.
    let held = started.elapsed();
    assert!(held >= Duration::from_millis(700), "{held:?}");
    assert!(
        common::eventually(Duration::from_secs(2), || async {
            !admin.exists("wd:cap").await
        })
        .await
    );
}

#[tokio::test]
async fn renewal_survives_a_redis_restart_and_recovers_for_new_locks() {
    // Redisson testLockAfterTimeout: the held lock is gone after the restart; unlock says so;
    // a new lock is renewed normally afterwards.
    let mut s = RedisServer::start();
    let client = Client::connect(&s.url(), wd(1000)).await.unwrap();
    let lock = client.get_lock("wd:restart");
    let g = lock.lock().await.unwrap();
    s.restart();
    tokio::time::timeout(Duration::from_secs(10), g.lost())
        .await
        .expect("lost after restart");
    assert!(matches!(g.unlock().await, Err(Error::NotHeld { .. })));
    let admin = Admin::connect(&s.url()).await;
    let g = lock.lock().await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(admin.exists("wd:restart").await, "new lock renewed");
    assert!(!g.is_lost());
    g.unlock().await.unwrap();
    let g = lock.lock().await.unwrap();
    g.unlock().await.unwrap();
}

#[tokio::test]
async fn stale_registrations_of_an_earlier_owner_do_not_stop_renewal_of_the_next() {
    // Redisson testLockReentrantRenew.
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), wd(600)).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let first = client.get_lock("wd:reentrant");
    let a = first.lock().await.unwrap();
    let b = first.lock().await.unwrap();
    drop(b);
    a.unlock().await.unwrap();
    let second = client.get_lock("wd:reentrant");
    let g = second.lock().await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await; // 15 periods
    assert!(admin.exists("wd:reentrant").await);
    assert!(!g.is_lost());
}

#[tokio::test]
async fn a_cancelled_try_lock_leaves_no_renewal() {
    // Redisson testLockIsNotRenewedAfterInterruptedTryLock, with a 600 ms watchdog.
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), wd(600)).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let lock = client.get_lock("wd:interrupted");
    let _ = tokio::time::timeout(Duration::from_micros(200), lock.try_lock()).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!admin.exists("wd:interrupted").await);
    assert_eq!(client.stats().watchdog_holds, 0);
}

#[tokio::test]
async fn shutdown_stops_renewal_and_the_lock_expires_within_one_timeout() {
    // Redisson testAutoExpire.
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), wd(800)).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let g = client.get_lock("wd:auto").lock().await.unwrap();
    g.keep();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(admin.exists("wd:auto").await);
    client.shutdown().await;
    let down = Instant::now();
    assert!(
        common::eventually(Duration::from_secs(3), || async {
            !admin.exists("wd:auto").await
        })
        .await
    );
    assert!(
        down.elapsed() <= Duration::from_millis(1100),
        "{:?}",
        down.elapsed()
    );
}

#[test]
fn a_starved_runtime_learns_of_the_loss_the_moment_it_resumes() {
    // Fault S2: the holder's runtime is blocked longer than the watchdog timeout, so nothing
    // renews the lock; another client takes it. On resume the guard must already say "lost",
    // without waiting for a network round trip.
    let s = RedisServer::start();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let url = s.url();
    let guard = rt.block_on(async {
        let c = Client::connect(&url, wd(600)).await.unwrap();
        let g = c.get_lock("wd:starved").lock().await.unwrap();
        assert!(!g.is_lost());
        g
    });
    // Block the runtime's only thread: no task (watchdog included) runs.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(guard.is_lost(), "deadline passed while starved");
    let other = tokio::runtime::Runtime::new().unwrap();
    let taken = other.block_on(async {
        let c = Client::connect(&url, wd(600)).await.unwrap();
        c.get_lock("wd:starved").try_lock().await.unwrap().is_some()
    });
    assert!(taken, "the lock expired while the holder was starved");
    rt.block_on(async {
        tokio::time::timeout(Duration::from_millis(50), guard.lost())
            .await
            .expect("lost() resolves at once");
        assert!(matches!(guard.unlock().await, Err(Error::NotHeld { .. })));
    });
}

#[tokio::test]
async fn read_and_write_locks_recover_after_a_redis_restart() {
    // Redisson testWriteLockAfterTimeout / testReadLockAfterTimeout.
    let mut s = RedisServer::start();
    let client = Client::connect(&s.url(), wd(1000)).await.unwrap();
    let rw = client.get_read_write_lock("wd:rw");
    let w = rw.write_lock().lock().await.unwrap();
    let r = client
        .get_read_write_lock("wd:rw2")
        .read_lock()
        .lock()
        .await
        .unwrap();
    s.restart();
    tokio::time::timeout(Duration::from_secs(10), w.lost())
        .await
        .expect("write lost");
    tokio::time::timeout(Duration::from_secs(10), r.lost())
        .await
        .expect("read lost");
    assert!(matches!(w.unlock().await, Err(Error::NotHeld { .. })));
    assert!(matches!(r.unlock().await, Err(Error::NotHeld { .. })));
    let admin = Admin::connect(&s.url()).await;
    for _ in 0..2 {
        let w = rw.write_lock().lock().await.unwrap();
        let r = rw.read_lock().lock().await.unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(admin.exists("wd:rw").await, "renewed after the restart");
        r.unlock().await.unwrap();
        w.unlock().await.unwrap();
    }
}
