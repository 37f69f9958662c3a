//! The permit watchdog (issue 32 part 3): a permit of a permit-expirable semaphore acquired
//! without a lease is renewed by the client's watchdog on PS-LEASE's wire (Java's
//! `updateLeaseTime`), in the renewal run that renews the locks; it comes back one timeout
//! after its holder dies; its guard is `Lost` once its id is gone from `{N}:timeout`, and in
//! doubt while the connection is away. A permit with an explicit lease keeps its behaviour.
//! Real `redis-server` processes.

use redisson_lock_test_kit as common;

use std::{
    sync::Arc,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use common::{eventually, Admin, RedisServer};
use fred::types::Value;
use redisson_lock::{Client, Config, HoldState, PermitId};
use tokio::time::{timeout, Instant};

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

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The score of `id` in `timeouts` (epoch ms), `None` when it is not there.
async fn score(admin: &Admin, timeouts: &str, id: PermitId) -> Option<i64> {
    let v = admin
        .cmd(
            "ZSCORE",
            vec![timeouts.into(), Value::Bytes(id.as_bytes().to_vec().into())],
        )
        .await
        .unwrap();
    v.as_string().map(|s| s.parse::<f64>().unwrap() as i64)
}

async fn available(admin: &Admin, name: &str) -> Option<String> {
    admin
        .cmd("GET", vec![name.into()])
        .await
        .unwrap()
        .as_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_without_lease_is_renewed_past_its_first_lease_and_given_back_when_dropped() {
    let s = RedisServer::start();
    let watchdog = Duration::from_millis(1500);
    let holder = Client::connect(&s.url(), config(watchdog)).await.unwrap();
    let other = Client::connect(&s.url(), config(watchdog)).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let sem = holder.get_permit_expirable_semaphore("pw:renewed");
    assert!(sem.try_set_permits(1).await.unwrap());

    let before = now_ms();
    let permit = sem.acquire(None).await.unwrap();
    let after = now_ms();
    assert!(permit.is_watchdog());
    assert_eq!(permit.state(), HoldState::Held);
    // Taken with the watchdog timeout as its lease (not the no-lease sentinel).
    let first = score(&admin, sem.timeouts_key(), permit.id())
        .await
        .unwrap();
    assert!(
        (before + 1500..=after + 1500).contains(&first),
        "first lease: score {first}, acquired between {before} and {after}"
    );
    assert_eq!(holder.stats().watchdog_holds, 1, "one hold renewed");

    // Renewed: the score moves on, well past the first lease, while another client's looks
    // (which give back every permit whose score is behind its clock) find nothing to take.
    assert!(
        eventually(T, || async {
            score(&admin, sem.timeouts_key(), permit.id())
                .await
                .is_some_and(|s| s > first + 1500)
        })
        .await,
        "the permit's lease never moved a whole lease past the first: {:?}",
        score(&admin, sem.timeouts_key(), permit.id()).await
    );
    assert!(now_ms() > first, "the first lease has run out");
    let theirs = other.get_permit_expirable_semaphore("pw:renewed");
    assert_eq!(theirs.available_permits().await.unwrap(), 0);
    assert!(theirs.try_acquire(None).await.unwrap().is_none());
    assert_eq!(permit.state(), HoldState::Held);
    assert!(permit.valid_until() > Instant::now());

    // Dropped: given back at once (not at the end of a lease), and no longer renewed.
    let dropped = Instant::now();
    drop(permit);
    let back = timeout(
        T,
        theirs.try_acquire_for(Duration::from_secs(10), Some(Duration::from_secs(30))),
    )
    .await
    .unwrap()
    .unwrap()
    .expect("the dropped permit came back");
    assert!(
        dropped.elapsed() < Duration::from_millis(1400),
        "given back by the drop, not by the lease's end: {:?}",
        dropped.elapsed()
    );
    assert_eq!(holder.stats().watchdog_holds, 0);
    assert!(back.release().await.unwrap());
    assert_eq!(available(&admin, "pw:renewed").await.as_deref(), Some("1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_holders_permit_comes_back_one_timeout_after_its_last_renewal() {
    let s = RedisServer::start();
    let watchdog = Duration::from_millis(1500);
    let holder = Client::connect(&s.url(), config(watchdog)).await.unwrap();
    let other = Client::connect(&s.url(), config(watchdog)).await.unwrap();
    let sem = holder.get_permit_expirable_semaphore("pw:dead");
    assert!(sem.try_set_permits(1).await.unwrap());
    let permit = sem.acquire(None).await.unwrap();
    // Held through a few renewals, then the holder dies (stops without releasing anything).
    tokio::time::sleep(2000 * MS).await;
    let theirs = other.get_permit_expirable_semaphore("pw:dead");
    assert!(theirs.try_acquire(None).await.unwrap().is_none());
    holder.shutdown().await;
    let died = Instant::now();
    let taken = timeout(T, theirs.try_acquire_for(Duration::from_secs(10), None))
        .await
        .unwrap()
        .unwrap()
        .expect("the dead holder's permit comes back");
    let waited = died.elapsed();
    println!("taken {waited:?} after the holder died");
    assert!(
        waited < Duration::from_millis(4500),
        "within about one watchdog timeout of the last renewal: {waited:?}"
    );
    drop(taken);
    std::mem::forget(permit); // its client is gone: nothing to release
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_released_by_its_id_elsewhere_is_lost_at_the_next_renewal() {
    let s = RedisServer::start();
    let watchdog = Duration::from_secs(3);
    let holder = Client::connect(&s.url(), config(watchdog)).await.unwrap();
    let other = Client::connect(&s.url(), config(watchdog)).await.unwrap();
    let sem = holder.get_permit_expirable_semaphore("pw:released");
    assert!(sem.try_set_permits(2).await.unwrap());
    // Another permit keeps the timeout set alive: only this id is gone from it.
    let stays = sem.acquire(None).await.unwrap();
    let permit = sem.acquire(None).await.unwrap();
    let acquired = Instant::now();
    // The permit's owned view (issue 41), e.g. for a task the holder spawns.
    let watch = permit.watch();
    assert_eq!(watch.lock_name(), "pw:released");
    assert_eq!(watch.token(), None);
    assert!(watch.assert_locked().is_ok());
    let watching = tokio::spawn(async move {
        watch.lost().await;
        watch
    });

    // A Java service (any client) releases the permit by its id.
    assert!(other
        .get_permit_expirable_semaphore("pw:released")
        .try_release(permit.id())
        .await
        .unwrap());
    timeout(T, permit.lost()).await.unwrap();
    let lost_after = acquired.elapsed();
    assert_eq!(permit.state(), HoldState::Lost);
    let watch = timeout(T, watching).await.unwrap().unwrap();
    assert_eq!(
        watch.state(),
        HoldState::Lost,
        "the view follows the permit"
    );
    assert!(watch.assert_locked().is_err());
    assert!(
        lost_after < Duration::from_millis(2500),
        "told by the renewal (every second), not by the deadline (3 s): {lost_after:?}"
    );
    assert_eq!(holder.stats().watchdog_holds, 1, "no longer renewed");
    assert_eq!(stays.state(), HoldState::Held);
    // Its release finds nothing (and gives nothing back twice).
    assert!(!permit.release().await.unwrap());
    assert_eq!(sem.available_permits().await.unwrap(), 1);
    assert!(stays.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_and_locks_are_renewed_by_one_run() {
    let s = RedisServer::start();
    let watchdog = Duration::from_millis(1500);
    let client = Client::connect(&s.url(), config(watchdog)).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let a = client.get_permit_expirable_semaphore("pw:one-a");
    let b = client.get_permit_expirable_semaphore("pw:one-b");
    assert!(a.try_set_permits(2).await.unwrap());
    assert!(b.try_set_permits(1).await.unwrap());
    let lock = client.get_lock("pw:one-lock").lock().await.unwrap();
    let permits = [
        a.acquire(None).await.unwrap(),
        a.acquire(None).await.unwrap(),
        b.acquire(None).await.unwrap(),
    ];
    assert_eq!(client.stats().watchdog_holds, 4);
    let firsts = [
        score(&admin, a.timeouts_key(), permits[0].id())
            .await
            .unwrap(),
        score(&admin, a.timeouts_key(), permits[1].id())
            .await
            .unwrap(),
        score(&admin, b.timeouts_key(), permits[2].id())
            .await
            .unwrap(),
    ];
    // Over a few periods every permit is renewed, with one call per script per run: one for
    // the three permits, one for the lock (a call per permit would be four per run).
    let calls = client.stats().renewal_calls;
    let started = Instant::now();
    tokio::time::sleep(2000 * MS).await;
    let calls = client.stats().renewal_calls - calls;
    let periods = started.elapsed().as_millis() as u64 / 500;
    for (i, (permit, key)) in permits
        .iter()
        .zip([a.timeouts_key(), a.timeouts_key(), b.timeouts_key()])
        .enumerate()
    {
        let now = score(&admin, key, permit.id()).await.unwrap();
        assert!(
            now > firsts[i],
            "permit {i} renewed: {now} vs {}",
            firsts[i]
        );
    }
    assert!(calls >= 2, "{calls} renewal calls in 2 s");
    assert!(
        calls <= 2 * (periods + 1),
        "two calls per run (one per script) over {periods} periods, not one per hold: {calls}"
    );
    assert_eq!(lock.state(), HoldState::Held);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_with_a_lease_is_not_renewed_and_is_lost_when_its_lease_ends() {
    let s = RedisServer::start();
    let watchdog = Duration::from_millis(600);
    let client = Client::connect(&s.url(), config(watchdog)).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let sem = client.get_permit_expirable_semaphore("pw:leased");
    assert!(sem.try_set_permits(1).await.unwrap());
    let before = now_ms();
    let permit = sem
        .acquire(Some(Duration::from_millis(1500)))
        .await
        .unwrap();
    assert!(!permit.is_watchdog());
    assert_eq!(client.stats().watchdog_holds, 0, "not the watchdog's");
    let first = score(&admin, sem.timeouts_key(), permit.id())
        .await
        .unwrap();
    assert!(first >= before + 1500 && first <= now_ms() + 1500);
    assert_eq!(permit.state(), HoldState::Held);
    timeout(T, permit.lost()).await.unwrap();
    assert_eq!(permit.state(), HoldState::Lost);
    assert_eq!(
        score(&admin, sem.timeouts_key(), permit.id()).await,
        Some(first),
        "never renewed"
    );
    assert!(now_ms() >= first - 50, "lost at the lease's end");

    // A handle without the watchdog takes a permit for ever (Java's acquire() without lease).
    let forever = sem.clone().without_watchdog().acquire(None).await.unwrap();
    assert!(!forever.is_watchdog());
    assert_eq!(
        score(&admin, sem.timeouts_key(), forever.id()).await,
        Some(922_337_203_685_477)
    );
    assert_eq!(forever.state(), HoldState::Held);
    assert!(forever.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_is_in_doubt_while_the_server_is_away_and_held_or_lost_after() {
    let mut s = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let holder = Client::connect(&s.url(), config(Duration::from_secs(3)))
        .await
        .unwrap();
    let sem = holder.get_permit_expirable_semaphore("pw:doubt");
    assert!(sem.try_set_permits(2).await.unwrap());
    let watched = Arc::new(sem.acquire(None).await.unwrap());
    let leased = sem.acquire(Some(Duration::from_secs(20))).await.unwrap();
    tokio::time::sleep(200 * MS).await;

    // The server restarts with its data: both in doubt, then confirmed.
    s.kill();
    timeout(T, watched.lost()).await.unwrap();
    timeout(T, leased.lost()).await.unwrap();
    assert_eq!(watched.state(), HoldState::InDoubt);
    assert_eq!(leased.state(), HoldState::InDoubt);
    s.restart();
    assert!(
        eventually(T, || async {
            watched.state() == HoldState::Held && leased.state() == HoldState::Held
        })
        .await,
        "confirmed after the reconnect: {:?} {:?}",
        watched.state(),
        leased.state()
    );

    // It restarts without its data: both lost.
    s.kill();
    timeout(T, watched.lost()).await.unwrap();
    std::fs::remove_dir_all(s.dir().join("appendonlydir")).unwrap();
    s.restart();
    assert!(
        eventually(T, || async {
            watched.state() == HoldState::Lost && leased.state() == HoldState::Lost
        })
        .await,
        "gone after the reconnect: {:?} {:?}",
        watched.state(),
        leased.state()
    );
}

/// The blocking facade: a permit without a lease is renewed while its blocking guard lives,
/// its state and watch follow it, and it is `Lost` once another client releases its id.
#[test]
fn the_blocking_permit_guard_is_renewed_and_tells_its_state() {
    use redisson_lock::blocking;
    let s = RedisServer::start();
    let config = || config(Duration::from_millis(1500));
    let a = blocking::Client::connect(&s.url(), config()).unwrap();
    let b = blocking::Client::connect(&s.url(), config()).unwrap();
    let sem = a.get_permit_expirable_semaphore("pw:blocking");
    assert!(sem.try_set_permits(2).unwrap());
    let stays = sem.acquire(None).unwrap();
    let permit = sem.acquire(None).unwrap();
    assert!(permit.is_watchdog());
    let watch = permit.watch();
    assert_eq!(watch.lock_name(), "pw:blocking");
    assert!(watch.assert_locked().is_ok());
    // Past two first leases, still held: b finds nothing to take.
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(permit.state(), HoldState::Held);
    let theirs = b.get_permit_expirable_semaphore("pw:blocking");
    assert!(theirs.try_acquire(None).unwrap().is_none());
    assert!(theirs.try_release(permit.id()).unwrap());
    let released = std::time::Instant::now();
    while permit.state() != HoldState::Lost {
        assert!(released.elapsed() < T, "never lost: {:?}", permit.state());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(watch.assert_locked().is_err());
    assert_eq!(stays.state(), HoldState::Held);
    assert!(!permit.release().unwrap());
    assert!(stays.release().unwrap());
    assert_eq!(theirs.available_permits().unwrap(), 2);
    // The rest of the async handle's methods (issue 41).
    assert!(sem.is_watchdog());
    assert!(!sem.clone().without_watchdog().is_watchdog());
    assert_eq!(sem.timeouts_key(), "{pw:blocking}:timeout");
    sem.add_permits(-1).unwrap();
    assert_eq!(sem.available_permits().unwrap(), 1);
    assert!(sem.delete().unwrap());
    assert_eq!(sem.available_permits().unwrap(), 0);
    assert!(!sem.delete().unwrap(), "nothing left");
}
