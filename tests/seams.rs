//! `Held` in the seams between mechanisms (issue 49): one test per defect a review found where
//! two mechanisms meet (background releases and the owner's next acquisition, a read release
//! under the owner's writer, a re-entry and a concurrent release, attempt turns and parked
//! attempts, a partial release whose other parts ended, the partial-unlock TTL). Each test reads
//! the server directly and fails on the code before the fix.

use redisson_lock_test_kit as common;

use std::{sync::Arc, time::Duration};

use common::{
    proxy::{Direction, Proxy},
    Admin, RedisServer,
};
use redisson_lock::{Client, Config, HoldState, Owner, UnlockOutcome};
use tokio::time::Instant;

/// The hold `valid_until` of a guard is covered by the key's expiry: the PTTL read back, counted
/// from when its reply came, reaches at least that far.
async fn key_outlives(admin: &Admin, key: &str, valid_until: Instant, what: &str) {
    let ttl = admin.pttl(key).await;
    let answered = Instant::now();
    assert!(ttl > 0, "{what}: the key {key} has no TTL ({ttl})");
    let expires = answered + Duration::from_millis(ttl as u64);
    assert!(
        expires >= valid_until,
        "{what}: the key expires {:?} before the guard's deadline (pttl {ttl} ms)",
        valid_until - expires
    );
}

/// Defect 1: a dropped guard's release that waits in the background queue (more than the
/// in-flight bound are running, each slow) must not run after the same owner's next
/// acquisition, however long the queue takes. Before, that acquisition waited for it at most
/// one command timeout, then acquired afresh (the old hold had expired); the queued release
/// then found the owner's field, deleted the new hold and published, while its guard said
/// `Held`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_background_release_never_takes_a_later_hold_of_its_owner() {
    let s = RedisServer::start();
    let proxy = Proxy::start(s.port()).await;
    let config = Config::default().timeout(Duration::from_secs(1));
    let client = Client::connect(&proxy.url(), config).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let name = "seams:queued";
    let owner = Owner::new();
    let lock = client.get_lock_with_owner(name, owner);
    // Many holds of other owners, each on its own lock, to fill the background queue.
    let mut others = Vec::new();
    for i in 0..640 {
        others.push(
            client
                .get_lock(&format!("seams:queued:{i}"))
                .lock()
                .await
                .unwrap(),
        );
    }
    let first = lock
        .lock_with_lease(Duration::from_millis(200))
        .await
        .unwrap();
    // Every reply now takes 300 ms: 640 releases ahead, 64 at a time, take about 3 s.
    proxy.set_latency(Direction::Downstream, Duration::from_millis(300));
    drop(others);
    drop(first);
    assert!(client.stats().background_releases > 600);
    // The first hold's lease ends; the owner locks again.
    tokio::time::sleep(Duration::from_millis(250)).await;
    let again = lock.lock().await.unwrap();
    // Every release done, the new hold is on the server and its guard is right.
    let start = Instant::now();
    while client.stats().background_releases > 0 {
        assert!(start.elapsed() < Duration::from_secs(30), "releases stuck");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    proxy.set_latency(Direction::Downstream, Duration::ZERO);
    assert_eq!(again.state(), HoldState::Held);
    let fields = admin.hgetall(name).await;
    assert_eq!(
        fields.get(again.owner_field()).map(String::as_str),
        Some("1"),
        "the new hold is on the server: {fields:?}"
    );
    assert_eq!(again.unlock().await.unwrap(), UnlockOutcome::Released);
}

/// Defect 2: a read release under the same owner's renewed writer keeps the hash's TTL at
/// least the writer's; before, it set it to the remaining read lease and the writer's guard
/// said `Held` past the key's expiry.
#[tokio::test]
async fn a_read_release_never_lowers_the_ttl_under_the_owners_writer() {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let name = "seams:rw";
    let rw = client.get_read_write_lock(name);
    let w = rw.write_lock().lock().await.unwrap();
    let lease = Duration::from_secs(2);
    let r1 = rw.read_lock().lock_with_lease(lease).await.unwrap();
    let r2 = rw.read_lock().lock_with_lease(lease).await.unwrap();
    assert_eq!(r2.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    assert_eq!(w.state(), HoldState::Held);
    key_outlives(
        &admin,
        name,
        w.valid_until(),
        "the writer after a read release",
    )
    .await;
    // The writer still holds the lock.
    assert_eq!(r1.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    key_outlives(
        &admin,
        name,
        w.valid_until(),
        "the writer after the last read",
    )
    .await;
    assert_eq!(w.unlock().await.unwrap(), UnlockOutcome::Released);
    assert!(!admin.exists(name).await);
}

/// Pauses the thread that records an acquisition's outcome on its span (the `tracing`
/// feature's `acquire` span): the acquisition has concluded, its caller has not made the guard
/// yet. Set as the default subscriber of one thread only.
#[cfg(feature = "tracing")]
struct PauseAtOutcome(Duration);

#[cfg(feature = "tracing")]
impl tracing::Subscriber for PauseAtOutcome {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        struct Outcome(bool);
        impl tracing::field::Visit for Outcome {
            fn record_debug(&mut self, field: &tracing::field::Field, _: &dyn std::fmt::Debug) {
                self.0 |= field.name() == "outcome";
            }
        }
        let mut outcome = Outcome(false);
        values.record(&mut outcome);
        if outcome.0 {
            std::thread::sleep(self.0);
        }
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Defect 3: a re-entry's parts are registered before another release of the same owner can
/// compute the TTL the parts left need. Before, they were registered by the caller after the
/// owner's gate was let go: a release waiting for the gate (here: while the re-entry's thread is
/// paused between its conclusion and its guard) found no part left, re-armed the key to its
/// own 400 ms lease, and the re-entry's watchdog guard then said `Held` for the whole watchdog
/// timeout.
#[cfg(feature = "tracing")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_entry_is_counted_by_a_release_that_follows_it_at_once() {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let name = "seams:reentry";
    let lease = Duration::from_millis(400);
    let lock = Arc::new(client.get_lock_with_owner(name, Owner::new()));
    let runtime = tokio::runtime::Handle::current();
    let raced = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for round in 0..10 {
        let leased = lock.lock_with_lease(lease).await.unwrap();
        let (started, wait_started) = tokio::sync::oneshot::channel();
        let reenter = std::thread::spawn({
            let (lock, runtime, raced) = (lock.clone(), runtime.clone(), raced.clone());
            move || {
                let _pause =
                    tracing::subscriber::set_default(PauseAtOutcome(Duration::from_millis(50)));
                runtime.block_on(async move {
                    let attempt = lock.lock();
                    tokio::pin!(attempt);
                    // Polled once: its attempt holds the owner's gate from here (unless it
                    // is already done: then the round shows nothing, and passes).
                    let first = futures::poll!(attempt.as_mut());
                    started.send(()).unwrap();
                    match first {
                        std::task::Poll::Ready(done) => done.unwrap(),
                        std::task::Poll::Pending => {
                            raced.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            attempt.await.unwrap()
                        }
                    }
                })
            }
        });
        wait_started.await.unwrap();
        // Waits for the owner's gate the re-entry holds, and runs as soon as it is let go.
        let released = leased.unlock().await.unwrap();
        let again = tokio::task::spawn_blocking(move || reenter.join().unwrap())
            .await
            .unwrap();
        assert_eq!(released, UnlockOutcome::StillHeld, "round {round}");
        assert_eq!(again.state(), HoldState::Held, "round {round}");
        key_outlives(&admin, name, again.valid_until(), &format!("round {round}")).await;
        assert_eq!(
            again.unlock().await.unwrap(),
            UnlockOutcome::Released,
            "round {round}"
        );
    }
    assert!(
        raced.load(std::sync::atomic::Ordering::SeqCst) > 0,
        "no round had the release wait behind the re-entry"
    );
}

/// Defect 4: attempts parked behind background releases (their lock's release in flight) hold
/// none of the client's attempt turns, so an acquisition of an unrelated free lock goes
/// through in its own round trip. Before, each parked attempt held a turn for up to the command
/// timeout, and the unrelated `try_lock` waited for one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_parked_behind_background_releases_leave_unrelated_locks_free_to_take() {
    let s = RedisServer::start();
    let proxy = Proxy::start(s.port()).await;
    let timeout = Duration::from_secs(2);
    let client = Client::connect(&proxy.url(), Config::default().timeout(timeout))
        .await
        .unwrap();
    // Every reply takes 100 ms and the releases run 64 at a time: 2 000 releases take about
    // 3 s, longer than the command timeout the parked attempts waited for them before.
    let n = 2_000;
    let mut guards = Vec::new();
    for i in 0..n {
        guards.push(
            client
                .get_lock(&format!("seams:turns:{i}"))
                .lock()
                .await
                .unwrap(),
        );
    }
    let rtt = Duration::from_millis(100);
    proxy.set_latency(Direction::Downstream, rtt);
    drop(guards);
    // Other owners try every one of those locks: their attempts wait for the releases.
    let waiting: Vec<_> = (0..n)
        .map(|i| {
            let lock = client.get_lock(&format!("seams:turns:{i}"));
            tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(20)).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let start = Instant::now();
    let free = client
        .get_lock("seams:turns:free")
        .try_lock()
        .await
        .unwrap()
        .expect("a free lock");
    let took = start.elapsed();
    assert!(
        took < timeout / 2,
        "an unrelated free lock took {took:?} (round trip {rtt:?}, command timeout {timeout:?})"
    );
    proxy.set_latency(Direction::Downstream, Duration::ZERO);
    free.unlock().await.unwrap();
    for w in waiting {
        drop(w.await.unwrap().unwrap().expect("acquired once free"));
    }
}

/// Defect 6: a partial release whose other parts' leases have all ended frees the lock and
/// wakes another client's waiter at once. Before, it set the TTL to 1 ms and published
/// nothing, so the waiter slept out the TTL it had last read (the watchdog timeout).
#[tokio::test]
async fn a_partial_release_whose_other_parts_ended_wakes_other_clients_at_once() {
    let s = RedisServer::start();
    let a = Client::connect(&s.url(), Config::default()).await.unwrap();
    let b = Client::connect(&s.url(), Config::default()).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let name = "seams:ended";
    let lock = a.get_lock(name);
    let renewed = lock.lock().await.unwrap();
    let leased = lock
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    let theirs = b.get_lock(name);
    let waiter = tokio::spawn(async move {
        let g = theirs.lock().await.unwrap();
        (Instant::now(), g)
    });
    // The waiter has read the TTL (the watchdog timeout) and sleeps on the channel.
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            admin
                .numsub(&format!("redisson_lock__channel:{{{name}}}"))
                .await
                == 1
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let released = Instant::now();
    assert_eq!(renewed.unlock().await.unwrap(), UnlockOutcome::Released);
    let (acquired, g) = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter acquired")
        .unwrap();
    assert!(
        acquired - released < Duration::from_secs(2),
        "woken {:?} after the release",
        acquired - released
    );
    assert_eq!(
        leased.state(),
        HoldState::Lost,
        "the hold ended with its release"
    );
    assert!(leased.unlock().await.is_err(), "nothing left to release");
    g.unlock().await.unwrap();
}

/// Defect 7: a partial unlock of holds of one lease mode re-arms the key's TTL to the lease, as
/// Redisson does (lease 4 s twice, 1.5 s later one unlock: about 4 s left, not 2.5 s), and the
/// remaining guard's deadline says the same. Through a guard and through the handle.
#[tokio::test]
async fn a_partial_unlock_of_leased_holds_re_arms_the_lease_as_redisson_does() {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let lease = Duration::from_secs(4);
    for by_handle in [false, true] {
        let name = format!("seams:rearm:{by_handle}");
        let lock = client.get_lock(&name);
        let first = lock.lock_with_lease(lease).await.unwrap();
        let second = lock.lock_with_lease(lease).await.unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let sent = Instant::now();
        if by_handle {
            second.keep();
            assert_eq!(lock.unlock().await.unwrap(), UnlockOutcome::StillHeld);
        } else {
            assert_eq!(second.unlock().await.unwrap(), UnlockOutcome::StillHeld);
        }
        let ttl = admin.pttl(&name).await;
        assert!(
            ttl > 3_500,
            "by handle {by_handle}: pttl {ttl} after the partial unlock"
        );
        assert!(
            first.valid_until() >= sent + Duration::from_millis(3_500),
            "by handle {by_handle}: the remaining guard ends {:?} after the unlock",
            first.valid_until() - sent
        );
        key_outlives(&admin, &name, first.valid_until(), "the remaining guard").await;
        assert_eq!(first.unlock().await.unwrap(), UnlockOutcome::Released);
    }
}

/// A guard whose hold expired and was forgotten by the watchdog (its deadline passed), dropped
/// after its owner acquired the lock again, releases nothing: the owner's hold is a later one.
/// Before, its release found the owner's field, took the new hold and published, while the
/// new guard said `Held` (found beside the defects of issue 49).
#[tokio::test]
async fn a_guard_dropped_after_its_owner_acquired_again_leaves_the_new_hold_alone() {
    let s = RedisServer::start();
    // Renewal runs every 100 ms: the expired hold is forgotten well before the next lock.
    let config = Config::default().lock_watchdog_timeout(Duration::from_millis(300));
    let client = Client::connect(&s.url(), config).await.unwrap();
    let other = Client::connect(&s.url(), Config::default()).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let name = "seams:stale";
    let lock = client.get_lock(name);
    let stale = lock
        .lock_with_lease(Duration::from_millis(200))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(stale.state(), HoldState::Lost);
    assert!(!admin.exists(name).await, "the lease ended");
    let again = lock.lock().await.unwrap();
    drop(stale);
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            client.stats().background_releases == 0
        })
        .await
    );
    assert_eq!(again.state(), HoldState::Held);
    let fields = admin.hgetall(name).await;
    assert_eq!(
        fields.get(again.owner_field()).map(String::as_str),
        Some("1"),
        "the new hold is on the server: {fields:?}"
    );
    assert!(other.get_lock(name).try_lock().await.unwrap().is_none());
    assert_eq!(again.unlock().await.unwrap(), UnlockOutcome::Released);
}

/// Defect 5: while an owner of this client holds a lock past the `until` its wait line was
/// given (a watchdog hold outlives its first timeout), the line's head finds the lock busy;
/// that is this client's own hold, not another client's turn. Before, the head counted it as
/// the other clients' time away, and after the long hold the line handed the lock over locally
/// for as long again (up to 2 s) while another client's waiter waited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_local_hold_is_not_counted_as_another_clients_turn() {
    let s = RedisServer::start();
    let timeout = Duration::from_millis(500);
    let a = Client::connect(&s.url(), Config::default().lock_watchdog_timeout(timeout))
        .await
        .unwrap();
    let b = Client::connect(&s.url(), Config::default()).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let name = "seams:turns-long";
    let channel = format!("redisson_lock__channel:{{{name}}}");
    let long = a.get_lock(name).lock().await.unwrap();
    // Local owners wait, then take short holds in a loop.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let taken = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let locals: Vec<_> = (0..3)
        .map(|_| {
            let (lock, done, taken) = (a.get_lock(name), done.clone(), taken.clone());
            tokio::spawn(async move {
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    let g = lock.lock().await.unwrap();
                    taken.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    g.unlock().await.unwrap();
                }
            })
        })
        .collect();
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            admin.numsub(&channel).await == 1
        })
        .await
    );
    // Held five times the line's `until` (the watchdog timeout), renewed meanwhile: longer
    // than the longest turn the line would give back (2 s).
    tokio::time::sleep(timeout * 5).await;
    assert_eq!(long.state(), HoldState::Held);
    let field = long.owner_field().to_owned();
    long.unlock().await.unwrap();
    // A local owner has it now; then another client comes.
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            let fields = admin.hgetall(name).await;
            !fields.is_empty() && !fields.contains_key(&field)
        })
        .await
    );
    let came = Instant::now();
    let before = taken.load(std::sync::atomic::Ordering::SeqCst);
    let theirs = b.get_lock(name);
    let g = tokio::time::timeout(Duration::from_secs(10), theirs.lock())
        .await
        .expect("the other client acquired")
        .unwrap();
    let took = came.elapsed();
    let local_holds = taken.load(std::sync::atomic::Ordering::SeqCst) - before;
    g.unlock().await.unwrap();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    for l in locals {
        l.await.unwrap();
    }
    // The hold in progress when it came, and one more at most (the run's budget is 10 ms).
    assert!(
        local_holds <= 2,
        "the other client waited {took:?} through {local_holds} local holds after the long hold"
    );
}

/// A read hold whose lease ended while the hash lived on (another reader kept it) is still
/// counted on the server; a release then takes that ended hold first, never a live one of the
/// owner: the later hold keeps a timeout key that lasts its guard's deadline. Before,
/// the release deleted the newest timeout key, the later hold's, and the later guard said
/// `Held` with no key behind it (found by the explorer on main after the seven defects).
#[tokio::test]
async fn a_release_of_a_read_hold_whose_lease_ended_leaves_the_owners_later_read_hold() {
    let s = RedisServer::start();
    let config = Config::default().lock_watchdog_timeout(Duration::from_secs(3));
    let client = Client::connect(&s.url(), config.clone()).await.unwrap();
    let other = Client::connect(&s.url(), config).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let name = "seams:read-ended";
    let rw = client.get_read_write_lock_with_owner(name, Owner::new());
    // Another client's reader keeps the hash alive.
    let keeper = other
        .get_read_write_lock_with_owner(name, Owner::new())
        .read_lock()
        .lock()
        .await
        .unwrap();
    let ended = rw
        .read_lock()
        .lock_with_lease(Duration::from_millis(200))
        .await
        .unwrap();
    // Soon after the lease's end: the client still counts the hold (its ledger forgets an
    // ended hold at its next sweep, up to a second later; the ended guard then releases
    // nothing at all).
    tokio::time::sleep(Duration::from_millis(260)).await;
    let later = rw.read_lock().lock().await.unwrap();
    let field = later.owner_field().to_string();
    assert_eq!(
        admin.hgetall(name).await.get(&field).map(String::as_str),
        Some("2"),
        "the ended hold is still counted"
    );
    // The ended guard's release takes the ended hold (or, had the client forgotten it, nothing).
    let _ = ended.unlock().await;
    assert_eq!(later.state(), HoldState::Held);
    let own_keys: Vec<String> = (1..=2)
        .map(|k| format!("{{{name}}}:{field}:rwlock_timeout:{k}"))
        .collect();
    let mut longest = -2;
    for key in &own_keys {
        longest = longest.max(admin.pttl(key).await);
    }
    let answered = Instant::now();
    assert!(
        longest > 0 && answered + Duration::from_millis(longest as u64) >= later.valid_until(),
        "the later read hold keeps a timeout key lasting its deadline (longest pttl {longest})"
    );
    key_outlives(&admin, name, later.valid_until(), "the later read hold").await;
    assert_eq!(later.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    keeper.unlock().await.unwrap();
}

/// The same within one hold: two read holds of one owner under its writer, the first with a
/// short lease. Once that lease ended, dropping its guard releases the ended hold: the second
/// read hold keeps its timeout key for as long as its guard says. Before, the drop's release deleted
/// the second hold's key (found by the explorer).
#[tokio::test]
async fn dropping_a_read_guard_whose_lease_ended_leaves_its_owners_other_read_hold() {
    let s = RedisServer::start();
    let config = Config::default().lock_watchdog_timeout(Duration::from_secs(3));
    let client = Client::connect(&s.url(), config).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let name = "seams:read-ended-drop";
    let rw = client.get_read_write_lock_with_owner(name, Owner::new());
    let writer = rw.write_lock().lock().await.unwrap();
    let ended = rw
        .read_lock()
        .lock_with_lease(Duration::from_millis(150))
        .await
        .unwrap();
    let second = rw
        .read_lock()
        .lock_with_lease(Duration::from_millis(1500))
        .await
        .unwrap();
    let field = second.owner_field().to_string();
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(ended);
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            client.stats().background_releases == 0
        })
        .await
    );
    assert_eq!(second.state(), HoldState::Held);
    let mut longest = -2;
    for k in 1..=2 {
        longest = longest.max(
            admin
                .pttl(&format!("{{{name}}}:{field}:rwlock_timeout:{k}"))
                .await,
        );
    }
    let answered = Instant::now();
    assert!(
        longest > 0 && answered + Duration::from_millis(longest as u64) >= second.valid_until(),
        "the second read hold keeps a timeout key lasting its deadline (longest pttl {longest})"
    );
    assert_eq!(second.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    assert_eq!(writer.unlock().await.unwrap(), UnlockOutcome::Released);
}

/// Two waiting acquisitions of one owner of a fair lock share one place in its queue and one
/// channel. When another client's release lets the first in, the second gets through too (a
/// re-entry), and once both are released the lock is free. Before, the second slept on the
/// shared channel, which nothing published to any more, until the TTL it last read ran out
/// (found by the explorer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_waiting_acquisitions_of_one_owner_of_a_fair_lock_both_get_through() {
    let s = RedisServer::start();
    let config = Config::default().lock_watchdog_timeout(Duration::from_secs(20));
    let holder = Client::connect(&s.url(), config.clone()).await.unwrap();
    let client = Client::connect(&s.url(), config).await.unwrap();
    let name = "seams:fair-owner";
    let held = holder.get_fair_lock(name).lock().await.unwrap();
    let lock = Arc::new(client.get_fair_lock_with_owner(name, Owner::new()));
    let (a, b) = (lock.clone(), lock.clone());
    let first = tokio::spawn(async move { a.try_lock_for(Duration::from_secs(15)).await });
    let waiting = |n: usize| {
        let client = client.clone();
        async move {
            common::eventually(Duration::from_secs(5), || async {
                client.stats().waiters == n
            })
            .await
        }
    };
    assert!(waiting(1).await, "the first waits on its channel");
    let second = tokio::spawn(async move { b.try_lock_for(Duration::from_secs(15)).await });
    assert!(waiting(2).await, "the second waits on the same channel");
    let start = Instant::now();
    held.unlock().await.unwrap();
    let first = tokio::time::timeout(Duration::from_secs(5), first)
        .await
        .expect("the first gets through at once")
        .unwrap()
        .unwrap()
        .expect("acquired");
    first.unlock().await.unwrap();
    let second = tokio::time::timeout(Duration::from_secs(5), second)
        .await
        .expect("the second gets through, not after the 20 s TTL")
        .unwrap()
        .unwrap()
        .expect("acquired");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(second.unlock().await.unwrap(), UnlockOutcome::Released);
    assert!(holder
        .get_fair_lock(name)
        .try_lock()
        .await
        .unwrap()
        .is_some());
}

/// The same through a connection whose replies take 20 ms: the owner's holds are released one
/// call after another, and between two calls the key must not run out (before, each
/// intermediate call set a 1 ms TTL: the key vanished before the last call, which found nothing
/// and announced nothing, and the other client's waiter slept on; found by the explorer).
#[tokio::test]
async fn a_partial_release_of_ended_parts_over_a_slow_connection_still_wakes_other_clients() {
    let s = RedisServer::start();
    let proxy = Proxy::start(s.port()).await;
    let a = Client::connect(&proxy.url(), Config::default())
        .await
        .unwrap();
    let b = Client::connect(&s.url(), Config::default()).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let name = "seams:ended-slow";
    let lock = a.get_lock_with_owner(name, Owner::new());
    let renewed = lock.lock().await.unwrap();
    let mut leased = Vec::new();
    for _ in 0..2 {
        leased.push(
            lock.lock_with_lease(Duration::from_millis(300))
                .await
                .unwrap(),
        );
    }
    let theirs = b.get_lock_with_owner(name, Owner::new());
    let waiter = tokio::spawn(async move {
        let g = theirs.lock().await.unwrap();
        (Instant::now(), g)
    });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            admin
                .numsub(&format!("redisson_lock__channel:{{{name}}}"))
                .await
                == 1
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    proxy.set_latency(Direction::Downstream, Duration::from_millis(20));
    let released = Instant::now();
    assert_eq!(renewed.unlock().await.unwrap(), UnlockOutcome::Released);
    let (acquired, g) = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the waiter acquired")
        .unwrap();
    assert!(
        acquired - released < Duration::from_secs(2),
        "woken {:?} after the release",
        acquired - released
    );
    g.unlock().await.unwrap();
}

/// A waiter that got the lock through its client's wait line, and whose lease then ran out,
/// leaves no wait line behind when its guard finds nothing to release. Before, the line counted
/// the hold as a local holder for ever (a release that sent nothing never told it; found by the
/// explorer).
#[tokio::test]
async fn a_hold_that_ran_out_leaves_no_wait_line_behind() {
    let s = RedisServer::start();
    let a = Client::connect(&s.url(), Config::default()).await.unwrap();
    let b = Client::connect(&s.url(), Config::default()).await.unwrap();
    let name = "seams:line-left";
    let first = a
        .get_lock_with_owner(name, Owner::new())
        .lock_with_lease(Duration::from_millis(400))
        .await
        .unwrap();
    let waited = b
        .get_lock_with_owner(name, Owner::new())
        .lock_with_lease(Duration::from_millis(300))
        .await
        .unwrap();
    drop(first);
    // Its lease ends, and the client's ledger forgets the hold at a sweep (every second).
    tokio::time::sleep(Duration::from_millis(2300)).await;
    assert_eq!(waited.state(), HoldState::Lost);
    assert!(waited.unlock().await.is_err(), "nothing left to release");
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            b.stats().wait_lines == 0
        })
        .await,
        "wait lines left: {:?}",
        b.stats()
    );
}

/// A handle's unlock (the Java style) releases a kept hold of its owner before one a guard
/// still follows: the guard stays `Held` and its hold stays on the server. Before, it let go
/// of the guard's renewed part; the kept part left had a lease that had ended, so the whole
/// hold was released and the guard, whose owner never unlocked it, was told `Lost` (found by
/// the explorer, with the guard's acquisition racing the unlock).
#[tokio::test]
async fn a_handles_unlock_releases_a_kept_hold_before_a_guarded_one() {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let name = "seams:kept-first";
    let lock = client.get_lock_with_owner(name, Owner::new());
    let guarded = lock.lock().await.unwrap();
    lock.lock_with_lease(Duration::from_millis(200))
        .await
        .unwrap()
        .keep();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(lock.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    assert_eq!(guarded.state(), HoldState::Held);
    assert_eq!(
        admin
            .hgetall(name)
            .await
            .get(guarded.owner_field())
            .map(String::as_str),
        Some("1")
    );
    key_outlives(&admin, name, guarded.valid_until(), "the guarded hold").await;
    assert_eq!(guarded.unlock().await.unwrap(), UnlockOutcome::Released);
}

/// A handle's unlock that leaves its owner nothing in Redis tells the guards of the hold it
/// released: here the only hold is a guard's (the kept hold the caller meant was deleted), and
/// the guard is told `Lost` at once. Before, the guard said `Held` with nothing behind it until
/// its lease ran out (found by the explorer, with a `DEL` of the kept hold).
#[tokio::test]
async fn a_handles_unlock_that_frees_the_lock_tells_the_guards_it_released() {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let name = "seams:handle-frees";
    let lock = client.get_lock_with_owner(name, Owner::new());
    lock.lock().await.unwrap().keep();
    admin.cmd("DEL", vec![name.into()]).await.unwrap();
    let guarded = lock.lock_with_lease(Duration::from_secs(5)).await.unwrap();
    assert_eq!(lock.unlock().await.unwrap(), UnlockOutcome::Released);
    assert!(!admin.exists(name).await);
    assert_eq!(guarded.state(), HoldState::Lost);
    assert!(guarded.unlock().await.is_err(), "nothing left to release");
}
