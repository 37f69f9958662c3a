//! A stalled connection (one reply withheld, every later reply of that connection behind it):
//! the reconciliation of an ambiguous acquisition and the renewals of every other hold run on a
//! healthy connection (fault catalogue S10, S14), through the loopback proxy.

use redisson_lock_test_kit as common;

use std::time::Duration;

use common::{proxy::Proxy, Admin, RedisServer};
use redisson_lock::{Client, Config, Error, ErrorKind, HoldState, UnlockOutcome};
use tokio::time::Instant;

/// Bound of every wait on an event.
const T: Duration = Duration::from_secs(10);
const MS: Duration = Duration::from_millis(1);
/// How long the proxy withholds the reply.
const STALL: Duration = Duration::from_secs(2);

/// `true` for the nil reply (`$-1` in RESP2, `_` in RESP3) an acquire script gives on success.
fn nil_reply(data: &[u8]) -> bool {
    data.starts_with(b"$-1\r\n") || data.starts_with(b"_\r\n")
}

/// A 500 ms command timeout, a 3 s watchdog.
fn config() -> Config {
    common::config()
        .timeout(500 * MS)
        .retry_delay(100 * MS)
        .lock_watchdog_timeout(Duration::from_secs(3))
}

/// The acquire reply is withheld for 2 s behind a 500 ms command timeout: the call fails
/// `Ambiguous` at 0.5 s, and the hold the script made is undone on a healthy connection, so a
/// waiter of another client acquires within 700 ms of the error (not when the withheld reply
/// finally arrives).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ambiguous_acquisition_is_undone_without_waiting_for_the_stalled_reply() {
    let s = RedisServer::start();
    let proxy = Proxy::start(s.port()).await;
    let client = Client::connect(&proxy.url(), config()).await.unwrap();
    let other = Client::connect(&s.url(), config()).await.unwrap();
    let name = "stall-ambiguous";
    let lock = client.get_lock(name);

    let held = proxy.hold_next_reply_matching(nil_reply);
    let sent = Instant::now();
    let err = lock
        .try_lock_with_lease(Duration::ZERO, Duration::from_secs(30))
        .await
        .unwrap_err();
    let failed = Instant::now();
    assert_eq!(err.kind(), ErrorKind::Ambiguous, "{err}");
    assert!(held.is_caught());
    // Another client's waiter, blocked by the hold the withheld script made.
    let theirs = other.get_lock(name);
    let waiter = tokio::spawn(async move {
        let g = theirs.try_lock_for(T).await;
        (Instant::now(), g)
    });
    // The withheld reply arrives 2 s after the send (dropped with its connection if the
    // client has replaced it by then).
    let release = tokio::spawn(async move {
        tokio::time::sleep_until(sent + STALL).await;
        held.release();
    });

    let (at, g) = tokio::time::timeout(T, waiter).await.unwrap().unwrap();
    let g = g.unwrap().expect("the waiter acquires");
    let after = at.saturating_duration_since(failed);
    assert!(
        after < 700 * MS,
        "the other client acquired {after:?} after the Ambiguous error (withheld reply at 2 s)"
    );
    g.unlock().await.unwrap();
    release.await.unwrap();

    // The client works again, with the count it knows.
    let g = lock.try_lock().await.unwrap().expect("free");
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    g.unlock().await.unwrap();
}

/// Three holds by watchdog (3 s) and one connection stalled for 2 s (a reply withheld):
/// renewals go on through a healthy connection, their confirmations reach the client during
/// the stall (before the fix every renewal's reply waited behind the withheld one), and none of
/// the holds is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_connection_loses_no_other_hold() {
    let s = RedisServer::start();
    let admin = Admin::connect(&s.url()).await;
    let proxy = Proxy::start(s.port()).await;
    let client = Client::connect(&proxy.url(), config()).await.unwrap();
    let names = ["stall-a", "stall-b", "stall-c"];
    let mut guards = Vec::new();
    for n in names {
        guards.push(client.get_lock(n).lock().await.unwrap());
    }

    let held = proxy.hold_next_reply_matching(nil_reply);
    let sent = Instant::now();
    let err = client
        .get_lock("stall-d")
        .try_lock()
        .await
        .expect_err("the acquire reply is withheld");
    assert_eq!(err.kind(), ErrorKind::Ambiguous, "{err}");
    // Before the withheld reply arrives, a renewal sent after the stall began has been
    // confirmed for every hold: the client's own deadline moved past the first lease.
    tokio::time::sleep_until(sent + STALL - 100 * MS).await;
    for g in &guards {
        let confirmed = g.valid_until().saturating_duration_since(sent);
        assert!(
            confirmed > Duration::from_millis(3500),
            "{}: renewal confirmed only up to {confirmed:?} after the stall began",
            g.name()
        );
    }
    let mut lowest = i64::MAX;
    while sent.elapsed() < STALL + Duration::from_secs(2) {
        if sent.elapsed() >= STALL && held.is_caught() {
            held.release();
        }
        for n in names {
            lowest = lowest.min(admin.pttl(n).await);
        }
        tokio::time::sleep(100 * MS).await;
    }
    assert!(guards.iter().all(|g| !g.is_lost()), "no hold lost");
    assert!(
        lowest > 1500,
        "renewals went on during the stall (lowest PTTL {lowest} ms of a 3 s lease)"
    );
    for g in guards {
        g.unlock().await.unwrap();
    }
    for n in names {
        assert!(!admin.exists(n).await);
    }
}

/// A partial release whose reply is withheld past the command timeout may have run: it may
/// have re-armed the key's TTL to what the parts left need (here 2 s, the shorter lease left),
/// so the guard left lasts at most that long from the release's send, not until the released
/// part's 20 s lease (its deadline before). Otherwise it said `Held` up to 18 s after the key
/// expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_release_that_timed_out_shortens_the_guards_left_to_what_it_may_have_set() {
    let s = RedisServer::start();
    let admin = Admin::connect(&s.url()).await;
    let proxy = Proxy::start(s.port()).await;
    let client = Client::connect(&proxy.url(), config().retry_attempts(0))
        .await
        .unwrap();
    let name = "stall-partial-release";
    let lock = client.get_lock(name);
    let long = lock.lock_with_lease(Duration::from_secs(20)).await.unwrap();
    let short = lock.lock_with_lease(Duration::from_secs(2)).await.unwrap();
    assert!(short.valid_until() > Instant::now() + Duration::from_secs(15));

    // The partial release's reply (`0`: still held) is withheld past the 500 ms timeout.
    let held = proxy.hold_next_reply_matching(|d| d.starts_with(b":0\r\n"));
    let sent = Instant::now();
    let err = long.unlock().await.expect_err("the reply is withheld");
    assert!(err.is_transient(), "{err}");
    assert!(held.is_caught(), "the release reached the server");
    // It ran: the key's TTL is the 2 s left to the shorter lease, not the 20 s one.
    let ttl = admin.pttl(name).await;
    assert!((0..=2_000).contains(&ttl), "pttl {ttl} after the release");
    assert!(
        short.valid_until() <= sent + Duration::from_secs(2),
        "the guard left ends {:?} after the release was sent (the key's TTL: {ttl} ms)",
        short.valid_until() - sent
    );
    held.release();
    drop(short);
}

/// A partial release whose reply is withheld past the command timeout leaves the owner's count
/// unknown to the client; if the hold then goes (here `DEL` behind the client's back), the
/// owner's next acquisition finds a count of zero: the earlier holds are lost and their unlocks
/// release nothing of the new hold. Otherwise the outer guard stayed `Held` on the new hold's
/// field, and its unlock freed the lock under the new guard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_release_of_unknown_outcome_a_hold_found_gone_is_lost() {
    let s = RedisServer::start();
    let admin = Admin::connect(&s.url()).await;
    let proxy = Proxy::start(s.port()).await;
    // A 30 s watchdog: no renewal notices the loss during the test.
    let config = config()
        .retry_attempts(0)
        .lock_watchdog_timeout(Duration::from_secs(30));
    let client = Client::connect(&proxy.url(), config).await.unwrap();
    let other = Client::connect(&s.url(), common::config()).await.unwrap();
    let name = "stall-unknown-count";
    let lock = client.get_lock(name);
    let outer = lock.lock().await.unwrap();
    let inner = lock.lock().await.unwrap();
    let held = proxy.hold_next_reply_matching(|d| d.starts_with(b":0\r\n"));
    let err = inner.unlock().await.expect_err("the reply is withheld");
    assert!(err.is_transient(), "{err}");
    assert!(held.is_caught(), "the release reached the server");
    held.release();
    admin.cmd("DEL", vec![name.into()]).await.unwrap();
    let again = lock.lock().await.unwrap();
    assert_eq!(outer.state(), HoldState::Lost, "the outer hold is gone");
    assert_eq!(again.state(), HoldState::Held);
    let unlocked = outer.unlock().await;
    assert!(
        matches!(unlocked, Err(Error::NotHeld { .. })),
        "the stale guard's unlock: {unlocked:?}"
    );
    assert!(
        other.get_lock(name).try_lock().await.unwrap().is_none(),
        "the new hold is still on the server"
    );
    assert_eq!(again.unlock().await.unwrap(), UnlockOutcome::Released);
}
