//! Ports of Redisson's portable RedissonLockTest cases, plus ownership and mutual exclusion.

use common::{acquire_with, backend_tests};
use redisson_lock_test_kit as common;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use common::{Backend, RedisServer};
use redisson_lock::{Client, Config, Error, Owner, Ttl};
use tokio::time::Instant;

async fn setup() -> (RedisServer, Client) {
    let server = RedisServer::start();
    let client = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    (server, client)
}

async fn get_hold_count_follows_reentry(b: Backend) {
    let n = b.name("t:holdcount");
    let client = b.client().await;
    let lock = client.get_lock(&n);
    assert_eq!(lock.hold_count().await.unwrap(), 0);
    let g = lock.lock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    g.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 0);
    let a = lock.lock().await.unwrap();
    let b = lock.lock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    b.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    a.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 0);
}

async fn is_held_and_is_locked_from_the_owner_and_from_another_owner(b: Backend) {
    let n = b.name("t:held");
    let client = b.client().await;
    let lock = client.get_lock_with_owner(&n, Owner::new());
    let other = client.get_lock_with_owner(&n, Owner::new());
    assert!(!lock.is_held_by_current().await.unwrap());
    assert!(!lock.is_locked().await.unwrap());
    let g = lock.lock().await.unwrap();
    assert!(lock.is_held_by_current().await.unwrap());
    assert!(!other.is_held_by_current().await.unwrap());
    assert!(other.is_locked().await.unwrap());
    g.unlock().await.unwrap();
    assert!(!lock.is_held_by_current().await.unwrap());
    assert!(!other.is_held_by_current().await.unwrap());
    assert!(!other.is_locked().await.unwrap());
}

async fn reentrancy_keeps_others_out_until_the_last_hold_goes(b: Backend) {
    let n = b.name("t:reentry");
    let client = b.client().await;
    let lock = client.get_lock_with_owner(&n, Owner::new());
    let a = lock.try_lock().await.unwrap().expect("first");
    let b = lock.try_lock().await.unwrap().expect("re-entry");
    b.unlock().await.unwrap();
    let other = client.get_lock_with_owner(&n, Owner::new());
    assert!(other.try_lock().await.unwrap().is_none());
    a.unlock().await.unwrap();
    assert!(other.try_lock().await.unwrap().is_some());
}

async fn unlock_by_another_owner_fails_and_lock_unlock_twice_works(b: Backend) {
    let n = b.name("t:unlockfail");
    let client = b.client().await;
    let lock = client.get_lock_with_owner(&n, Owner::new());
    let g = lock.lock().await.unwrap();
    let other = client.get_lock_with_owner(&n, Owner::new());
    assert!(matches!(other.unlock().await, Err(Error::NotHeld { .. })));
    g.unlock().await.unwrap();
    for _ in 0..2 {
        lock.lock().await.unwrap().unlock().await.unwrap();
    }
}

async fn java_style_lock_keep_then_handle_unlock(b: Backend) {
    let n = b.name("t:javastyle");
    let client = b.client().await;
    let lock = client.get_lock(&n);
    lock.lock().await.unwrap().keep();
    lock.lock().await.unwrap().keep();
    assert_eq!(client.stats().watchdog_holds, 1);
    lock.unlock().await.unwrap();
    assert!(lock.is_locked().await.unwrap());
    lock.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
    assert_eq!(client.stats().watchdog_holds, 0);
}

async fn force_unlock_frees_the_lock_for_everyone(b: Backend) {
    let n = b.name("t:force");
    let client = b.client().await;
    let lock = client.get_lock(&n);
    lock.lock().await.unwrap().keep();
    assert!(lock.force_unlock().await.unwrap());
    assert!(!lock.is_locked().await.unwrap());
    assert!(!client.get_lock(&n).is_locked().await.unwrap());
}

async fn try_lock_for_waits_the_full_time_and_no_longer(b: Backend) {
    let n = b.name("t:trywait");
    // Redisson testTryLockWait: another client takes the lock and shuts down (no unlock).
    let client = b.client().await;
    let other = b.client().await;
    other.get_lock(&n).lock().await.unwrap().keep();
    other.shutdown().await;
    let started = Instant::now();
    let r = client
        .get_lock(&n)
        .try_lock_for(Duration::from_secs(3))
        .await
        .unwrap();
    let waited = started.elapsed();
    assert!(r.is_none());
    assert!(waited >= Duration::from_millis(2990), "{waited:?}");
    assert!(waited < Duration::from_secs(6), "{waited:?}");
    assert_eq!(client.stats().subscribed_channels, 0);
}

async fn an_expired_lease_hands_over_without_a_message(b: Backend) {
    let n = b.name("t:expire");
    // Redisson testExpire: expiry publishes nothing; the waiter's TTL bound notices it.
    let client = b.client().await;
    let holder = client.get_lock_with_owner(&n, Owner::new());
    let started = Instant::now();
    let g = holder
        .lock_with_lease(Duration::from_secs(2))
        .await
        .unwrap();
    let waiter = client.get_lock_with_owner(&n, Owner::new());
    let w = waiter.lock().await.unwrap();
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(1900), "{waited:?}");
    assert!(waited < Duration::from_secs(4), "{waited:?}");
    assert!(g.is_lost());
    assert!(matches!(g.unlock().await, Err(Error::NotHeld { .. })));
    assert!(waiter.is_held_by_current().await.unwrap());
    w.unlock().await.unwrap();
}

async fn remaining_ttl_reports_lease_absence_and_watchdog(b: Backend) {
    let n = b.name("t:ttl");
    let client = b.client().await;
    let lock = client.get_lock(&n);
    let g = lock
        .lock_with_lease(Duration::from_secs(3600))
        .await
        .unwrap();
    let Ttl::Expires(d) = lock.remaining_ttl().await.unwrap() else {
        panic!()
    };
    assert!(d > Duration::from_secs(3590) && d <= Duration::from_secs(3600));
    g.unlock().await.unwrap();
    assert_eq!(lock.remaining_ttl().await.unwrap().as_pttl(), -2);
    let g = lock.lock().await.unwrap();
    let Ttl::Expires(d) = lock.remaining_ttl().await.unwrap() else {
        panic!()
    };
    assert!(d > Duration::from_secs(29) && d <= Duration::from_secs(30));
    g.unlock().await.unwrap();
}

#[tokio::test]
async fn a_stopped_server_gives_an_error_not_a_silent_false() {
    // Redisson testRedisFailed.
    let mut s = RedisServer::start();
    let client = Client::connect(
        &s.url(),
        Config::default().timeout(Duration::from_millis(500)),
    )
    .await
    .unwrap();
    s.kill();
    let r = client
        .get_lock("t:down")
        .try_lock_with_lease(Duration::from_secs(5), Duration::from_secs(10))
        .await;
    let e = r.unwrap_err();
    assert!(e.is_transient(), "{e:?}");
}

#[tokio::test]
async fn connect_to_a_closed_port_fails_fast_and_bad_urls_are_invalid() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cfg = Config::default().connect_timeout(Duration::from_millis(500));
    let r = Client::connect(&format!("redis://127.0.0.1:{port}"), cfg).await;
    assert!(r.is_err());
    let r = Client::connect("not a url://x:secret@", Config::default()).await;
    match r {
        Err(e @ Error::InvalidArgument(_)) => assert!(!e.to_string().contains("secret")),
        other => panic!("{other:?}"),
    }
}

async fn two_tasks_on_one_thread_never_reenter_each_others_lock(b: Backend) {
    let n = b.name("t:tasks");
    let client = b.client().await;
    let a = client.get_lock(&n);
    let b = client.get_lock(&n);
    let ga = a.lock().await.unwrap();
    let task = tokio::spawn(async move { b.try_lock().await.unwrap().is_some() });
    assert!(
        !task.await.unwrap(),
        "a different handle is a different owner"
    );
    // An explicit shared owner re-enters on purpose.
    let same = client.get_lock_with_owner(&n, a.owner());
    let again = same
        .try_lock()
        .await
        .unwrap()
        .expect("same owner re-enters");
    assert_eq!(a.hold_count().await.unwrap(), 2);
    drop(again);
    ga.unlock().await.unwrap();
}

async fn a_guard_can_be_released_from_another_task_and_thread(b: Backend) {
    let n = b.name("t:move");
    let client = b.client().await;
    let lock = client.get_lock(&n);
    let g = lock.lock().await.unwrap();
    // Unlocked on a plain thread with its own runtime; the client's runtime keeps running.
    let outcome = tokio::task::spawn_blocking(move || {
        std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().unwrap();
            rt.block_on(g.unlock())
        })
        .join()
        .unwrap()
    })
    .await
    .unwrap();
    assert!(outcome.is_ok());
    assert!(!lock.is_locked().await.unwrap());
}

async fn eight_owners_over_two_clients_never_lose_an_increment(b: Backend) {
    let n = b.name("t:counter-lock");
    let clients = [b.client().await, b.client().await];
    let owners = (0..8)
        .map(|i| acquire_with!(clients[i % 2].get_lock(&n), |l| l.lock()))
        .collect();
    common::assert_exclusive_increments(&b.url(), owners, 250).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifteen_jobs_on_one_client_and_a_hundred_clients_once_each() {
    // Redisson testConcurrency_SingleInstance and testConcurrency_MultiInstance.
    let (s, client) = setup().await;
    let counter = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..15 {
        let lock = client.get_lock("t:single");
        let counter = counter.clone();
        tasks.push(tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            let v = counter.load(Ordering::SeqCst);
            tokio::task::yield_now().await;
            counter.store(v + 1, Ordering::SeqCst);
            g.unlock().await.unwrap();
        }));
    }
    for t in tasks.drain(..) {
        t.await.unwrap();
    }
    assert_eq!(counter.load(Ordering::SeqCst), 15);

    let connecting = Arc::new(tokio::sync::Semaphore::new(10));
    for _ in 0..100 {
        let url = s.url();
        let counter = counter.clone();
        let connecting = connecting.clone();
        tasks.push(tokio::spawn(async move {
            let permit = connecting.acquire_owned().await.unwrap();
            let c = Client::connect(&url, Config::default()).await.unwrap();
            drop(permit);
            let g = c.get_lock("t:multi").lock().await.unwrap();
            let v = counter.load(Ordering::SeqCst);
            tokio::task::yield_now().await;
            counter.store(v + 1, Ordering::SeqCst);
            g.unlock().await.unwrap();
            c.shutdown().await;
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(counter.load(Ordering::SeqCst), 115);
}

#[test]
fn blocking_api_is_owned_by_the_calling_thread() {
    let s = RedisServer::start();
    let client = redisson_lock::blocking::Client::connect(&s.url(), Config::default()).unwrap();
    let lock = Arc::new(client.get_lock("t:blocking"));
    assert_eq!(lock.hold_count().unwrap(), 0);
    let g = lock.lock().unwrap();
    let g2 = lock.lock().unwrap();
    assert_eq!(lock.hold_count().unwrap(), 2);
    assert!(lock.is_held_by_current_thread().unwrap());
    assert_eq!(g.owner(), Owner::current_thread());
    let l2 = lock.clone();
    let other = std::thread::spawn(move || {
        (
            l2.is_held_by_current_thread().unwrap(),
            l2.try_lock().unwrap().is_some(),
            l2.is_locked().unwrap(),
            matches!(l2.unlock(), Err(Error::NotHeld { .. })),
        )
    })
    .join()
    .unwrap();
    assert_eq!(other, (false, false, true, true));
    g2.unlock().unwrap();
    // A guard moved to another thread still releases its own owner's hold.
    std::thread::spawn(move || g.unlock().unwrap())
        .join()
        .unwrap();
    assert!(!lock.is_locked().unwrap());
    let waiter = {
        let l = lock.clone();
        let held = lock.lock().unwrap();
        let h = std::thread::spawn(move || {
            let t = std::time::Instant::now();
            let g = l.try_lock_for(Duration::from_secs(10)).unwrap();
            (t.elapsed(), g.is_some())
        });
        std::thread::sleep(Duration::from_millis(300));
        held.unlock().unwrap();
        h.join().unwrap()
    };
    assert!(waiter.1);
    assert!(waiter.0 >= Duration::from_millis(250) && waiter.0 < Duration::from_secs(5));
    // On a thread driving an async runtime it is a documented panic (Tokio's own rule)...
    let rt = tokio::runtime::Runtime::new().unwrap();
    let misuse = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async { lock.is_locked() })
    }));
    assert!(
        misuse.is_err(),
        "the blocking API panics on an async worker"
    );
    // ...while spawn_blocking is the supported way in from async code.
    let l = lock.clone();
    let (held, locked) = rt.block_on(async move {
        tokio::task::spawn_blocking(move || {
            let g = l.lock().unwrap();
            let held = l.is_held_by_current_thread().unwrap();
            g.unlock().unwrap();
            (held, l.is_locked().unwrap())
        })
        .await
        .unwrap()
    });
    assert_eq!((held, locked), (true, false));
}

#[tokio::test]
async fn acquisition_futures_are_owned_and_clones_share_the_owner() {
    let (_s, client) = setup().await;
    let lock = client.get_lock("t:owned");
    // The future does not borrow the handle: spawn it directly.
    let guard = tokio::spawn(lock.lock()).await.unwrap().unwrap();
    assert_eq!(guard.owner(), lock.owner());
    // A clone is the same owner: it re-enters.
    let clone = lock.clone();
    assert_eq!(clone.owner(), lock.owner());
    let again = tokio::spawn(clone.try_lock()).await.unwrap().unwrap();
    assert!(again.is_some(), "same owner re-enters");
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    // Another handle is another owner.
    let other = client.get_lock("t:owned");
    let waiting = tokio::spawn(other.try_lock_for(Duration::from_secs(10)));
    drop(again);
    guard.unlock().await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(got.is_some());
    // The handle may be gone while its spawned acquisition runs.
    let l2 = client.get_lock("t:owned2");
    let fut = l2.lock_with_lease(Duration::from_secs(5));
    drop(l2);
    let g = tokio::spawn(fut).await.unwrap().unwrap();
    g.unlock().await.unwrap();
}

async fn sixteen_clients_looping_with_a_held_critical_section_never_overlap(b: Backend) {
    let n = b.name("t:loop");
    // Redisson testConcurrencyLoop_MultiInstance, scaled to 16 clients x 25 rounds of 2 ms.
    let inside = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let client = b.client().await;
        let (inside, done) = (inside.clone(), done.clone());
        let lock = client.get_lock(&n);
        tasks.push(tokio::spawn(async move {
            for _ in 0..25 {
                let g = lock.lock().await.unwrap();
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "overlap");
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                done.fetch_add(1, Ordering::SeqCst);
                g.unlock().await.unwrap();
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(done.load(Ordering::SeqCst), 400);
}

backend_tests!(
    get_hold_count_follows_reentry,
    is_held_and_is_locked_from_the_owner_and_from_another_owner,
    reentrancy_keeps_others_out_until_the_last_hold_goes,
    unlock_by_another_owner_fails_and_lock_unlock_twice_works,
    java_style_lock_keep_then_handle_unlock,
    force_unlock_frees_the_lock_for_everyone,
    try_lock_for_waits_the_full_time_and_no_longer,
    an_expired_lease_hands_over_without_a_message,
    remaining_ttl_reports_lease_absence_and_watchdog,
    two_tasks_on_one_thread_never_reenter_each_others_lock,
    a_guard_can_be_released_from_another_task_and_thread,
    sixteen_clients_looping_with_a_held_critical_section_never_overlap,
);

// Mutual exclusion is about any deployment: also over TLS and through Sentinel.
backend_tests!(any: eight_owners_over_two_clients_never_lose_an_increment);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_guard_is_released_before_a_later_acquisition_through_the_same_client() {
    // drop() hands the release to the background; a later acquisition of the same lock through
    // the same client waits for it, so another owner's try_lock right after the drop succeeds.
    let (_s, client) = setup().await;
    let a = client.get_lock("t:dropthen");
    let b = client.get_lock("t:dropthen");
    for round in 0..200 {
        drop(a.lock().await.unwrap());
        let g = b.try_lock().await.unwrap();
        assert!(
            g.is_some(),
            "round {round}: the dropped hold was still there"
        );
        drop(g);
    }
}

/// A guard names its hold as Redis keeps it: the lock's raw name, the owner field that is the
/// hash's one field (count 1), its owner, and whether the watchdog renews it (the `Debug` form
/// says the same). Code that checks or logs a hold by these must not be told another lock's.
#[tokio::test]
async fn a_guard_names_its_lock_its_owner_field_and_its_lease_mode_as_redis_holds_them() {
    let (server, client) = setup().await;
    let admin = common::Admin::connect(&server.url()).await;
    let lock = client.get_lock("t:guardview");
    let g = lock.lock().await.unwrap();
    assert_eq!(g.name(), "t:guardview");
    assert_eq!(g.name(), lock.raw_name());
    assert_eq!(g.owner(), lock.owner());
    let field = g.owner_field().to_owned();
    assert_eq!(field, lock.owner_field());
    assert!(
        field.starts_with(&format!("{}:", client.id())),
        "{field} is not a field of client {}",
        client.id()
    );
    let hash = admin.hgetall("t:guardview").await;
    assert_eq!(
        hash,
        [(field.clone(), "1".to_owned())].into_iter().collect(),
        "the guard's owner field is the hash's one field"
    );
    assert!(g.is_watchdog(), "taken without a lease: renewed");
    let shown = format!("{g:?}");
    for part in ["t:guardview", field.as_str(), "watchdog: true"] {
        assert!(shown.contains(part), "{shown} lacks {part}");
    }
    g.unlock().await.unwrap();

    let leased = lock.lock_with_lease(Duration::from_secs(10)).await.unwrap();
    assert!(!leased.is_watchdog(), "taken with a lease: not renewed");
    assert_eq!(leased.owner_field(), field, "one owner, one field");
    assert!(format!("{leased:?}").contains("watchdog: false"));
    leased.unlock().await.unwrap();
    assert!(!admin.exists("t:guardview").await);
}

/// The Java idiom "lock with a lease and let it expire" on per-entity names: 100 000 distinct
/// locks taken with a lease and kept (no unlock) leave nothing in the client's owner ledger once
/// their leases have run out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_and_kept_locks_leave_the_owner_ledger_after_their_leases() {
    const N: usize = 100_000;
    const TASKS: usize = 64;
    let (server, client) = setup().await;
    let lease = Duration::from_secs(2);
    let started = Instant::now();
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let client = client.clone();
            tokio::spawn(async move {
                for i in (t..N).step_by(TASKS) {
                    let lock = client.get_lock(&format!("order:{{{i}}}"));
                    lock.lock_with_lease(lease).await.unwrap().keep();
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    let took = started.elapsed();
    let entries = client.stats().owner_entries;
    assert!(entries > 0, "holds within their lease are tracked");
    println!("{N} leased acquisitions in {took:?}; {entries} entries right after");
    let admin = common::Admin::connect(&server.url()).await;
    assert!(
        common::eventually(Duration::from_secs(60), || async {
            client.stats().owner_entries == 0
        })
        .await,
        "{} entries left after the leases",
        client.stats().owner_entries
    );
    let keys: i64 = admin.cmd("DBSIZE", vec![]).await.unwrap().as_i64().unwrap();
    assert!(
        keys < N as i64,
        "the leases ran out in Redis too ({keys} keys)"
    );
}
