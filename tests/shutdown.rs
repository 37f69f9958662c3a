//! Shutdown releases what was let go (issue 50): the releases of guards dropped before
//! `shutdown` (queued ones included) are sent before it returns, bounded by the shutdown
//! timeout, with what could not be sent counted; a guard still held is kept, told `Lost`; the
//! blocking client's last drop does the same; a process that ends `main` with `shutdown` leaves
//! the locks it dropped free.

use redisson_lock_test_kit as common;

use std::time::Duration;

use common::{
    proxy::{Direction, Proxy},
    Admin, RedisServer,
};
use redisson_lock::{Client, Config, HoldState};

/// Every kind's guards, and permits, dropped just before `shutdown`, with replies slowed so
/// that most releases still wait for their turn when it begins: every lock is free and every
/// permit back when it returns, and nothing was left unsent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guards_dropped_before_shutdown_are_released_when_it_returns() {
    let s = RedisServer::start();
    let proxy = Proxy::start(s.port()).await;
    let client = Client::connect(&proxy.url(), Config::default())
        .await
        .unwrap();
    let admin = Admin::connect(&s.url()).await;
    let mut names = Vec::new();
    let mut guards: Vec<Box<dyn Send>> = Vec::new();
    for i in 0..40 {
        let n = format!("sd:r{i}");
        guards.push(Box::new(client.get_lock(&n).lock().await.unwrap()));
        names.push(n);
        let n = format!("sd:f{i}");
        guards.push(Box::new(client.get_fair_lock(&n).lock().await.unwrap()));
        names.push(n);
        let n = format!("sd:x{i}");
        guards.push(Box::new(client.get_fenced_lock(&n).lock().await.unwrap()));
        names.push(n);
        let n = format!("sd:w{i}");
        let rw = client.get_read_write_lock(&n);
        guards.push(Box::new(rw.write_lock().lock().await.unwrap()));
        names.push(n);
        let n = format!("sd:l{i}");
        guards.push(Box::new(
            client
                .get_lock(&n)
                .lock_with_lease(Duration::from_secs(60))
                .await
                .unwrap(),
        ));
        names.push(n);
    }
    let psem = client.get_permit_expirable_semaphore("sd:psem");
    assert!(psem.try_set_permits(10).await.unwrap());
    for _ in 0..10 {
        guards.push(Box::new(psem.acquire(None).await.unwrap()));
    }
    proxy.set_latency(Direction::Downstream, Duration::from_millis(100));
    drop(guards);
    assert!(
        client.stats().background_releases > 64,
        "some wait for a turn"
    );
    let report = client.shutdown().await;
    assert_eq!(report.unsent, 0, "{report:?}");
    assert_eq!(report.kept, 0, "{report:?}");
    for n in &names {
        assert!(!admin.exists(n).await, "{n} is still locked after shutdown");
    }
    let available: Option<String> = fred::interfaces::KeysInterface::get(&admin.redis, "sd:psem")
        .await
        .unwrap();
    assert_eq!(available.as_deref(), Some("10"), "every permit back");
}

/// A guard still held at shutdown is kept (not released, no longer renewed) and told `Lost`;
/// the report counts it. New acquisitions are refused.
#[tokio::test]
async fn a_guard_still_held_at_shutdown_is_kept_and_told_lost() {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let held = client.get_lock("sd:held").lock().await.unwrap();
    let report = client.shutdown().await;
    assert_eq!(report.kept, 1, "{report:?}");
    assert_eq!(report.unsent, 0, "{report:?}");
    assert_eq!(held.state(), HoldState::Lost);
    assert!(admin.exists("sd:held").await, "kept until its TTL");
    assert!(matches!(
        client.get_lock("sd:other").try_lock().await,
        Err(redisson_lock::Error::Shutdown)
    ));
    drop(held);
    assert_eq!(client.shutdown().await, Default::default(), "once");
}

/// Releases that cannot be sent within the shutdown timeout (the server does not answer) are
/// counted, and shutdown returns at the timeout.
#[tokio::test]
async fn releases_not_sent_within_the_shutdown_timeout_are_counted() {
    let s = RedisServer::start();
    let proxy = Proxy::start(s.port()).await;
    let config = Config::default()
        .shutdown_timeout(Duration::from_millis(500))
        .timeout(Duration::from_secs(5));
    let client = Client::connect(&proxy.url(), config).await.unwrap();
    let guards: Vec<_> = futures::future::join_all((0..3).map(|i| {
        let lock = client.get_lock(&format!("sd:frozen{i}"));
        async move { lock.lock().await.unwrap() }
    }))
    .await;
    proxy.freeze();
    drop(guards);
    let start = tokio::time::Instant::now();
    let report = client.shutdown().await;
    let took = start.elapsed();
    assert_eq!(report.unsent, 3, "{report:?}");
    assert!(
        took >= Duration::from_millis(500) && took < Duration::from_secs(5),
        "{took:?}"
    );
    proxy.unfreeze();
}

/// The blocking client: dropping the client and its handles after a guard was dropped sends
/// that guard's release before the runtime stops.
#[test]
fn the_blocking_clients_last_drop_releases_the_guards_dropped_before() {
    let s = RedisServer::start();
    let client = redisson_lock::blocking::Client::connect(&s.url(), Config::default()).unwrap();
    let lock = client.get_lock("sd:blocking");
    let guard = lock.lock().unwrap();
    drop(guard);
    drop(lock);
    drop(client);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let free = rt.block_on(async {
        let admin = Admin::connect(&s.url()).await;
        !admin.exists("sd:blocking").await
    });
    assert!(
        free,
        "the dropped guard's lock is free once the client is gone"
    );
}

/// The child of the process test below: locks, drops the guard and ends with `shutdown` (the
/// one call a `main` ends with), then its runtime (and process) ends.
#[tokio::test]
#[ignore = "run by a_lock_dropped_before_main_returns_is_free_in_every_run"]
async fn child_drops_a_guard_and_ends_with_shutdown() {
    let url = std::env::var("SHUTDOWN_CHILD_URL").expect("run by its parent");
    let client = Client::connect(&url, Config::default()).await.unwrap();
    let guard = client.get_lock("sd:process").lock().await.unwrap();
    drop(guard);
    client.shutdown().await;
}

/// A process that drops a guard and ends `main` with `client.shutdown().await` leaves the lock
/// free when it exits, in every one of 20 runs (without that call the release dies with the
/// runtime about half of the time).
#[tokio::test]
async fn a_lock_dropped_before_main_returns_is_free_in_every_run() {
    let s = RedisServer::start();
    let admin = Admin::connect(&s.url()).await;
    let exe = std::env::current_exe().unwrap();
    for run in 0..20 {
        let status = tokio::process::Command::new(&exe)
            .args([
                "--exact",
                "child_drops_a_guard_and_ends_with_shutdown",
                "--ignored",
                "--quiet",
            ])
            .env("SHUTDOWN_CHILD_URL", s.url())
            .stdout(std::process::Stdio::null())
            .status()
            .await
            .unwrap();
        assert!(status.success(), "run {run}: the child failed");
        assert!(
            !admin.exists("sd:process").await,
            "run {run}: the lock is still held after the process ended"
        );
    }
}
