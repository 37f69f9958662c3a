//! The loss signal knows about the connection (issue 23): a hold is in doubt the moment the
//! connection to its Redis drops, before any other client can acquire from a restarted server;
//! a restart that keeps the key brings it back to held; a frozen connection puts it in doubt at
//! the renewal's timeout and loses it at the deadline. Real `redis-server` processes.

use redisson_lock_test_kit as common;

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use common::{eventually, proxy::Proxy, Admin, RedisServer};
use parking_lot::Mutex;
use redisson_lock::{Client, Config, HoldState, LockGuard};
use tokio::time::Instant;

/// Bound of every wait on an event.
const T: Duration = Duration::from_secs(15);
const MS: Duration = Duration::from_millis(1);

fn config(watchdog: Duration) -> Config {
    common::config()
        .lock_watchdog_timeout(watchdog)
        .timeout(Duration::from_millis(500))
        .retry_delay(Duration::from_millis(100))
        .reconnect_max_delay(Duration::from_millis(100))
}

/// Tries to acquire `name` through `client` every 20 ms until it succeeds; the instant it did.
async fn acquire_soon(client: &Client, name: &str) -> (Instant, LockGuard) {
    let lock = client.get_lock(name);
    let deadline = Instant::now() + T;
    loop {
        if let Ok(Some(g)) = lock.try_lock().await {
            return (Instant::now(), g);
        }
        assert!(Instant::now() < deadline, "never acquired {name}");
        tokio::time::sleep(20 * MS).await;
    }
}

/// The crash cycle of holds on an AOF server `s` (`--appendonly yes`): kill -9, every hold in
/// doubt; a restart with the keys, every hold held again (confirmed by its renewal or check);
/// kill -9 again, in doubt; the AOF wiped and a restart without the keys, every hold lost.
/// `states` reads the holds' states.
async fn crash_restart_with_then_without_the_keys(
    s: &mut RedisServer,
    states: impl Fn() -> Vec<HoldState>,
) {
    let all = |want: HoldState| {
        let states = &states;
        move || async move { states().iter().all(|&st| st == want) }
    };
    s.kill();
    assert!(
        eventually(T, all(HoldState::InDoubt)).await,
        "{:?}",
        states()
    );
    s.restart();
    assert!(eventually(T, all(HoldState::Held)).await, "{:?}", states());

    s.kill();
    assert!(
        eventually(T, all(HoldState::InDoubt)).await,
        "{:?}",
        states()
    );
    std::fs::remove_dir_all(s.dir().join("appendonlydir")).unwrap();
    s.restart();
    assert!(eventually(T, all(HoldState::Lost)).await, "{:?}", states());
}

// kill -9 and restart empty: the holder is told before the other client acquires.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_without_the_key_is_announced_before_another_client_acquires() {
    let mut s = RedisServer::start();
    let holder = Client::connect(&s.url(), config(Duration::from_secs(3)))
        .await
        .unwrap();
    let other = Client::connect(&s.url(), config(Duration::from_secs(3)))
        .await
        .unwrap();
    let guard = Arc::new(holder.get_lock("loss:restart").lock().await.unwrap());
    assert!(!guard.is_lost());

    s.kill();
    let killed = Instant::now();
    let told = {
        let guard = guard.clone();
        tokio::spawn(async move {
            guard.lost().await;
            Instant::now()
        })
    };
    tokio::time::sleep(500 * MS).await;
    s.restart();
    let restarted = Instant::now();
    let (acquired_at, theirs) = acquire_soon(&other, "loss:restart").await;
    // Read at once: what the holder was told when the other client got in.
    let lost_when_acquired = guard.is_lost();
    let told_at = tokio::time::timeout(T, told).await.unwrap().unwrap();
    println!(
        "told {:?} after the kill; server back {:?} after it; other acquired {:?} after it",
        told_at - killed,
        restarted - killed,
        acquired_at - killed
    );
    assert!(
        lost_when_acquired,
        "the other client acquired while the holder's is_lost() was false"
    );
    assert!(told_at < restarted, "told before the server was back");
    // The renewal on the new connection finds the field gone: lost for good.
    assert!(
        eventually(T, || async { guard.state() == HoldState::Lost }).await,
        "{:?}",
        guard.state()
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(guard.state(), HoldState::Lost, "never held again");
    theirs.unlock().await.unwrap();
}

// Restart with AOF: the key survives, the hold comes back to Held and nobody else gets in.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_that_keeps_the_key_returns_the_hold_to_held_and_lets_nobody_in() {
    let mut s = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let admin_url = s.url();
    let watchdog = Duration::from_secs(3);
    let holder = Client::connect(&s.url(), config(watchdog)).await.unwrap();
    let other = Client::connect(&s.url(), config(watchdog)).await.unwrap();
    let lock = holder.get_lock("loss:aof");
    let field = lock.owner_field().to_owned();
    let guard = Arc::new(lock.lock().await.unwrap());

    let waiter = tokio::spawn({
        let lock = other.get_lock("loss:aof");
        async move {
            // Waits through the restart (errors while the server is down are retried).
            loop {
                if let Ok(g) = lock.lock().await {
                    return (Instant::now(), g);
                }
                tokio::time::sleep(20 * MS).await;
            }
        }
    });
    tokio::time::sleep(200 * MS).await;
    s.kill();
    tokio::time::timeout(T, guard.lost())
        .await
        .expect("in doubt when the connection drops");
    assert_eq!(guard.state(), HoldState::InDoubt);
    tokio::time::sleep(500 * MS).await;
    s.restart();
    let restarted = Instant::now();
    assert!(
        eventually(T, || async { guard.state() == HoldState::Held }).await,
        "confirmed by the renewal after the reconnect: {:?}",
        guard.state()
    );
    let confirmed_in = restarted.elapsed();
    println!("held again {confirmed_in:?} after the server was back");
    assert!(!guard.is_lost());
    let admin = Admin::connect(&admin_url).await;
    assert_eq!(
        admin
            .hgetall("loss:aof")
            .await
            .get(&field)
            .map(String::as_str),
        Some("1"),
        "the holder's field is still there"
    );
    // Two watchdog timeouts later the hold is still held and the waiter still waits.
    tokio::time::sleep(watchdog * 2).await;
    assert_eq!(guard.state(), HoldState::Held);
    assert!(!waiter.is_finished(), "nobody else got in");
    let released = Instant::now();
    Arc::try_unwrap(guard).unwrap().unlock().await.unwrap();
    let (acquired_at, theirs) = tokio::time::timeout(T, waiter).await.unwrap().unwrap();
    assert!(acquired_at >= released);
    theirs.unlock().await.unwrap();
}

// A frozen connection: in doubt once a renewal times out, lost at the deadline, never held
// again after the thaw; a shorter freeze is confirmed after the thaw.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_connection_is_in_doubt_at_the_renewal_timeout_and_lost_at_the_deadline() {
    let s = RedisServer::start();
    let proxy = Proxy::start(s.port()).await;
    let watchdog = Duration::from_millis(3000);
    let holder = Client::connect(&proxy.url(), config(watchdog))
        .await
        .unwrap();
    let other = Client::connect(&s.url(), config(watchdog)).await.unwrap();
    let guard = holder.get_lock("loss:frozen").lock().await.unwrap();
    let deadline = guard.valid_until();

    proxy.freeze();
    let frozen = Instant::now();
    tokio::time::timeout(T, guard.lost()).await.unwrap();
    let doubted = Instant::now();
    assert_eq!(guard.state(), HoldState::InDoubt);
    // The next renewal is due within a third of the watchdog; it times out after 500 ms.
    assert!(
        doubted - frozen <= watchdog / 3 + 500 * MS + 500 * MS,
        "in doubt {:?} after the freeze",
        doubted - frozen
    );
    assert!(doubted < deadline, "in doubt before the deadline");

    let waiter = tokio::spawn({
        let lock = other.get_lock("loss:frozen");
        async move {
            let g = lock.lock().await.unwrap();
            (Instant::now(), g)
        }
    });
    let (acquired_at, theirs) = tokio::time::timeout(T, waiter).await.unwrap().unwrap();
    assert!(acquired_at > doubted);
    assert_eq!(
        guard.state(),
        HoldState::Lost,
        "lost (its deadline passed) once another client could acquire"
    );
    proxy.unfreeze();
    tokio::time::sleep(watchdog / 2).await;
    assert_eq!(guard.state(), HoldState::Lost, "never held again");
    theirs.unlock().await.unwrap();
    drop(guard);

    // A freeze shorter than the deadline: in doubt, then confirmed after the thaw.
    let guard = holder.get_lock("loss:frozen2").lock().await.unwrap();
    proxy.freeze();
    tokio::time::timeout(T, guard.lost()).await.unwrap();
    assert_eq!(guard.state(), HoldState::InDoubt);
    proxy.unfreeze();
    assert!(
        eventually(T, || async { guard.state() == HoldState::Held }).await,
        "{:?}",
        guard.state()
    );
    guard.unlock().await.unwrap();
}

// A leased hold (no watchdog renewal): in doubt at the drop, confirmed by a check after the
// reconnect (AOF), lost when the key is gone (no persistence).

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_hold_is_checked_after_the_reconnect() {
    let mut s = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let holder = Client::connect(&s.url(), config(Duration::from_secs(3)))
        .await
        .unwrap();
    let guard = holder
        .get_lock("loss:leased")
        .lock_with_lease(Duration::from_secs(20))
        .await
        .unwrap();
    // Held again after a restart with the key; lost after one without it (the data is wiped
    // while the client is away).
    crash_restart_with_then_without_the_keys(&mut s, || vec![guard.state()]).await;
}

// A leased group multi-lock hold has no owner field in its hash: after a reconnect it is
// confirmed by the kind's own count query (owner and deadline of every value), not `HEXISTS`.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_group_hold_is_confirmed_by_its_values_after_the_reconnect() {
    let mut s = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let holder = Client::connect(&s.url(), config(Duration::from_secs(3)))
        .await
        .unwrap();
    let group = holder.get_group_lock("loss:group", ["a", "b"]);
    let guard = group
        .lock_with_lease(Duration::from_secs(20))
        .await
        .unwrap();
    // Held again after a restart with the hash; lost after one without it.
    crash_restart_with_then_without_the_keys(&mut s, || vec![guard.state()]).await;
}

// Many holds across restarts without persistence: overlaps happen (the data is gone) but every
// one is announced: no holder is Held while another client holds the same lock.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_restarts_no_holder_is_held_while_another_client_holds_the_lock() {
    let mut s = RedisServer::start();
    let watchdog = Duration::from_millis(1500);
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(Client::connect(&s.url(), config(watchdog)).await.unwrap());
    }
    // Who is inside each lock right now: (worker, its guard).
    type Inside = Mutex<HashMap<String, Vec<(usize, Arc<LockGuard>)>>>;
    let inside: Arc<Inside> = Arc::default();
    let overlaps = Arc::new(AtomicUsize::new(0));
    let unannounced = Arc::new(AtomicUsize::new(0));
    let sections = Arc::new(AtomicUsize::new(0));
    let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let names = ["loss:many:a", "loss:many:b"];
    let mut workers = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        for o in 0..3 {
            let worker = c * 3 + o;
            let name = names[worker % names.len()].to_owned();
            let lock = client.get_lock(&name);
            let (inside, overlaps, unannounced, sections, stopping) = (
                inside.clone(),
                overlaps.clone(),
                unannounced.clone(),
                sections.clone(),
                stopping.clone(),
            );
            workers.push(tokio::spawn(async move {
                while !stopping.load(Ordering::Relaxed) {
                    let Ok(Some(g)) = lock.try_lock().await else {
                        tokio::time::sleep(20 * MS).await;
                        continue;
                    };
                    let g = Arc::new(g);
                    {
                        let mut map = inside.lock();
                        let list = map.entry(name.clone()).or_default();
                        for (other, theirs) in list.iter() {
                            overlaps.fetch_add(1, Ordering::Relaxed);
                            if !theirs.is_lost() {
                                unannounced.fetch_add(1, Ordering::Relaxed);
                                eprintln!("worker {worker} got in while worker {other} was Held");
                            }
                        }
                        list.push((worker, g.clone()));
                    }
                    sections.fetch_add(1, Ordering::Relaxed);
                    // The section runs to its end whatever the holder is told: what is
                    // checked is what it was told when another client got in.
                    tokio::time::sleep(Duration::from_secs(3)).await;
                    inside
                        .lock()
                        .get_mut(&name)
                        .unwrap()
                        .retain(|(w, _)| *w != worker);
                    if let Ok(g) = Arc::try_unwrap(g) {
                        let _ = g.unlock().await;
                    }
                }
            }));
        }
    }
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(1000)).await;
        s.kill();
        tokio::time::sleep(500 * MS).await;
        s.restart();
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stopping.store(true, Ordering::Relaxed);
    for w in workers {
        tokio::time::timeout(T, w).await.unwrap().unwrap();
    }
    let (overlaps, unannounced) = (
        overlaps.load(Ordering::Relaxed),
        unannounced.load(Ordering::Relaxed),
    );
    println!(
        "{} critical sections, {overlaps} overlaps, {unannounced} unannounced",
        sections.load(Ordering::Relaxed)
    );
    assert!(sections.load(Ordering::Relaxed) >= 8);
    assert!(
        overlaps >= 1,
        "the restarts lost holds that others then took"
    );
    assert_eq!(
        unannounced, 0,
        "every overlap was announced to the earlier holder"
    );
}

// `Lock::run` (what `#[locked]` expands to) drops the body when its hold is in doubt.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_drops_the_body_when_its_node_goes_away() {
    let mut s = RedisServer::start();
    let client = Client::connect(&s.url(), config(Duration::from_secs(30)))
        .await
        .unwrap();
    let lock = client.get_lock("loss:run");
    let entered = Arc::new(tokio::sync::Notify::new());
    let task = tokio::spawn({
        let entered = entered.clone();
        async move {
            lock.run(|| async move {
                entered.notify_one();
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok::<_, redisson_lock::Error>(())
            })
            .await
        }
    });
    tokio::time::timeout(T, entered.notified()).await.unwrap();
    s.kill();
    let killed = Instant::now();
    let outcome = tokio::time::timeout(T, task).await.unwrap().unwrap();
    assert!(
        matches!(outcome, Err(redisson_lock::Error::LockLost { .. })),
        "{outcome:?}"
    );
    assert!(
        killed.elapsed() < Duration::from_secs(2),
        "dropped at the drop ({:?}), not at the 30 s deadline",
        killed.elapsed()
    );
}

// The blocking facade's guard sees the same state.

#[test]
fn the_blocking_guard_is_in_doubt_when_its_node_goes_away() {
    let mut s = RedisServer::start();
    let client =
        redisson_lock::blocking::Client::connect(&s.url(), config(Duration::from_secs(30)))
            .unwrap();
    let guard = client.get_lock("loss:blocking").lock().unwrap();
    assert_eq!(guard.state(), HoldState::Held);
    s.kill();
    let deadline = std::time::Instant::now() + T;
    while guard.state() == HoldState::Held {
        assert!(std::time::Instant::now() < deadline, "never in doubt");
        std::thread::sleep(10 * MS);
    }
    assert_eq!(guard.state(), HoldState::InDoubt);
    assert!(guard.is_lost());
    s.restart();
    let deadline = std::time::Instant::now() + T;
    while guard.state() == HoldState::InDoubt {
        assert!(std::time::Instant::now() < deadline, "never decided");
        std::thread::sleep(10 * MS);
    }
    assert_eq!(guard.state(), HoldState::Lost, "restarted without the key");
}

// Every kind: in doubt at the drop, held again after a restart that kept the keys (AOF), lost
// after a restart without them. The read lock is renewed with R-RENEW, the others with L-RENEW.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_is_in_doubt_at_the_drop_and_decided_by_the_renewal_after_it() {
    let mut s = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let client = Client::connect(&s.url(), config(Duration::from_secs(3)))
        .await
        .unwrap();
    let guards: Vec<redisson_lock::AnyGuard> = vec![
        client.get_lock("kind:r").lock().await.unwrap().erase(),
        client.get_fair_lock("kind:f").lock().await.unwrap().erase(),
        client
            .get_read_write_lock("kind:rw1")
            .read_lock()
            .lock()
            .await
            .unwrap()
            .erase(),
        client
            .get_read_write_lock("kind:rw2")
            .write_lock()
            .lock()
            .await
            .unwrap()
            .erase(),
        client
            .get_fenced_lock("kind:x")
            .lock()
            .await
            .unwrap()
            .erase(),
        client.get_spin_lock("kind:s").lock().await.unwrap().erase(),
        client
            .get_lock("kind:leased")
            .lock_with_lease(Duration::from_secs(30))
            .await
            .unwrap()
            .erase(),
    ];
    crash_restart_with_then_without_the_keys(&mut s, || guards.iter().map(|g| g.state()).collect())
        .await;
}

/// A lock guard's owned view (`Guard::watch`, issue 41) follows its hold: a task the holder
/// spawned sees the hold `Lost` once another client force-unlocks the lock and the next
/// renewal finds it gone; `assert_locked` then refuses. A fenced guard's view carries its token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_guards_watch_follows_its_hold_into_lost() {
    let s = RedisServer::start();
    let watchdog = Duration::from_secs(3);
    let holder = Client::connect(&s.url(), config(watchdog)).await.unwrap();
    let other = Client::connect(&s.url(), config(watchdog)).await.unwrap();
    let guard = holder.get_lock("loss:watch").lock().await.unwrap();
    let watch = guard.watch();
    assert_eq!(watch.lock_name(), "loss:watch");
    assert_eq!(watch.token(), None);
    assert_eq!(watch.state(), HoldState::Held);
    assert!(watch.assert_locked().is_ok());
    let watching = tokio::spawn(async move {
        watch.lost().await;
        watch
    });
    assert!(other.get_lock("loss:watch").force_unlock().await.unwrap());
    timeout_lost(&guard).await;
    let watch = tokio::time::timeout(T, watching).await.unwrap().unwrap();
    assert_eq!(watch.state(), HoldState::Lost, "the view follows the hold");
    assert!(watch.assert_locked().is_err());
    drop(guard);

    let fenced = holder
        .get_fenced_lock("loss:watch:fenced")
        .lock()
        .await
        .unwrap();
    let watch = fenced.watch();
    assert_eq!(watch.token(), Some(fenced.token()));
    assert_eq!(watch.state(), HoldState::Held);
    fenced.unlock().await.unwrap();
}

/// `Guard::settled` waits out a doubt and only a doubt: on a held guard it answers `Held` at
/// once; from the drop of the connection it waits (the hold in doubt) until the renewal after
/// the reconnect confirms the hold (AOF: the key survives), then answers `Held`; once the hold
/// is lost (force-unlocked, found gone by the next renewal) it answers `Lost` at once.
/// Otherwise a holder that paused its work in the doubt resumed it before the hold was
/// confirmed, or never resumed nor gave up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settled_waits_out_a_doubt_and_answers_held_or_lost_at_once() {
    let mut s = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let watchdog = Duration::from_secs(3);
    let holder = Client::connect(&s.url(), config(watchdog)).await.unwrap();
    let guard = Arc::new(holder.get_lock("loss:settled").lock().await.unwrap());
    let settled = tokio::time::timeout(Duration::from_secs(1), guard.settled()).await;
    assert_eq!(settled, Ok(HoldState::Held), "a held guard is settled");

    s.kill();
    tokio::time::timeout(T, guard.lost())
        .await
        .expect("in doubt when the connection drops");
    assert_eq!(guard.state(), HoldState::InDoubt);
    let waiting = tokio::spawn({
        let guard = guard.clone();
        async move { guard.settled().await }
    });
    tokio::time::sleep(500 * MS).await;
    assert!(!waiting.is_finished(), "settled() waits while in doubt");
    s.restart();
    let settled = tokio::time::timeout(T, waiting).await.unwrap().unwrap();
    assert_eq!(settled, HoldState::Held, "confirmed after the reconnect");
    assert_eq!(guard.state(), HoldState::Held);

    let other = Client::connect(&s.url(), config(watchdog)).await.unwrap();
    assert!(other.get_lock("loss:settled").force_unlock().await.unwrap());
    tokio::time::timeout(T, guard.lost()).await.unwrap();
    assert_eq!(guard.state(), HoldState::Lost);
    let settled = tokio::time::timeout(Duration::from_secs(1), guard.settled()).await;
    assert_eq!(settled, Ok(HoldState::Lost), "a lost guard is settled");
}

async fn timeout_lost(guard: &LockGuard) {
    tokio::time::timeout(T, guard.lost()).await.unwrap();
    assert_eq!(guard.state(), HoldState::Lost);
}
