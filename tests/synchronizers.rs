//! Semaphores and count-down latches (sync protocol §2–4): the exact keys, values, TTLs and
//! messages of each operation, step by step, on a standalone server and the shared cluster in
//! every sharded mode; waiters woken by the message that lets them through; the `Both` bridge
//! between Redisson generations on a cluster; a seeded random sequence over three clients.

use common::backend_tests;
use redisson_lock_test_kit as common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Admin, Backend, Recorder};
use fred::types::Value;
use redisson_lock::{Error, ErrorKind, PermitId};
use tokio::time::Instant;

/// Messages and their absence are judged over this quiet spell.
const QUIET: Duration = Duration::from_millis(150);
/// A waiter woken by the message, not by its fallback bound (the wake-up latency itself is the
/// bench's to measure).
const WAKE: Duration = common::WOKEN_BY_MESSAGE;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The Java style: permits taken stay taken (given back by count later); `true` when taken.
trait Kept {
    fn kept(self) -> bool;
}

impl Kept for Option<redisson_lock::SemaphorePermits> {
    fn kept(self) -> bool {
        self.map(redisson_lock::SemaphorePermits::forget).is_some()
    }
}

impl Kept for Option<redisson_lock::blocking::SemaphorePermits> {
    fn kept(self) -> bool {
        self.map(redisson_lock::blocking::SemaphorePermits::forget)
            .is_some()
    }
}

async fn get(admin: &Admin, key: &str) -> Option<String> {
    admin
        .cmd("GET", vec![key.into()])
        .await
        .unwrap()
        .as_string()
}

/// Members (raw bytes) and scores of a sorted set.
async fn zset(admin: &Admin, key: &str) -> Vec<(Vec<u8>, i64)> {
    let v = admin
        .cmd(
            "ZRANGE",
            vec![key.into(), 0.into(), (-1).into(), "WITHSCORES".into()],
        )
        .await
        .unwrap()
        .into_array();
    v.chunks(2)
        .map(|p| {
            let member = p[0].as_bytes().unwrap().to_vec();
            let score = p[1].as_string().unwrap().parse::<f64>().unwrap() as i64;
            (member, score)
        })
        .collect()
}

fn msgs(channel: &str, values: &[&str]) -> Vec<(String, String)> {
    values
        .iter()
        .map(|v| (channel.to_owned(), (*v).to_owned()))
        .collect()
}

async fn heard(rec: &mut Recorder) -> Vec<(String, String)> {
    rec.drain(QUIET).await
}

async fn semaphore_wire_state(b: Backend) {
    let name = b.name("wire-sem");
    let channel = format!("redisson_sc:{{{name}}}");
    let client = b.client().await;
    let admin = b.admin().await;
    let mut rec = b.recorder(&[&channel]).await;
    let sem = client.get_semaphore(&name);
    assert_eq!(sem.name(), name);

    // SEM-SET: the string N = "2", no TTL, the permits announced.
    assert!(sem.try_set_permits(2).await.unwrap());
    assert_eq!(admin.type_of(&name).await, "string");
    assert_eq!(get(&admin, &name).await.as_deref(), Some("2"));
    assert_eq!(admin.pttl(&name).await, -1);
    assert_eq!(heard(&mut rec).await, msgs(&channel, &["2"]));
    // Existing: nothing changes, nothing is announced.
    assert!(!sem.try_set_permits(9).await.unwrap());
    assert_eq!(get(&admin, &name).await.as_deref(), Some("2"));
    assert!(heard(&mut rec).await.is_empty());

    // SEM-ACQ: DECRBY, never a message; too many: nothing changes.
    assert!(sem.try_acquire(1).await.unwrap().kept());
    assert_eq!(get(&admin, &name).await.as_deref(), Some("1"));
    assert!(!sem.try_acquire(2).await.unwrap().kept());
    assert!(!sem
        .try_acquire_for(2, Duration::from_millis(50))
        .await
        .unwrap()
        .kept());
    assert_eq!(get(&admin, &name).await.as_deref(), Some("1"));
    assert!(
        sem.try_acquire(0).await.unwrap().kept(),
        "zero permits: no call"
    );
    assert!(heard(&mut rec).await.is_empty());

    // SEM-REL: INCRBY, the new count announced (not the number released).
    sem.release(1).await.unwrap();
    assert_eq!(get(&admin, &name).await.as_deref(), Some("2"));
    assert_eq!(heard(&mut rec).await, msgs(&channel, &["2"]));
    assert_eq!(sem.available_permits().await.unwrap(), 2);

    // SEM-DRAIN: the old value, N = "0", no message.
    assert_eq!(sem.drain_permits().await.unwrap(), 2);
    assert_eq!(get(&admin, &name).await.as_deref(), Some("0"));
    assert!(heard(&mut rec).await.is_empty());

    // SEM-ADD: the new count announced, whatever its sign.
    sem.add_permits(3).await.unwrap();
    assert_eq!(get(&admin, &name).await.as_deref(), Some("3"));
    sem.add_permits(-4).await.unwrap();
    assert_eq!(get(&admin, &name).await.as_deref(), Some("-1"));
    assert_eq!(sem.available_permits().await.unwrap(), -1);
    assert_eq!(heard(&mut rec).await, msgs(&channel, &["3", "-1"]));

    // delete: plain DEL, no message.
    assert!(sem.delete().await.unwrap());
    assert!(!admin.exists(&name).await);
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    assert!(
        !sem.try_acquire(1).await.unwrap().kept(),
        "absent: no permits"
    );
    assert!(!admin.exists(&name).await, "an acquisition never creates N");
    assert!(heard(&mut rec).await.is_empty());

    // SEM-SET-TTL: SET PX; a release keeps the TTL, a drain drops it.
    assert!(sem
        .try_set_permits_with_ttl(5, Duration::from_secs(10))
        .await
        .unwrap());
    let ttl = admin.pttl(&name).await;
    assert!((9_000..=10_000).contains(&ttl), "ttl {ttl}");
    sem.release(1).await.unwrap();
    assert!(admin.pttl(&name).await > 9_000, "INCRBY keeps the TTL");
    assert_eq!(heard(&mut rec).await, msgs(&channel, &["5", "6"]));
    assert_eq!(sem.drain_permits().await.unwrap(), 6);
    assert_eq!(admin.pttl(&name).await, -1, "SET drops the TTL");
    assert_eq!(
        sem.try_set_permits_with_ttl(1, Duration::ZERO)
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    client.shutdown().await;
}

async fn permit_semaphore_wire_state(b: Backend) {
    let name = b.name("wire-psem");
    let channel = format!("redisson_sc:{{{name}}}");
    let timeouts = format!("{{{name}}}:timeout");
    let client = b.client().await;
    let admin = b.admin().await;
    let mut rec = b.recorder(&[&channel]).await;
    let sem = client.get_permit_expirable_semaphore(&name);
    assert_eq!(sem.timeouts_key(), timeouts);

    assert!(sem.try_set_permits(2).await.unwrap());
    assert_eq!(get(&admin, &name).await.as_deref(), Some("2"));
    assert_eq!(heard(&mut rec).await, msgs(&channel, &["2"]));

    // PS-ACQ with a lease: N - 1, the raw 16-byte id scored with now + lease, no message.
    let before = now_ms();
    let leased = sem
        .try_acquire(Some(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("a permit is free");
    let after = now_ms();
    assert_eq!(get(&admin, &name).await.as_deref(), Some("1"));
    assert_eq!(admin.type_of(&timeouts).await, "zset");
    let set = zset(&admin, &timeouts).await;
    assert_eq!(set.len(), 1);
    assert_eq!(set[0].0, leased.id().as_bytes().to_vec(), "16 raw bytes");
    assert!(
        (before + 10_000..=after + 10_000).contains(&set[0].1),
        "score {} not now + lease",
        set[0].1
    );
    assert_eq!(leased.id().to_string().len(), 32);

    // Without a lease from a handle without the watchdog (Java's acquire()): the sentinel.
    let forever = sem.clone().without_watchdog().acquire(None).await.unwrap();
    assert_eq!(get(&admin, &name).await.as_deref(), Some("0"));
    let set = zset(&admin, &timeouts).await;
    assert!(set
        .iter()
        .any(|(m, s)| *m == forever.id().as_bytes().to_vec() && *s == 922_337_203_685_477));
    assert!(sem.try_acquire(None).await.unwrap().is_none());
    assert!(sem
        .try_acquire_for(Duration::from_millis(50), None)
        .await
        .unwrap()
        .is_none());
    assert!(heard(&mut rec).await.is_empty());

    // PS-REL by id: ZREM, INCRBY, the new count announced; a second release finds nothing.
    let id = leased.keep();
    assert!(sem.try_release(id).await.unwrap());
    assert_eq!(get(&admin, &name).await.as_deref(), Some("1"));
    assert_eq!(zset(&admin, &timeouts).await.len(), 1);
    assert_eq!(heard(&mut rec).await, msgs(&channel, &["1"]));
    assert!(!sem.try_release(id).await.unwrap());
    let e = sem.release(id).await.unwrap_err();
    assert!(
        matches!(&e, Error::NotHeld { owner, .. } if *owner == id.to_string()),
        "{e:?}"
    );
    assert!(heard(&mut rec).await.is_empty());

    // An expired permit (its score moved into the past, as a lease running out does) is given
    // back by the next look and announced with the new count.
    let past = now_ms() - 1;
    admin
        .cmd(
            "ZADD",
            vec![
                timeouts.as_str().into(),
                "XX".into(),
                past.into(),
                Value::Bytes(forever.id().as_bytes().to_vec().into()),
            ],
        )
        .await
        .unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 2);
    assert!(zset(&admin, &timeouts).await.is_empty());
    assert_eq!(heard(&mut rec).await, msgs(&channel, &["2"]));
    // Its holder's release comes too late: given back already, so not held.
    assert!(!forever.release().await.unwrap());
    assert!(heard(&mut rec).await.is_empty());

    // A dropped guard releases its permit in the background.
    let dropped = sem.try_acquire(None).await.unwrap().unwrap();
    assert_eq!(get(&admin, &name).await.as_deref(), Some("1"));
    drop(dropped);
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            get(&admin, &name).await.as_deref() == Some("2")
        })
        .await
    );
    assert_eq!(heard(&mut rec).await, msgs(&channel, &["2"]));

    // PS-ADD: the new count written, the amount added announced (only when positive).
    sem.add_permits(3).await.unwrap();
    assert_eq!(get(&admin, &name).await.as_deref(), Some("5"));
    sem.add_permits(-1).await.unwrap();
    assert_eq!(get(&admin, &name).await.as_deref(), Some("4"));
    assert_eq!(heard(&mut rec).await, msgs(&channel, &["3"]));

    // N with a TTL: an acquisition gives the sorted set the same TTL.
    admin
        .cmd("PEXPIRE", vec![name.as_str().into(), 20_000.into()])
        .await
        .unwrap();
    let kept = sem.try_acquire(None).await.unwrap().unwrap().keep();
    let ttl = admin.pttl(&timeouts).await;
    assert!((19_000..=20_000).contains(&ttl), "timeouts ttl {ttl}");

    // An id printed by another process parses and releases.
    let parsed: PermitId = kept.to_string().parse().unwrap();
    sem.release(parsed).await.unwrap();
    assert!(sem.delete().await.unwrap());
    assert!(!admin.exists(&name).await && !admin.exists(&timeouts).await);
    client.shutdown().await;
}

async fn latch_wire_state(b: Backend) {
    let name = b.name("wire-cdl");
    let channel = format!("redisson_countdownlatch__channel__{{{name}}}");
    let client = b.client().await;
    let admin = b.admin().await;
    let mut rec = b.recorder(&[&channel]).await;
    let latch = client.get_count_down_latch(&name);

    // CDL-SET: N = "2" without TTL, "1" announced; an existing latch is left alone.
    assert!(latch.try_set_count(2).await.unwrap());
    assert_eq!(admin.type_of(&name).await, "string");
    assert_eq!(get(&admin, &name).await.as_deref(), Some("2"));
    assert_eq!(admin.pttl(&name).await, -1);
    assert_eq!(heard(&mut rec).await, msgs(&channel, &["1"]));
    assert!(!latch.try_set_count(5).await.unwrap());
    assert_eq!(latch.count().await.unwrap(), 2);
    assert!(heard(&mut rec).await.is_empty());

    // CDL-DOWN: DECR; only the step to exactly 0 deletes N and announces "0".
    latch.count_down().await.unwrap();
    assert_eq!(get(&admin, &name).await.as_deref(), Some("1"));
    assert!(heard(&mut rec).await.is_empty());
    latch.count_down().await.unwrap();
    assert!(!admin.exists(&name).await);
    assert_eq!(latch.count().await.unwrap(), 0);
    assert_eq!(heard(&mut rec).await, msgs(&channel, &["0"]));
    // An open latch: the -1 is deleted at once and nothing is announced.
    latch.count_down().await.unwrap();
    assert!(!admin.exists(&name).await);
    assert!(heard(&mut rec).await.is_empty());
    assert!(latch.wait_for(Duration::ZERO).await.unwrap());

    // CDL-DEL: "1" announced when it existed.
    assert!(latch.try_set_count(3).await.unwrap());
    assert!(latch.delete().await.unwrap());
    assert!(!admin.exists(&name).await);
    assert!(!latch.delete().await.unwrap());
    assert_eq!(heard(&mut rec).await, msgs(&channel, &["1", "1"]));
    assert_eq!(
        latch.try_set_count(0).await.unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    client.shutdown().await;
}

/// Three waiters of one client on an empty semaphore share one subscription; a release of 2
/// wakes two of them within the bound, the third stays until one more permit comes.
async fn semaphore_release_wakes_as_many_waiters_as_it_allows(b: Backend) {
    let name = b.name("wake-sem");
    let channel = format!("redisson_sc:{{{name}}}");
    let client = b.client().await;
    let other = b.client().await;
    let sem = client.get_semaphore(&name);
    assert!(sem.try_set_permits(0).await.unwrap());
    let (tx, mut acquired) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..3 {
        let (sem, tx) = (sem.clone(), tx.clone());
        tokio::spawn(async move {
            sem.acquire(1).await.unwrap().forget();
            let _ = tx.send(Instant::now());
        });
    }
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            client.stats().channels.get(&channel) == Some(&3)
        })
        .await,
        "three waiters on one channel"
    );
    assert_eq!(client.stats().subscribed_channels, 1);
    // The client counts a waiter on its channel before the subscription's barrier: the
    // server registers it a little later (under load, after the count above was seen).
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            b.subscribers(&channel).await >= 1
        })
        .await,
        "subscribed on the server"
    );
    assert_eq!(b.subscribers(&channel).await, 1, "one subscription");

    let released = Instant::now();
    other.get_semaphore(&name).release(2).await.unwrap();
    for _ in 0..2 {
        let at = tokio::time::timeout(Duration::from_secs(10), acquired.recv())
            .await
            .expect("woken by the release")
            .unwrap();
        let latency = at.saturating_duration_since(released);
        assert!(latency < WAKE, "woke {latency:?} after the release");
    }
    assert!(
        tokio::time::timeout(QUIET, acquired.recv()).await.is_err(),
        "a release of 2 lets exactly two waiters through"
    );
    assert_eq!(sem.available_permits().await.unwrap(), 0);
    let admin = b.admin().await;
    if !b.is_cluster() {
        // No busy loop: a waiter makes no call without a message. A message naming one
        // permit that is gone by then costs that one waiter one attempt.
        let before = admin.command_calls("evalsha").await;
        tokio::time::sleep(QUIET).await;
        assert_eq!(
            admin.command_calls("evalsha").await,
            before,
            "a quiet waiter polls"
        );
        admin.java_publish(&channel, "1").await;
        tokio::time::sleep(QUIET).await;
        assert_eq!(
            admin.command_calls("evalsha").await,
            before + 1,
            "one attempt per permit announced"
        );
    }
    // The third waits on; one more permit (a Java release: INCRBY + the new count) frees it.
    let v = admin
        .cmd("INCRBY", vec![name.as_str().into(), 1.into()])
        .await
        .unwrap()
        .as_i64()
        .unwrap();
    let released = Instant::now();
    admin.java_publish(&channel, &v.to_string()).await;
    let at = tokio::time::timeout(Duration::from_secs(10), acquired.recv())
        .await
        .expect("woken by the Java release")
        .unwrap();
    let latency = at.saturating_duration_since(released);
    assert!(latency < WAKE, "woke {latency:?} after the Java release");
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            client.stats().subscribed_channels == 0
        })
        .await,
        "the last waiter out unsubscribes"
    );
    client.shutdown().await;
    other.shutdown().await;
}

/// Waiters of a latch wake on the count-down that opens it; a wait with time left over ends
/// `false` at its deadline.
async fn latch_count_down_wakes_every_waiter(b: Backend) {
    let name = b.name("wake-cdl");
    let client = b.client().await;
    let other = b.client().await;
    let latch = client.get_count_down_latch(&name);
    assert!(latch.try_set_count(2).await.unwrap());
    let start = Instant::now();
    assert!(!latch.wait_for(Duration::from_millis(200)).await.unwrap());
    assert!(start.elapsed() >= Duration::from_millis(200));
    let waiters: Vec<_> = (0..4)
        .map(|i| {
            let latch = latch.clone();
            tokio::spawn(async move {
                if i % 2 == 0 {
                    latch.wait().await?;
                } else {
                    assert!(latch.wait_for(Duration::from_secs(20)).await?);
                }
                Ok::<_, Error>((Instant::now(), ()))
            })
        })
        .collect();
    let channel = format!("redisson_countdownlatch__channel__{{{name}}}");
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            client.stats().channels.get(&channel) == Some(&4)
        })
        .await
    );
    let remote = other.get_count_down_latch(&name);
    remote.count_down().await.unwrap();
    tokio::time::sleep(QUIET).await;
    assert!(waiters.iter().all(|w| !w.is_finished()), "count 1: closed");
    let opened = Instant::now();
    remote.count_down().await.unwrap();
    for w in waiters {
        common::woke_within(w, opened, WAKE).await;
    }
    client.shutdown().await;
    other.shutdown().await;
}

/// A permit acquired with a lease and never released is taken by a waiter of another client
/// soon after it expires (the waiter's bound is the expiry the failed attempt was told).
async fn expired_permit_is_reclaimed_by_a_waiter(b: Backend) {
    let name = b.name("reclaim-psem");
    let client = b.client().await;
    let other = b.client().await;
    let sem = client.get_permit_expirable_semaphore(&name);
    assert!(sem.try_set_permits(1).await.unwrap());
    let lease = Duration::from_millis(600);
    let taken = sem.try_acquire(Some(lease)).await.unwrap().unwrap().keep();
    let expires = Instant::now() + lease;
    let waiter = other.get_permit_expirable_semaphore(&name);
    let got = waiter
        .try_acquire_for(Duration::from_secs(10), None)
        .await
        .unwrap()
        .expect("the expired permit");
    let late = Instant::now().saturating_duration_since(expires);
    assert!(
        late < Duration::from_millis(500),
        "taken {late:?} after the expiry"
    );
    assert_ne!(got.id(), taken);
    assert!(
        !sem.try_release(taken).await.unwrap(),
        "expired and given back"
    );
    got.release().await.unwrap();
    client.shutdown().await;
    other.shutdown().await;
}

/// The permit watchdog on every deployment: permits without a lease of semaphores on every
/// master are renewed past their first lease (their scores move on, another client's looks
/// give nothing back), and the one released by its id elsewhere is lost at the next renewal
/// while the others stay held.
async fn watchdog_permits_are_renewed_and_a_released_one_is_lost(b: Backend) {
    let names = b.names_on_every_master("wd-psem", 1);
    let config = b
        .config()
        .lock_watchdog_timeout(Duration::from_millis(1500));
    let client = b.client_with(config.clone()).await;
    let other = b.client_with(config).await;
    let admin = b.admin().await;
    let mut permits = Vec::new();
    for name in &names {
        let sem = client.get_permit_expirable_semaphore(name);
        assert!(sem.try_set_permits(1).await.unwrap());
        let permit = sem.acquire(None).await.unwrap();
        let key = sem.timeouts_key().to_owned();
        let first = score(&admin, &key, permit.id()).await.unwrap();
        permits.push((name, key, permit, first));
    }
    assert!(
        common::eventually(Duration::from_secs(15), || async {
            let mut all = true;
            for (_, key, permit, first) in &permits {
                all &= score(&admin, key, permit.id())
                    .await
                    .is_some_and(|s| s > first + 1500);
            }
            all
        })
        .await,
        "every permit renewed a whole lease past its first"
    );
    for (name, _, permit, _) in &permits {
        let theirs = other.get_permit_expirable_semaphore(name);
        assert_eq!(theirs.available_permits().await.unwrap(), 0, "{name}");
        assert_eq!(permit.state(), redisson_lock::HoldState::Held);
    }
    let (name, _, released, _) = &permits[0];
    assert!(other
        .get_permit_expirable_semaphore(name)
        .try_release(released.id())
        .await
        .unwrap());
    tokio::time::timeout(Duration::from_secs(10), released.lost())
        .await
        .unwrap();
    assert_eq!(released.state(), redisson_lock::HoldState::Lost);
    for (_, _, permit, _) in &permits[1..] {
        assert_eq!(permit.state(), redisson_lock::HoldState::Held);
    }
    for (_, _, permit, _) in permits {
        drop(permit);
    }
    client.shutdown().await;
    other.shutdown().await;
}

/// The score of `id` in the sorted set `key`.
async fn score(admin: &Admin, key: &str, id: PermitId) -> Option<i64> {
    zset(admin, key)
        .await
        .into_iter()
        .find(|(m, _)| m == id.as_bytes())
        .map(|(_, s)| s)
}

backend_tests!(
    watchdog_permits_are_renewed_and_a_released_one_is_lost,
    semaphore_wire_state,
    permit_semaphore_wire_state,
    latch_wire_state,
    latch_count_down_wakes_every_waiter,
    expired_permit_is_reclaimed_by_a_waiter,
);

// A semaphore's release waking its waiters is about any deployment: also over TLS and
// through Sentinel.
backend_tests!(any: semaphore_release_wakes_as_many_waiters_as_it_allows);

/// On a cluster, Redisson 3.17 listens and publishes with `SUBSCRIBE`/`PUBLISH` and 3.22+ with
/// `SSUBSCRIBE`/`SPUBLISH`, deaf to each other, and their semaphore and latch waiters have no
/// time-based fallback. In `Both` the crate publishes in both namespaces (each generation's
/// waiters hear it) and listens in both (woken by either generation's message).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_mode_bridges_redisson_generations_for_semaphores_and_latches() {
    use redisson_lock::ShardedSubscriptionMode as Mode;
    let b = Backend::cluster(Mode::Both);
    let client = b.client().await;
    let sem_name = b.name("both-sem");
    let latch_name = b.name("both-cdl");
    let sem_channel = format!("redisson_sc:{{{sem_name}}}");
    let latch_channel = format!("redisson_countdownlatch__channel__{{{latch_name}}}");
    let channels = [sem_channel.as_str(), latch_channel.as_str()];
    let mut java_317 = Recorder::subscribe_in(&b.url(), &channels, false).await;
    let mut java_352 = Recorder::subscribe_in(&b.url(), &channels, true).await;

    let sem = client.get_semaphore(&sem_name);
    let latch = client.get_count_down_latch(&latch_name);
    assert!(sem.try_set_permits(0).await.unwrap());
    sem.release(1).await.unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    latch.count_down().await.unwrap();
    let mut expected = msgs(&sem_channel, &["0", "1"]);
    expected.extend(msgs(&latch_channel, &["1", "0"]));
    expected.sort();
    for rec in [&mut java_317, &mut java_352] {
        let mut got = heard(rec).await;
        got.sort();
        assert_eq!(got, expected);
    }
    assert_eq!(sem.drain_permits().await.unwrap(), 1);

    let mut admin = b.admin().await;
    for sharded_java in [false, true] {
        admin.sharded = sharded_java;
        // A semaphore waiter, woken by this generation's release (INCRBY + the new count).
        let waiter = {
            let sem = sem.clone();
            tokio::spawn(async move {
                sem.acquire(1).await?.forget();
                Ok::<_, Error>((Instant::now(), ()))
            })
        };
        assert!(
            common::eventually(Duration::from_secs(5), || async {
                client.stats().channels.get(&sem_channel) == Some(&1)
            })
            .await
        );
        let v = admin
            .cmd("INCRBY", vec![sem_name.as_str().into(), 1.into()])
            .await
            .unwrap()
            .as_i64()
            .unwrap();
        let released = Instant::now();
        admin.java_publish(&sem_channel, &v.to_string()).await;
        common::woke_within(waiter, released, WAKE).await;

        // A latch waiter, opened by this generation's count-down (DEL + "0").
        assert!(latch.try_set_count(1).await.unwrap());
        let waiter = {
            let latch = latch.clone();
            tokio::spawn(async move {
                latch.wait().await?;
                Ok::<_, Error>((Instant::now(), ()))
            })
        };
        assert!(
            common::eventually(Duration::from_secs(5), || async {
                client.stats().channels.get(&latch_channel) == Some(&1)
            })
            .await
        );
        admin
            .cmd("DEL", vec![latch_name.as_str().into()])
            .await
            .unwrap();
        let opened = Instant::now();
        admin.java_publish(&latch_channel, "0").await;
        common::woke_within(waiter, opened, WAKE).await;
    }
    client.shutdown().await;
}

/// A latch name with a hash tag puts the latch's channel (always `{N}`-braced) in another slot:
/// refused before anything is sent, as a typed error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latch_whose_channel_lands_in_another_slot_is_refused_on_a_cluster() {
    let b = Backend::cluster(redisson_lock::ShardedSubscriptionMode::Auto);
    let client = b.client().await;
    let name = format!("{{{}}}x", b.name("tagged"));
    let latch = client.get_count_down_latch(&name);
    let e = latch.try_set_count(1).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::CrossSlot, "{e:?}");
    assert_eq!(latch.count().await.unwrap(), 0, "a plain GET works");
    client.shutdown().await;
}

/// A small deterministic generator for the random sequences (xorshift64*).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) % n
    }
}

/// Seeded random sequences of acquire / release / expire over three clients: the permits of a
/// semaphore never exceed the set count and never go negative, and no permit is counted twice
/// (available + held = total after every step; a released or reclaimed permit id gives back
/// one permit, once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_sequences_over_three_clients_keep_the_permits_exact() {
    const TOTAL: i64 = 4;
    let b = Backend::standalone();
    let admin = b.admin().await;
    let clients = [b.client().await, b.client().await, b.client().await];
    for seed in [0x5eed_u64, 0xdead_beef, 42] {
        let mut rng = Rng(seed);
        let sem_name = format!("prop-sem-{seed}");
        let ps_name = format!("prop-psem-{seed}");
        let timeouts = format!("{{{ps_name}}}:timeout");
        assert!(clients[0]
            .get_semaphore(&sem_name)
            .try_set_permits(TOTAL as u64)
            .await
            .unwrap());
        assert!(clients[0]
            .get_permit_expirable_semaphore(&ps_name)
            .try_set_permits(TOTAL as u64)
            .await
            .unwrap());
        let mut held = [0i64; 3];
        let mut ids: [Vec<PermitId>; 3] = Default::default();
        let mut ever: std::collections::HashSet<PermitId> = Default::default();
        for step in 0..120 {
            let who = rng.below(3) as usize;
            let sem = clients[who].get_semaphore(&sem_name);
            let ps = clients[who].get_permit_expirable_semaphore(&ps_name);
            match rng.below(6) {
                0 => {
                    let k = 1 + rng.below(3) as i64;
                    if sem.try_acquire(k as u64).await.unwrap().kept() {
                        held[who] += k;
                    }
                }
                1 if held[who] > 0 => {
                    let k = 1 + rng.below(held[who] as u64) as i64;
                    sem.release(k as u64).await.unwrap();
                    held[who] -= k;
                }
                2 => {
                    let lease = match rng.below(3) {
                        0 => None,
                        n => Some(Duration::from_millis(30 * n)),
                    };
                    if let Some(g) = ps.try_acquire(lease).await.unwrap() {
                        assert!(ever.insert(g.id()), "an id handed out twice");
                        ids[who].push(g.keep());
                    }
                }
                3 if !ids[who].is_empty() => {
                    // Any client may release any id: a random client releases a random id.
                    let i = rng.below(ids[who].len() as u64) as usize;
                    let id = ids[who].swap_remove(i);
                    let releaser = &clients[rng.below(3) as usize];
                    let live = zset(&admin, &timeouts)
                        .await
                        .iter()
                        .any(|(m, _)| *m == id.as_bytes().to_vec());
                    let released = releaser
                        .get_permit_expirable_semaphore(&ps_name)
                        .try_release(id)
                        .await
                        .unwrap();
                    if !live {
                        assert!(
                            !released,
                            "seed {seed} step {step}: a reclaimed id released again"
                        );
                    }
                }
                4 => tokio::time::sleep(Duration::from_millis(40)).await, // leases expire
                _ => {}
            }
            // The semaphore: available + held = total, within [0, total].
            let available = sem.available_permits().await.unwrap();
            assert_eq!(
                available + held.iter().sum::<i64>(),
                TOTAL,
                "seed {seed} step {step}"
            );
            assert!((0..=TOTAL).contains(&available), "seed {seed} step {step}");
            // The permit-expirable one: available (after reclaiming) + acquired = total, each
            // acquired id one that some client holds.
            let available = ps.available_permits().await.unwrap();
            let acquired = zset(&admin, &timeouts).await;
            assert_eq!(
                available + acquired.len() as i64,
                TOTAL,
                "seed {seed} step {step}"
            );
            assert!((0..=TOTAL).contains(&available), "seed {seed} step {step}");
            for (member, _) in &acquired {
                let owners = ids
                    .iter()
                    .filter(|held| held.iter().any(|id| id.as_bytes().to_vec() == *member))
                    .count();
                assert_eq!(
                    owners, 1,
                    "seed {seed} step {step}: an acquired id nobody holds"
                );
            }
            // Ids reclaimed after their lease: no longer held by anyone.
            for held in ids.iter_mut() {
                held.retain(|id| acquired.iter().any(|(m, _)| *m == id.as_bytes().to_vec()));
            }
        }
    }
    // Concurrent: three clients, four tasks each, acquiring and releasing at once; at the end
    // every permit is back.
    let name = "prop-concurrent";
    assert!(clients[0]
        .get_semaphore(name)
        .try_set_permits(TOTAL as u64)
        .await
        .unwrap());
    let mut tasks = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        for t in 0..4u64 {
            let sem = client.get_semaphore(name);
            let admin_view = b.admin().await;
            tasks.push(tokio::spawn(async move {
                let mut rng = Rng(0x1234 + c as u64 * 16 + t);
                for _ in 0..15 {
                    let k = 1 + rng.below(2);
                    if sem
                        .try_acquire_for(k, Duration::from_secs(5))
                        .await
                        .unwrap()
                        .kept()
                    {
                        let now = get(&admin_view, "prop-concurrent")
                            .await
                            .unwrap()
                            .parse::<i64>()
                            .unwrap();
                        assert!((0..=TOTAL).contains(&now), "{now}");
                        sem.release(k).await.unwrap();
                    }
                }
            }));
        }
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        clients[1]
            .get_semaphore(name)
            .available_permits()
            .await
            .unwrap(),
        TOTAL
    );
    for c in clients {
        c.shutdown().await;
    }
}

/// Cancel safety: a waiter dropped while it waits leaves the channel and takes nothing; one
/// dropped while its attempt is in flight (held up by `CLIENT PAUSE WRITE`) has the attempt
/// finish in the background and give back what it took (announced with the new count).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_acquisition_leaves_nothing_behind() {
    let b = Backend::standalone();
    let client = b.client().await;
    let admin = b.admin().await;
    let sem = client.get_semaphore("cancel-sem");
    let channel = "redisson_sc:{cancel-sem}";
    assert!(sem.try_set_permits(0).await.unwrap());
    let waiter = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.acquire(1).await.map(|p| p.forget()) })
    };
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            client.stats().subscribed_channels == 1
        })
        .await
    );
    waiter.abort();
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            client.stats().subscribed_channels == 0
        })
        .await,
        "the dropped waiter left the channel"
    );
    // The client leaves its registry at once and the server with its UNSUBSCRIBE, sent after.
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            b.subscribers(channel).await == 0
        })
        .await,
        "and the server's channel"
    );

    sem.release(1).await.unwrap();
    let mut rec = b.recorder(&[channel]).await;
    admin
        .cmd("CLIENT", vec!["PAUSE".into(), 400.into(), "WRITE".into()])
        .await
        .unwrap();
    let attempt = {
        let sem = sem.clone();
        tokio::spawn(async move { sem.try_acquire(1).await.map(Kept::kept) })
    };
    // The attempt is sent and held up by the pause; the caller goes away meanwhile.
    tokio::time::sleep(Duration::from_millis(100)).await;
    attempt.abort();
    // The pause ends after 400 ms; then the attempt runs, and its permit comes back.
    let heard = rec.drain(Duration::from_millis(1_000)).await;
    assert!(
        heard.contains(&(channel.to_owned(), "1".to_owned())),
        "the permit taken after the caller left was given back and announced: {heard:?}"
    );
    assert_eq!(sem.available_permits().await.unwrap(), 1);

    // The same for a permit-expirable semaphore: the permit is released by its id.
    let ps = client.get_permit_expirable_semaphore("cancel-psem");
    assert!(ps.try_set_permits(1).await.unwrap());
    admin
        .cmd("CLIENT", vec!["PAUSE".into(), 400.into(), "WRITE".into()])
        .await
        .unwrap();
    let attempt = {
        let ps = ps.clone();
        tokio::spawn(async move { ps.try_acquire(None).await.map(|g| g.map(|g| g.keep())) })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    attempt.abort();
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            zset(&admin, "{cancel-psem}:timeout").await.is_empty()
                && get(&admin, "cancel-psem").await.as_deref() == Some("1")
        })
        .await,
        "the permit taken after the caller left was released"
    );
    client.shutdown().await;
}

/// The highest client id on the server and whether a connection newer than `after` is
/// subscribed to something: `CLIENT LIST` (ids only grow).
async fn clients(admin: &Admin, after: u64) -> (u64, bool) {
    let list = admin
        .cmd("CLIENT", vec!["LIST".into()])
        .await
        .unwrap()
        .as_string()
        .unwrap_or_default();
    let field = |line: &str, name: &str| -> u64 {
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let max = list.lines().map(|l| field(l, "id=")).max().unwrap_or(0);
    let subscribed = list
        .lines()
        .any(|l| field(l, "id=") > after && field(l, "sub=") + field(l, "ssub=") > 0);
    (max, subscribed)
}

/// After `proxy.reset()`: waits until the client is subscribed again on a connection opened
/// after the reset (the old one's subscription does not count).
async fn resubscribed(admin: &Admin, before_reset: u64) {
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            clients(admin, before_reset).await.1
        })
        .await,
        "the client subscribed again on a new connection after the reset"
    );
}

/// A latch wait and a permit wait go on after a reply is lost with its connection (the next
/// attempt runs once the client reconnects), and end when the count-down or the release
/// comes; a semaphore attempt is the one not repeated (its permits are anonymous).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waits_go_on_after_a_lost_reply_and_a_reset_connection() {
    use common::proxy::Proxy;
    let s = common::RedisServer::start();
    let proxy = Proxy::start(s.port()).await;
    let config = redisson_lock::Config::default()
        .timeout(Duration::from_millis(500))
        .retry_delay(Duration::from_millis(100));
    let client = redisson_lock::Client::connect(&proxy.url(), config)
        .await
        .unwrap();
    let direct = redisson_lock::Client::connect(&s.url(), redisson_lock::Config::default())
        .await
        .unwrap();
    let admin = Admin::connect(&s.url()).await;
    let subscribed = |n: usize| {
        let client = client.clone();
        async move {
            assert!(
                common::eventually(Duration::from_secs(10), || async {
                    client.stats().subscribed_channels == n
                })
                .await
            )
        }
    };

    // The latch: a spurious "0" makes the waiter read the count; that reply is lost.
    let name = "fault-cdl";
    assert!(direct
        .get_count_down_latch(name)
        .try_set_count(1)
        .await
        .unwrap());
    let waiter = {
        let latch = client.get_count_down_latch(name);
        tokio::spawn(async move { latch.wait_for(Duration::from_secs(30)).await })
    };
    subscribed(1).await;
    let dropped = proxy.drop_next_reply_matching(|d| d.starts_with(b"$1\r\n1\r\n"));
    admin
        .java_publish("redisson_countdownlatch__channel__{fault-cdl}", "0")
        .await;
    assert!(dropped.wait_caught(Duration::from_secs(10)).await.is_some());
    let before_reset = clients(&admin, 0).await.0;
    proxy.reset();
    resubscribed(&admin, before_reset).await;
    assert!(!waiter.is_finished(), "the wait goes on after the failure");
    subscribed(1).await;
    direct
        .get_count_down_latch(name)
        .count_down()
        .await
        .unwrap();
    let opened = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("opened by the count-down")
        .unwrap();
    assert!(opened.unwrap());

    // The permit-expirable semaphore: the busy attempt's reply (nil) is lost.
    let name = "fault-psem";
    assert!(direct
        .get_permit_expirable_semaphore(name)
        .try_set_permits(0)
        .await
        .unwrap());
    let waiter = {
        let ps = client.get_permit_expirable_semaphore(name);
        tokio::spawn(async move {
            ps.try_acquire_for(Duration::from_secs(30), None)
                .await
                .map(|g| g.map(|g| g.keep()))
        })
    };
    subscribed(1).await;
    let dropped =
        proxy.drop_next_reply_matching(|d| d.starts_with(b"$-1\r\n") || d.starts_with(b"_\r\n"));
    admin.java_publish("redisson_sc:{fault-psem}", "1").await;
    assert!(dropped.wait_caught(Duration::from_secs(10)).await.is_some());
    let before_reset = clients(&admin, 0).await.0;
    proxy.reset();
    resubscribed(&admin, before_reset).await;
    assert!(!waiter.is_finished(), "the wait goes on after the failure");
    subscribed(1).await;
    direct.get_semaphore(name).release(1).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken by the release")
        .unwrap()
        .unwrap();
    assert!(got.is_some(), "the released permit");
    assert_eq!(
        direct
            .get_permit_expirable_semaphore(name)
            .available_permits()
            .await
            .unwrap(),
        0,
        "one permit, taken once"
    );

    // The semaphore: the same failure ends the wait with the error.
    let name = "fault-sem";
    assert!(direct.get_semaphore(name).try_set_permits(0).await.unwrap());
    let waiter = {
        let sem = client.get_semaphore(name);
        tokio::spawn(async move {
            sem.try_acquire_for(1, Duration::from_secs(30))
                .await
                .map(Kept::kept)
        })
    };
    subscribed(1).await;
    let dropped = proxy.drop_next_reply_matching(|d| d.starts_with(b":0\r\n"));
    admin.java_publish("redisson_sc:{fault-sem}", "1").await;
    assert!(dropped.wait_caught(Duration::from_secs(10)).await.is_some());
    proxy.reset();
    let e = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("ended by the failure")
        .unwrap()
        .unwrap_err();
    assert!(e.is_transient(), "{e:?}");
    client.shutdown().await;
    direct.shutdown().await;
}

/// Issue 29, lesser defect: a permit-expirable semaphore waiter whose release message is lost
/// (here: a permit given back by hand, without the message) attempts again within the promised
/// bound, the watchdog timeout, not at the earliest permit's expiry (an hour here) or its own
/// deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permit_waiter_whose_message_is_lost_tries_again_within_the_watchdog_timeout() {
    let b = Backend::standalone();
    let name = "lost-message-psem";
    let bound = Duration::from_secs(1);
    let holder = b.client().await;
    let waiter = b.client_with(b.config().lock_watchdog_timeout(bound)).await;
    let admin = b.admin().await;
    let sem = holder.get_permit_expirable_semaphore(name);
    assert!(sem.try_set_permits(1).await.unwrap());
    let taken = sem
        .try_acquire(Some(Duration::from_secs(3600)))
        .await
        .unwrap()
        .unwrap()
        .keep();
    let wait = {
        let sem = waiter.get_permit_expirable_semaphore(name);
        tokio::spawn(async move { sem.try_acquire_for(Duration::from_secs(8), None).await })
    };
    let channel = format!("redisson_sc:{{{name}}}");
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            waiter.stats().channel_waiters(&channel) == 1
        })
        .await,
        "the waiter sleeps"
    );
    // The permit given back as PS-REL does, without its message.
    admin
        .cmd(
            "ZREM",
            vec![
                format!("{{{name}}}:timeout").into(),
                Value::Bytes(taken.as_bytes().to_vec().into()),
            ],
        )
        .await
        .unwrap();
    admin
        .cmd("INCRBY", vec![name.into(), 1.into()])
        .await
        .unwrap();
    let released = Instant::now();
    let got = tokio::time::timeout(Duration::from_secs(30), wait)
        .await
        .unwrap()
        .unwrap()
        .unwrap()
        .expect("the permit given back");
    let waited = released.elapsed();
    assert!(
        waited < bound + Duration::from_secs(2),
        "acquired {waited:?} after the silent release (bound {bound:?})"
    );
    got.release().await.unwrap();
}

/// The blocking semaphore (issue 41): a thread's acquire waits on an empty semaphore and is
/// woken by another thread's release (well before any fallback re-check), takes exactly that
/// permit, and the key in Redis holds the count at each step.
#[test]
fn blocking_semaphore_waiter_is_woken_by_another_threads_release() {
    use redisson_lock::blocking;
    let s = common::RedisServer::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let admin = rt.block_on(Admin::connect(&s.url()));
    let value = |key: &str| rt.block_on(get(&admin, key));
    let client = blocking::Client::connect(&s.url(), common::config()).unwrap();
    let sem = client.get_semaphore("bsem");
    assert_eq!(sem.name(), "bsem");
    assert!(sem.try_set_permits(1).unwrap());
    assert!(!sem.try_set_permits(5).unwrap(), "set only once");
    assert_eq!(value("bsem").as_deref(), Some("1"));
    sem.acquire(1).unwrap().forget();
    assert_eq!(value("bsem").as_deref(), Some("0"));
    assert!(!sem.try_acquire(1).unwrap().kept());
    assert!(!sem
        .try_acquire_for(1, Duration::from_millis(100))
        .unwrap()
        .kept());

    let waiter = {
        let sem = sem.clone();
        std::thread::spawn(move || {
            let got = sem
                .try_acquire_for(1, Duration::from_secs(20))
                .unwrap()
                .kept();
            (got, std::time::Instant::now())
        })
    };
    let channel = "redisson_sc:{bsem}";
    assert!(
        common::eventually_sync(Duration::from_secs(5), || {
            client.as_async().stats().channels.get(channel) == Some(&1)
        }),
        "the waiting thread listens on the semaphore's channel"
    );
    assert!(!waiter.is_finished(), "no permit: it waits");
    let releaser = {
        let sem = sem.clone();
        std::thread::spawn(move || {
            let at = std::time::Instant::now();
            sem.release(1).unwrap();
            at
        })
    };
    let released = releaser.join().unwrap();
    let (got, at) = waiter.join().unwrap();
    assert!(got, "the release let the waiter through");
    let latency = at.saturating_duration_since(released);
    assert!(latency < WAKE, "woke {latency:?} after the release");
    assert_eq!(sem.available_permits().unwrap(), 0, "the waiter took it");
    assert_eq!(value("bsem").as_deref(), Some("0"));

    sem.add_permits(3).unwrap();
    assert_eq!(sem.drain_permits().unwrap(), 3);
    assert_eq!(value("bsem").as_deref(), Some("0"));
    assert!(sem.delete().unwrap());
    assert_eq!(value("bsem"), None);
    assert!(sem
        .try_set_permits_with_ttl(2, Duration::from_secs(30))
        .unwrap());
    let ttl = rt.block_on(admin.pttl("bsem"));
    assert!(ttl > 25_000 && ttl <= 30_000, "{ttl}");
    client.shutdown();
}

/// The blocking count-down latch (issue 41): a thread's wait is opened by the count-downs of
/// another thread (not by the first one), and the latch's key is gone once open.
#[test]
fn blocking_latch_wait_is_opened_by_another_threads_count_down() {
    use redisson_lock::blocking;
    let s = common::RedisServer::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let admin = rt.block_on(Admin::connect(&s.url()));
    let client = blocking::Client::connect(&s.url(), common::config()).unwrap();
    let latch = client.get_count_down_latch("blatch");
    assert_eq!(latch.name(), "blatch");
    assert!(latch.try_set_count(2).unwrap());
    assert!(!latch.try_set_count(7).unwrap(), "set only once");
    assert_eq!(latch.count().unwrap(), 2);
    assert!(!latch.wait_for(Duration::ZERO).unwrap(), "closed");

    let (bounded, unbounded) = (latch.clone(), latch.clone());
    let waiters = [
        std::thread::spawn(move || {
            assert!(bounded.wait_for(Duration::from_secs(20)).unwrap());
            std::time::Instant::now()
        }),
        std::thread::spawn(move || {
            unbounded.wait().unwrap();
            std::time::Instant::now()
        }),
    ];
    let channel = "redisson_countdownlatch__channel__{blatch}";
    assert!(
        common::eventually_sync(Duration::from_secs(5), || {
            client.as_async().stats().channels.get(channel) == Some(&2)
        }),
        "both waiting threads listen on the latch's channel"
    );
    let counter = latch.clone();
    std::thread::spawn(move || counter.count_down().unwrap())
        .join()
        .unwrap();
    assert_eq!(latch.count().unwrap(), 1);
    assert_eq!(rt.block_on(get(&admin, "blatch")).as_deref(), Some("1"));
    assert!(
        waiters.iter().all(|w| !w.is_finished()),
        "count 1: still closed"
    );
    let counter = latch.clone();
    let opened = std::thread::spawn(move || {
        let at = std::time::Instant::now();
        counter.count_down().unwrap();
        at
    })
    .join()
    .unwrap();
    for w in waiters {
        let latency = w.join().unwrap().saturating_duration_since(opened);
        assert!(
            latency < WAKE,
            "opened {latency:?} after the last count-down"
        );
    }
    assert_eq!(latch.count().unwrap(), 0);
    assert!(
        !rt.block_on(admin.exists("blatch")),
        "an open latch has no key"
    );
    assert!(latch.wait_for(Duration::ZERO).unwrap());
    assert!(!latch.delete().unwrap(), "nothing left to delete");
    client.shutdown();
}
