//! Group multi-lock (sync protocol §6): the wire state of every step (exact fields, values,
//! client-clock deadlines, TTLs, messages), all-or-none acquisition, owner-checked release
//! without partial writes, renewal of the whole set, waiters woken on the group's channel, and a
//! simulated Java holder. Standalone and every cluster mode.

use common::backend_tests;
use redisson_lock_test_kit as common;

use std::{collections::HashMap, time::Duration};

use common::{Admin, Backend};
use redisson_lock::{Config, ErrorKind, GroupLock, HoldState, UnlockOutcome};
use tokio::time::Instant;

fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

fn h(v: &str) -> String {
    GroupLock::value_field(v)
}

fn epoch_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The fields one owner's hold of `values` writes, deadlines left out (checked apart).
fn held_fields(owner: &str, values: &[(&str, u64)]) -> HashMap<String, String> {
    let mut m = HashMap::new();
    for (v, count) in values {
        m.insert(h(v), owner.to_owned());
        m.insert(format!("{}:{owner}:lock_count", h(v)), count.to_string());
    }
    m
}

/// Every field but the deadlines, and the deadlines apart.
async fn split(admin: &Admin, g: &str) -> (HashMap<String, String>, HashMap<String, i64>) {
    let mut fields = admin.hgetall(g).await;
    let deadlines = fields
        .iter()
        .filter(|(k, _)| k.ends_with(":expire_time"))
        .map(|(k, v)| (k.clone(), v.parse().unwrap()))
        .collect();
    fields.retain(|k, _| !k.ends_with(":expire_time"));
    (fields, deadlines)
}

fn assert_near(what: &str, got: i64, want: i64, slack: i64) {
    assert!((got - want).abs() <= slack, "{what}: {got} vs {want}");
}

async fn every_group_step_leaves_the_spec_state(b: Backend) {
    let g = b.name("group");
    let client = b.client().await;
    let admin = b.admin().await;
    let mut rec = b.recorder(&[&channel(&g)]).await;

    // A takes {a, b} in watchdog mode: per value, owner, deadline now + 30 s, count 1.
    let a = client.get_group_lock_with_owner(&g, ["a", "b", "a"], redisson_lock::Owner::new());
    let fa = a.owner_field().to_string();
    let before = epoch_ms();
    let ga = a.lock().await.unwrap();
    assert_eq!(admin.type_of(&g).await, "hash");
    let (fields, deadlines) = split(&admin, &g).await;
    assert_eq!(fields, held_fields(&fa, &[("a", 1), ("b", 1)]));
    assert_eq!(deadlines.len(), 2);
    for (k, d) in &deadlines {
        assert!(
            k == &format!("{}:{fa}:expire_time", h("a"))
                || k == &format!("{}:{fa}:expire_time", h("b"))
        );
        assert_near(k, *d, before + 30_000, 1_000);
    }
    let ttl = admin.pttl(&g).await;
    assert!((29_000..=30_000).contains(&ttl), "ttl {ttl}");
    assert!(rec.drain(Duration::from_millis(100)).await.is_empty());

    // B: {b, c} overlaps, so nothing of it is taken (all or none); {c} alone is free. A
    // shorter lease never lowers the hash's TTL.
    let b_bc = client.get_group_lock_with_owner(&g, ["b", "c"], redisson_lock::Owner::new());
    assert!(b_bc.try_lock().await.unwrap().is_none());
    assert_eq!(
        split(&admin, &g).await.0,
        held_fields(&fa, &[("a", 1), ("b", 1)])
    );
    let b_c = client.get_group_lock_with_owner(&g, ["c"], redisson_lock::Owner::new());
    let fb = b_c.owner_field().to_string();
    let gb = b_c
        .try_lock_with_lease(Duration::ZERO, Duration::from_secs(10))
        .await
        .unwrap()
        .expect("c is free");
    let (fields, deadlines) = split(&admin, &g).await;
    let mut want = held_fields(&fa, &[("a", 1), ("b", 1)]);
    want.extend(held_fields(&fb, &[("c", 1)]));
    assert_eq!(fields, want);
    assert_near(
        "c's deadline",
        deadlines[&format!("{}:{fb}:expire_time", h("c"))],
        epoch_ms() + 10_000,
        1_000,
    );
    assert!(admin.pttl(&g).await > 25_000, "the TTL is only raised");
    assert!(b_c.is_locked().await.unwrap() && b_bc.is_locked().await.unwrap());

    // A again: a re-entry, count 2 on each value.
    let ga2 = a.lock().await.unwrap();
    assert_eq!(split(&admin, &g).await.0, {
        let mut w = held_fields(&fa, &[("a", 2), ("b", 2)]);
        w.extend(held_fields(&fb, &[("c", 1)]));
        w
    });
    assert_eq!(a.hold_count().await.unwrap(), 2);
    assert!(a.is_held_by_current().await.unwrap());
    assert_eq!(b_bc.hold_count().await.unwrap(), 0);

    // Another owner's unlock: NotHeld, nothing changes, no message.
    let stranger = client.get_group_lock_with_owner(&g, ["a"], redisson_lock::Owner::new());
    assert_eq!(
        stranger.unlock().await.unwrap_err().kind(),
        ErrorKind::NotHeld
    );
    assert_eq!(a.hold_count().await.unwrap(), 2);
    assert!(rec.drain(Duration::from_millis(100)).await.is_empty());

    // A partial release: counts back to 1, and a "0" (every successful release publishes).
    assert_eq!(ga2.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    assert_eq!(split(&admin, &g).await.0, {
        let mut w = held_fields(&fa, &[("a", 1), ("b", 1)]);
        w.extend(held_fields(&fb, &[("c", 1)]));
        w
    });
    assert_eq!(
        rec.drain(Duration::from_millis(300)).await,
        vec![(channel(&g), "0".to_string())]
    );

    // A's full release: its fields go; B's stay; one "0".
    assert_eq!(ga.unlock().await.unwrap(), UnlockOutcome::Released);
    let (fields, _) = split(&admin, &g).await;
    assert_eq!(fields, held_fields(&fb, &[("c", 1)]));
    assert_eq!(
        rec.drain(Duration::from_millis(300)).await,
        vec![(channel(&g), "0".to_string())]
    );

    // Force unlock of {c}: B's fields go, "0"; the hash is gone with its last field.
    assert!(b_bc.force_unlock().await.unwrap());
    assert!(!admin.exists(&g).await);
    assert_eq!(
        rec.drain(Duration::from_millis(300)).await,
        vec![(channel(&g), "0".to_string())]
    );
    assert!(
        gb.is_lost(),
        "a force unlock in this client tells the holder"
    );
}

/// A waiter for {b} sleeps on the group's channel and is woken by the release of {a, b}.
async fn a_group_waiter_wakes_on_the_release(b: Backend) {
    let g = b.name("group-wait");
    let holder = b.client().await;
    let other = b.client().await;
    let ga = holder.get_group_lock(&g, ["a", "b"]).lock().await.unwrap();
    let waiter = other.get_group_lock(&g, ["b", "x"]);
    let task = tokio::spawn(async move {
        let got = waiter.try_lock_for(Duration::from_secs(20)).await?;
        Ok::<_, redisson_lock::Error>((Instant::now(), got))
    });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            b.subscribers(&channel(&g)).await > 0
        })
        .await
    );
    let released = Instant::now();
    ga.unlock().await.unwrap();
    let got = common::woke_within(task, released, common::WOKEN_BY_MESSAGE).await;
    got.expect("acquired").unlock().await.unwrap();
}

/// The watchdog renews the whole set: every value's deadline and the hash's TTL move on.
async fn the_watchdog_renews_every_value_of_the_set(b: Backend) {
    let g = b.name("group-wd");
    let client = b
        .client_with(
            b.config()
                .lock_watchdog_timeout(Duration::from_millis(1_500)),
        )
        .await;
    let admin = b.admin().await;
    let lock = client.get_group_lock(&g, ["a", "b"]);
    let guard = lock.lock().await.unwrap();
    let first = split(&admin, &g).await.1;
    assert_eq!(first.len(), 2);
    // Renewals (every 0.5 s) move every value's deadline on: wait (bounded) until each moved
    // by more than a renewal period; without renewals none ever does.
    let first_deadlines = &first;
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            let later = split(&admin, &g).await.1;
            first_deadlines
                .iter()
                .all(|(k, d)| later.get(k).is_some_and(|l| *l > *d + 500))
        })
        .await,
        "the deadlines did not move: {first:?} then {:?}",
        split(&admin, &g).await.1
    );
    assert!(admin.pttl(&g).await > 0);
    assert!(!guard.is_lost());
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    guard.unlock().await.unwrap();
    assert!(!admin.exists(&g).await);
}

/// A Java holder (raw fields, as Redisson writes them) blocks the crate, and its expiry
/// (deadline passed) lets the crate take the value over and clean the old owner's fields.
async fn a_simulated_java_holder_interoperates(b: Backend) {
    let g = b.name("group-java");
    let client = b.client().await;
    let admin = b.admin().await;
    let java = "7f1e8a3c-0000-4000-8000-000000000001:57";
    let ends = epoch_ms() + 1_000;
    admin
        .cmd(
            "HSET",
            vec![
                g.as_str().into(),
                h("a").into(),
                java.into(),
                format!("{}:{java}:expire_time", h("a")).into(),
                ends.to_string().into(),
                format!("{}:{java}:lock_count", h("a")).into(),
                "1".into(),
            ],
        )
        .await
        .unwrap();
    admin
        .cmd("PEXPIRE", vec![g.as_str().into(), 30_000.into()])
        .await
        .unwrap();
    let lock = client.get_group_lock(&g, ["a"]);
    assert!(lock.is_locked().await.unwrap());
    assert!(lock.try_lock().await.unwrap().is_none());
    // The waiter's sleep is bounded by the Java hold's deadline (no message ever comes).
    let started = Instant::now();
    let guard = lock
        .try_lock_for(Duration::from_secs(5))
        .await
        .unwrap()
        .expect("taken when the Java deadline passed");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let (fields, _) = split(&admin, &g).await;
    assert_eq!(fields, held_fields(&lock.owner_field(), &[("a", 1)]));
    guard.unlock().await.unwrap();
}

backend_tests!(
    both: every_group_step_leaves_the_spec_state,
    a_group_waiter_wakes_on_the_release,
    the_watchdog_renews_every_value_of_the_set,
    a_simulated_java_holder_interoperates,
);

#[tokio::test]
async fn an_empty_value_set_is_refused_before_anything_is_sent() {
    let server = common::RedisServer::start();
    let client = redisson_lock::Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let lock = client.get_group_lock("g", Vec::<String>::new());
    assert_eq!(
        lock.lock().await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        lock.is_locked().await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn the_blocking_facade_locks_a_group_per_thread() {
    let server = common::RedisServer::start();
    let client =
        redisson_lock::blocking::Client::connect(&server.url(), Config::default()).unwrap();
    let seats = client.get_group_lock("b-group", ["a", "b"]);
    let guard = seats.lock().unwrap();
    assert_eq!(seats.hold_count().unwrap(), 1);
    let (tried, tried_rx) = std::sync::mpsc::channel();
    let other = std::thread::scope(|s| {
        let t = s.spawn(|| {
            let lock = client.get_group_lock("b-group", ["b"]);
            let busy = lock.try_lock().unwrap().is_none();
            tried.send(()).unwrap();
            let got = lock
                .try_lock_for(Duration::from_secs(10))
                .unwrap()
                .is_some();
            (busy, got)
        });
        tried_rx.recv().unwrap();
        guard.unlock().unwrap();
        t.join().unwrap()
    });
    assert_eq!(other, (true, true));
}

// Issue 29, defect 3: one owner's sets of one group are holds of their own (renewal, state,
// unlock), whatever the order they were granted in. The scenario: owner `o` waits for `[b]`
// (held by another client) and meanwhile acquires `[a]` of the same group; `[b]` is granted
// later.

/// A 1.5 s watchdog (a renewal run every 500 ms).
fn short_watchdog() -> Config {
    Config::default().lock_watchdog_timeout(Duration::from_millis(1500))
}

/// `o`'s `[a]` (watchdog), and its `[b]` granted later (watchdog, waited for while another
/// client held `b`).
async fn two_sets_granted_in_turn(
    client: &redisson_lock::Client,
    other: &redisson_lock::Client,
    group: &str,
) -> (redisson_lock::GroupGuard, redisson_lock::GroupGuard) {
    let owner = redisson_lock::Owner::new();
    let theirs = other.get_group_lock(group, ["b"]).lock().await.unwrap();
    let b = client.get_group_lock_with_owner(group, ["b"], owner);
    let waiter = tokio::spawn(async move { b.lock().await });
    let ch = channel(group);
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            client.stats().channel_waiters(&ch) == 1
        })
        .await,
        "o waits for [b]"
    );
    let ga = client
        .get_group_lock_with_owner(group, ["a"], owner)
        .lock()
        .await
        .unwrap();
    theirs.unlock().await.unwrap();
    let gb = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("[b] granted")
        .unwrap()
        .unwrap();
    (ga, gb)
}

/// Waits for `n` more renewal runs of `client`.
async fn renewal_runs(client: &redisson_lock::Client, n: u64) {
    let from = client.stats().renewal_calls;
    assert!(
        common::eventually(Duration::from_secs(15), || async {
            client.stats().renewal_calls >= from + n
        })
        .await,
        "{n} renewal runs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_granted_after_another_set_of_its_owner_is_renewed_on_its_own() {
    let server = common::RedisServer::start();
    let url = server.url();
    let connect = || redisson_lock::Client::connect(&url, short_watchdog());
    let (client, other, third) = (
        connect().await.unwrap(),
        connect().await.unwrap(),
        connect().await.unwrap(),
    );
    let admin = Admin::connect(&server.url()).await;
    let (ga, gb) = two_sets_granted_in_turn(&client, &other, "g-later").await;
    // Past the 1.5 s deadlines `b` was granted with: only a renewal of `[b]` keeps it.
    renewal_runs(&client, 5).await;
    let stolen = third
        .get_group_lock("g-later", ["b"])
        .try_lock()
        .await
        .unwrap();
    assert!(
        stolen.is_none(),
        "another client took b while gb was renewed"
    );
    assert_eq!((ga.state(), gb.state()), (HoldState::Held, HoldState::Held));
    assert_eq!(client.stats().watchdog_holds, 2, "one renewed hold per set");
    // Each set's state is its own: b's fields deleted, gb is lost and ga is not.
    let owner = ga.owner_field().to_owned();
    admin
        .cmd(
            "HDEL",
            vec![
                "g-later".into(),
                h("b").into(),
                format!("{}:{owner}:expire_time", h("b")).into(),
                format!("{}:{owner}:lock_count", h("b")).into(),
            ],
        )
        .await
        .unwrap();
    renewal_runs(&client, 2).await;
    assert_eq!((ga.state(), gb.state()), (HoldState::Held, HoldState::Lost));
    assert_eq!(ga.unlock().await.unwrap(), UnlockOutcome::Released);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_earlier_set_released_first_leaves_the_later_set_held_and_its_own_to_release() {
    let server = common::RedisServer::start();
    let url = server.url();
    let connect = || redisson_lock::Client::connect(&url, short_watchdog());
    let (client, other) = (connect().await.unwrap(), connect().await.unwrap());
    let admin = Admin::connect(&server.url()).await;
    let (ga, gb) = two_sets_granted_in_turn(&client, &other, "g-first").await;
    assert_eq!(ga.unlock().await.unwrap(), UnlockOutcome::Released);
    let from = client.stats().renewal_calls;
    assert!(
        common::eventually(Duration::from_secs(15), || async {
            client.stats().renewal_calls >= from + 4 || gb.state() != HoldState::Held
        })
        .await
    );
    assert_eq!(gb.state(), HoldState::Held, "[b] after [a]'s release");
    assert_eq!(gb.unlock().await.unwrap(), UnlockOutcome::Released);
    assert!(
        !admin.exists("g-first").await,
        "[b]'s unlock released b: {:?}",
        admin.hgetall("g-first").await
    );
}

/// One owner, two sets of one group in watchdog mode, acquired one after the other: both are
/// renewed, and each unlock releases its own set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_renewed_sets_of_one_owner_are_each_renewed_and_released_on_their_own() {
    let server = common::RedisServer::start();
    let client = redisson_lock::Client::connect(&server.url(), short_watchdog())
        .await
        .unwrap();
    let admin = Admin::connect(&server.url()).await;
    let owner = redisson_lock::Owner::new();
    let ab = client.get_group_lock_with_owner("g2", ["a", "b"], owner);
    let c = client.get_group_lock_with_owner("g2", ["c"], owner);
    let g = ab.lock().await.unwrap();
    let again = ab.lock().await.unwrap();
    let gc = c
        .try_lock()
        .await
        .unwrap()
        .expect("a second set of the owner");
    let leased = c
        .try_lock_with_lease(Duration::ZERO, Duration::from_secs(5))
        .await
        .unwrap()
        .expect("a leased re-entry of [c]");
    renewal_runs(&client, 5).await;
    assert!(c.is_held_by_current().await.unwrap() && ab.is_held_by_current().await.unwrap());
    assert_eq!(
        [g.state(), again.state(), gc.state(), leased.state()],
        [HoldState::Held; 4]
    );
    assert_eq!(again.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    assert_eq!(g.unlock().await.unwrap(), UnlockOutcome::Released);
    assert!(!ab.is_locked().await.unwrap());
    assert_eq!(leased.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    assert_eq!(gc.unlock().await.unwrap(), UnlockOutcome::Released);
    assert!(!admin.exists("g2").await);
}
