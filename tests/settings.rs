//! Every `Duration` setting with `Duration::MAX` and with zero: a value the configuration
//! accepts runs the lock operations that use it (single tries, waits, fair-lock queues, a
//! cancelled waiter's give-up, an ambiguous attempt's reconciliation) without a panic anywhere,
//! in the caller or in a background task; a value it refuses is refused with a typed error.

use redisson_lock_test_kit as common;

use std::{cell::Cell, sync::Once, time::Duration};

use common::{replica::ReplicaSet, Admin, RedisServer};
use redisson_lock::{Client, Config, Error};

thread_local! {
    /// Panics on this thread. A test's runtime runs on its one thread, background tasks
    /// included (their panics are caught by Tokio and would otherwise go unseen).
    static PANICS: Cell<usize> = const { Cell::new(0) };
}

fn panics() -> usize {
    PANICS.with(Cell::get)
}

fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.with(|p| p.set(p.get() + 1));
            previous(info);
        }));
    });
}

const WAIT: Duration = Duration::from_secs(10);

/// The operations every setting takes part in, against the server at `url`.
async fn exercise(url: &str, config: Config) {
    count_panics();
    let before = panics();
    let client = Client::connect(url, config).await.expect("accepted");
    let other = Client::connect(url, Config::default()).await.unwrap();
    let admin = Admin::connect(url).await;

    // A single try on a held lock, a wait that a release ends, a wait that runs out.
    let lock = client.get_lock_with_owner("s:lock", redisson_lock::Owner::new());
    let held = other
        .get_lock_with_owner("s:lock", redisson_lock::Owner::new())
        .lock()
        .await
        .unwrap();
    assert!(lock.try_lock().await.unwrap().is_none(), "held by another");
    assert!(lock
        .try_lock_for(Duration::from_millis(50))
        .await
        .unwrap()
        .is_none());
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.try_lock_for(WAIT).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    held.unlock().await.unwrap();
    let guard = tokio::time::timeout(WAIT, waiter)
        .await
        .expect("woken by the release")
        .unwrap()
        .unwrap()
        .expect("acquired after the release");
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    guard.unlock().await.unwrap();
    assert!(!admin.exists("s:lock").await);

    // A fair-lock waiter that is cancelled leaves the queue (its give-up runs in the
    // background).
    let fair = client.get_fair_lock_with_owner("s:fair", redisson_lock::Owner::new());
    let fair_held = other
        .get_fair_lock_with_owner("s:fair", redisson_lock::Owner::new())
        .lock()
        .await
        .unwrap();
    let queued = tokio::spawn({
        let fair = fair.clone();
        async move { fair.try_lock_for(WAIT).await }
    });
    assert!(
        common::eventually(WAIT, || async {
            admin.exists("redisson_lock_queue:{s:fair}").await
        })
        .await,
        "the waiter queued"
    );
    queued.abort();
    let _ = queued.await;
    assert!(
        common::eventually(WAIT, || async {
            !admin.exists("redisson_lock_queue:{s:fair}").await
        })
        .await,
        "the cancelled waiter left the queue"
    );
    fair_held.unlock().await.unwrap();
    let g = fair.lock().await.unwrap();
    g.unlock().await.unwrap();

    // A leased hold, a watchdog hold, re-entry.
    let g1 = lock.lock_with_lease(Duration::from_secs(5)).await.unwrap();
    let g2 = lock.lock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    g2.unlock().await.unwrap();
    g1.unlock().await.unwrap();
    assert!(!admin.exists("s:lock").await);

    client.shutdown().await;
    other.shutdown().await;
    assert_eq!(panics(), before, "a panic (see the output above)");
}

/// `config` is refused when the client connects, with `InvalidArgument` naming `setting`.
async fn refused(config: Config, setting: &str) {
    let e = config.validate().unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains(setting)),
        "{e:?}"
    );
    let server = RedisServer::start();
    let e = Client::connect(&server.url(), config).await.unwrap_err();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains(setting)),
        "{e:?}"
    );
}

async fn accepted(config: Config) {
    let server = RedisServer::start();
    exercise(&server.url(), config).await;
}

/// Zero has no useful meaning for these settings (a zero `retry_delay`, retry at once, is
/// allowed: see below): each is refused by name.
#[tokio::test]
async fn zero_is_refused_where_it_means_nothing() {
    type Set = fn(Config, Duration) -> Config;
    let settings: [(&str, Set); 6] = [
        ("fair_lock_wait_timeout", Config::fair_lock_wait_timeout),
        ("timeout", Config::timeout),
        ("connect_timeout", Config::connect_timeout),
        ("subscription_timeout", Config::subscription_timeout),
        ("reconnect_max_delay", Config::reconnect_max_delay),
        ("replicas_sync_timeout", Config::replicas_sync_timeout),
    ];
    for (name, set) in settings {
        refused(set(Config::default(), Duration::ZERO), name).await;
    }
}

#[tokio::test]
async fn lock_watchdog_timeout_max_and_zero_are_refused() {
    // Longer than a lease Redis can take (MAX_MILLIS): refused, as documented.
    refused(
        Config::default().lock_watchdog_timeout(Duration::MAX),
        "lock_watchdog_timeout",
    )
    .await;
    refused(
        Config::default().lock_watchdog_timeout(Duration::ZERO),
        "lock_watchdog_timeout",
    )
    .await;
}

#[tokio::test]
async fn fair_lock_wait_timeout_max_is_no_limit() {
    accepted(Config::default().fair_lock_wait_timeout(Duration::MAX)).await;
}

#[tokio::test]
async fn timeout_max_is_no_limit() {
    accepted(Config::default().timeout(Duration::MAX)).await;
}

#[tokio::test]
async fn connect_timeout_max_is_no_limit() {
    accepted(Config::default().connect_timeout(Duration::MAX)).await;
}

#[tokio::test]
async fn subscription_timeout_max_is_no_limit() {
    accepted(Config::default().subscription_timeout(Duration::MAX)).await;
}

#[tokio::test]
async fn reconnect_max_delay_max_is_no_limit() {
    accepted(Config::default().reconnect_max_delay(Duration::MAX)).await;
}

#[tokio::test]
async fn replicas_sync_timeout_max_is_no_limit() {
    let set = ReplicaSet::start_direct().await;
    exercise(
        &set.url(),
        Config::default().replicas_sync_timeout(Duration::MAX),
    )
    .await;
}

/// `retry_delay` is also the pause between rounds of an ambiguous attempt's reconciliation:
/// the server sleeps past the command timeout, so the attempt and the reconciliation's first
/// read time out, and the reconciliation decides whether to go again.
async fn retry_delay_case(delay: Duration) {
    count_panics();
    let before = panics();
    let server = RedisServer::start();
    accepted_on(&server, Config::default().retry_delay(delay)).await;
    let config = Config::default()
        .retry_delay(delay)
        .timeout(Duration::from_millis(300));
    let client = Client::connect(&server.url(), config).await.unwrap();
    let admin = Admin::connect(&server.url()).await;
    let lock = client.get_lock_with_owner("s:ambiguous", redisson_lock::Owner::new());
    let sleeper = tokio::spawn({
        let url = server.url();
        async move {
            let a = Admin::connect(&url).await;
            let _ = a.cmd("DEBUG", vec!["SLEEP".into(), "1.5".into()]).await;
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The attempt runs after the sleep: whatever the caller sees (a guard, dropped at once, or
    // an error), the reconciliation undoes the hold it made, or, giving up, it expires with its
    // 3 s lease.
    drop(lock.lock_with_lease(Duration::from_secs(3)).await);
    sleeper.await.unwrap();
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            !admin.exists("s:ambiguous").await
        })
        .await,
        "the ambiguous hold is undone or expires"
    );
    // The owner's next acquisition works.
    let g = lock.lock_with_lease(Duration::from_secs(5)).await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    g.unlock().await.unwrap();
    client.shutdown().await;
    assert_eq!(panics(), before, "a panic (see the output above)");
}

async fn accepted_on(server: &RedisServer, config: Config) {
    exercise(&server.url(), config).await;
}

#[tokio::test]
async fn retry_delay_max_is_no_limit() {
    retry_delay_case(Duration::MAX).await;
}

#[tokio::test]
async fn retry_delay_zero_retries_at_once() {
    retry_delay_case(Duration::ZERO).await;
}
