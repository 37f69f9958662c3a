//! One key, holds of two lease modes: an owner's hold taken with and without a lease, a leased
//! reader beside a renewed writer or reader. The hold lives as long as its longest part, is
//! renewed while a part without a lease remains, and every guard's state follows the key in
//! Redis (issue 38, findings 1 and 2). Renewals only ever raise a TTL.

use common::backend_tests;
use redisson_lock_test_kit as common;

use std::time::Duration;

use common::{Admin, Backend};
use redisson_lock::{Client, HoldState, UnlockOutcome};

/// A client of `b` with a 1 s watchdog (renewals every 333 ms).
async fn client(b: &Backend) -> Client {
    b.client_with(b.config().lock_watchdog_timeout(Duration::from_secs(1)))
        .await
}

const LONG: Duration = Duration::from_secs(300);

/// Past several renewal periods of the 1 s watchdog and past one whole timeout.
async fn several_timeouts() {
    tokio::time::sleep(Duration::from_millis(2500)).await;
}

/// The key's TTL is at least `at_least_ms`.
async fn ttl_at_least(admin: &Admin, key: &str, at_least_ms: i64, what: &str) {
    let ttl = admin.pttl(key).await;
    assert!(ttl >= at_least_ms, "{what}: pttl {ttl} < {at_least_ms}");
}

/// Finding 1 as reported: the writer's renewals set the hash's TTL back to the watchdog
/// timeout under the same owner's 5-minute read hold, the downgrade kept it, the hash expired
/// and another client took the write lock while the reader's guard said `Held`.
async fn a_leased_read_hold_outlives_the_writers_renewals_and_the_downgrade(b: Backend) {
    let n = b.name("modes:downgrade");
    let (a, other, admin) = (client(&b).await, b.client().await, b.admin().await);
    let rw = a.get_read_write_lock(&n);
    let w = rw.write_lock().lock().await.unwrap();
    let r = rw.read_lock().lock_with_lease(LONG).await.unwrap();
    several_timeouts().await;
    ttl_at_least(&admin, &n, 290_000, "renewals of the writer").await;
    assert_eq!(w.unlock().await.unwrap(), UnlockOutcome::Released);
    assert_eq!(
        admin.hgetall(&n).await.get("mode").map(String::as_str),
        Some("read"),
        "downgraded"
    );
    several_timeouts().await;
    ttl_at_least(&admin, &n, 290_000, "after the downgrade").await;
    let theirs = other.get_read_write_lock(&n);
    assert!(
        theirs.write_lock().try_lock().await.unwrap().is_none(),
        "another client takes the write lock while the reader holds"
    );
    assert_eq!(r.state(), HoldState::Held);
    assert_eq!(r.unlock().await.unwrap(), UnlockOutcome::Released);
    assert!(!admin.exists(&n).await);
}

/// A leased reader beside a renewed reader of another client that dies (keeps its guard and
/// shuts down without releasing): the other client's renewals never lowered the hash's TTL, so
/// the hash lives on until the leased reader's lease.
async fn a_leased_reader_outlives_a_renewed_reader_of_a_client_that_dies(b: Backend) {
    let n = b.name("modes:readers");
    let (a, dying, admin) = (b.client().await, client(&b).await, b.admin().await);
    let r = a
        .get_read_write_lock(&n)
        .read_lock()
        .lock_with_lease(LONG)
        .await
        .unwrap();
    dying
        .get_read_write_lock(&n)
        .read_lock()
        .lock()
        .await
        .unwrap()
        .keep();
    several_timeouts().await;
    ttl_at_least(&admin, &n, 290_000, "the other reader's renewals").await;
    dying.shutdown().await;
    several_timeouts().await;
    let third = b.client().await;
    assert!(
        third
            .get_read_write_lock(&n)
            .write_lock()
            .try_lock()
            .await
            .unwrap()
            .is_none(),
        "the hash expired under the leased reader"
    );
    assert_eq!(r.state(), HoldState::Held);
    r.unlock().await.unwrap();
}

/// A watchdog hold re-entered with a longer lease whose renewals then stop without a release
/// (`max_renewals` reached): the key keeps the lease's TTL, and both guards say `Held` until
/// then, as the key does.
async fn a_longer_lease_on_a_renewed_hold_outlives_its_renewals(b: Backend) {
    let n = b.name("modes:capped");
    let capped = b
        .client_with(
            b.config()
                .lock_watchdog_timeout(Duration::from_secs(1))
                .max_renewals(Some(2)),
        )
        .await;
    let admin = b.admin().await;
    let lock = capped.get_lock(&n);
    let renewed = lock.lock().await.unwrap();
    let leased = lock.lock_with_lease(LONG).await.unwrap();
    several_timeouts().await;
    several_timeouts().await;
    ttl_at_least(&admin, &n, 290_000, "renewals stopped after two").await;
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    assert_eq!(
        renewed.state(),
        HoldState::Held,
        "the key holds for minutes"
    );
    assert_eq!(leased.state(), HoldState::Held);
    assert!(leased.valid_until() > tokio::time::Instant::now() + Duration::from_secs(290));
    leased.unlock().await.unwrap();
    renewed.unlock().await.unwrap();
    assert!(!admin.exists(&n).await);
}

/// Releasing the leased part of a mixed hold: what remains is the part without a lease, so the
/// TTL goes back to the watchdog timeout (a process that dies now frees the lock within one
/// timeout, not five minutes) and the watchdog keeps renewing it.
async fn releasing_the_leased_part_leaves_a_renewed_hold(b: Backend) {
    let n = b.name("modes:lease-out");
    let (c, admin) = (client(&b).await, b.admin().await);
    let lock = c.get_lock(&n);
    let renewed = lock.lock().await.unwrap();
    let leased = lock.lock_with_lease(LONG).await.unwrap();
    ttl_at_least(&admin, &n, 290_000, "the longer part").await;
    assert_eq!(leased.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    let ttl = admin.pttl(&n).await;
    assert!(
        (1..=1000).contains(&ttl),
        "only the renewed part remains: pttl {ttl}"
    );
    several_timeouts().await;
    assert!(admin.exists(&n).await, "renewed");
    assert_eq!(renewed.state(), HoldState::Held);
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert_eq!(renewed.unlock().await.unwrap(), UnlockOutcome::Released);
}

/// Releasing the renewed part of a mixed hold: the lease remains, the renewals stop, the key's
/// TTL is what is left of the lease and the leased guard says so.
async fn releasing_the_renewed_part_leaves_the_lease(b: Backend) {
    let n = b.name("modes:renewed-out");
    let (c, admin) = (client(&b).await, b.admin().await);
    let lock = c.get_lock(&n);
    let renewed = lock.lock().await.unwrap();
    let leased = lock.lock_with_lease(LONG).await.unwrap();
    assert_eq!(renewed.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    assert_eq!(c.stats().watchdog_holds, 0, "nothing left to renew");
    several_timeouts().await;
    ttl_at_least(&admin, &n, 290_000, "the lease's part").await;
    assert_eq!(leased.state(), HoldState::Held);
    let left = leased.valid_until() - tokio::time::Instant::now();
    assert!(
        left > Duration::from_secs(290) && left <= LONG,
        "the guard's deadline is the lease's: {left:?}"
    );
    assert_eq!(leased.unlock().await.unwrap(), UnlockOutcome::Released);
}

/// Finding 2 as reported: `lock()`, `lock_with_lease(5 min)`, then one Java-style `unlock()`
/// through the handle. The kept part (the leased one, whose guard was kept) goes first: the
/// guard that still follows its renewed part keeps it, renewed, for as long as it holds. (Before
/// issue 38 that guard turned `Lost` after one timeout while the owner held the lock for five
/// more minutes; until issue 49 the renewed part went first and the guard stood for the lease.)
async fn a_java_style_unlock_of_a_mixed_hold_releases_the_kept_part_first(b: Backend) {
    let n = b.name("modes:java-style");
    let (c, admin) = (client(&b).await, b.admin().await);
    let lock = c.get_lock(&n);
    let renewed = lock.lock().await.unwrap();
    lock.lock_with_lease(LONG).await.unwrap().keep();
    assert_eq!(lock.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    several_timeouts().await;
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert_eq!(
        renewed.state(),
        HoldState::Held,
        "the guard's renewed part is renewed"
    );
    let ttl = admin.pttl(&n).await;
    assert!(
        ttl > 0 && ttl <= 1_000,
        "the key follows the renewed part (the watchdog's 1 s), not the released lease: pttl {ttl}"
    );
    assert_eq!(renewed.unlock().await.unwrap(), UnlockOutcome::Released);
    assert!(!admin.exists(&n).await);
}

/// A re-entry with a shorter lease does not cut the longer part short.
async fn a_shorter_re_entry_does_not_shorten_the_hold(b: Backend) {
    let n = b.name("modes:shorter");
    let (c, admin) = (b.client().await, b.admin().await);
    let lock = c.get_lock(&n);
    let long = lock.lock_with_lease(LONG).await.unwrap();
    let short = lock.lock_with_lease(Duration::from_secs(1)).await.unwrap();
    ttl_at_least(&admin, &n, 290_000, "after the shorter re-entry").await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(long.state(), HoldState::Held);
    assert_eq!(short.state(), HoldState::Held, "the key still holds it");
    assert_eq!(short.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    ttl_at_least(&admin, &n, 290_000, "the longer part remains").await;
    assert_eq!(long.unlock().await.unwrap(), UnlockOutcome::Released);
}

/// Read holds of one owner with leases of different ends released first-in first-out: the
/// release deletes the newest timeout key, so the one left was the shorter lease's; the key's
/// TTL is set again to the longer part that remains, and the guard left says what the key does.
async fn a_read_hold_released_out_of_order_keeps_the_longer_lease(b: Backend) {
    let n = b.name("modes:read-fifo");
    let (c, admin) = (b.client().await, b.admin().await);
    let read = c.get_read_write_lock(&n);
    let read = read.read_lock();
    let first = read.lock_with_lease(Duration::from_secs(60)).await.unwrap();
    let second = read.lock_with_lease(LONG).await.unwrap();
    assert_eq!(first.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    ttl_at_least(&admin, &n, 290_000, "the longer read part remains").await;
    let timeout_key = format!("{{{n}}}:{}:rwlock_timeout:1", second.owner_field());
    let timeout_key = if n.contains('{') {
        format!("{n}:{}:rwlock_timeout:1", second.owner_field())
    } else {
        timeout_key
    };
    ttl_at_least(&admin, &timeout_key, 290_000, "the timeout key left").await;
    assert!(second.valid_until() > tokio::time::Instant::now() + Duration::from_secs(290));
    assert_eq!(second.unlock().await.unwrap(), UnlockOutcome::Released);
    assert!(!admin.exists(&n).await);
}

backend_tests!(
    a_leased_reader_outlives_a_renewed_reader_of_a_client_that_dies,
    a_longer_lease_on_a_renewed_hold_outlives_its_renewals,
    releasing_the_renewed_part_leaves_the_lease,
    a_shorter_re_entry_does_not_shorten_the_hold,
    a_read_hold_released_out_of_order_keeps_the_longer_lease,
);

backend_tests!(
    any: a_leased_read_hold_outlives_the_writers_renewals_and_the_downgrade,
    a_java_style_unlock_of_a_mixed_hold_releases_the_kept_part_first,
    releasing_the_leased_part_leaves_a_renewed_hold,
);
