//! Semaphores and count-down latches (sync protocol §2–4): the exact keys, values, TTLs and
//! messages of each operation, step by step, on a standalone server and the shared cluster in
//! every sharded mode; waiters woken by the message that lets them through; the `Both` bridge
//! between Redisson generations on a cluster; a seeded random sequence over three clients.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{Admin, Backend, Recorder};
use fred::types::Value;
use redisson_lock::{Error, ErrorKind, PermitId};
use tokio::time::Instant;

/// Messages and their absence are judged over this quiet spell.
const QUIET: Duration = Duration::from_millis(150);
/// A woken waiter must have finished within this of the message (the bound).
const WAKE: Duration = Duration::from_millis(300);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
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
    assert!(sem.try_acquire(1).await.unwrap());
    assert_eq!(get(&admin, &name).await.as_deref(), Some("1"));
    assert!(!sem.try_acquire(2).await.unwrap());
    assert!(!sem
        .try_acquire_for(2, Duration::from_millis(50))
        .await
        .unwrap());
    assert_eq!(get(&admin, &name).await.as_deref(), Some("1"));
    assert!(sem.try_acquire(0).await.unwrap(), "zero permits: no call");
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
    assert!(!sem.try_acquire(1).await.unwrap(), "absent: no permits");
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

    // Without a lease: the sentinel score.
    let forever = sem.acquire(None).await.unwrap();
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
            sem.acquire(1).await.unwrap();
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
    // The third waits on; one more permit (a Java release: INCRBY + the new count) frees it.
    let admin = b.admin().await;
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

backend_tests!(
    semaphore_wire_state,
    permit_semaphore_wire_state,
    latch_wire_state,
    semaphore_release_wakes_as_many_waiters_as_it_allows,
    latch_count_down_wakes_every_waiter,
    expired_permit_is_reclaimed_by_a_waiter,
);
