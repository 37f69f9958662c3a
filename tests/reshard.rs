//! Live resharding on the 3+3 cluster: a lock whose slot is in its `ASK` phase (keys moved to
//! the target, the slot still `MIGRATING`/`IMPORTING`) for longer than a renewal period.

mod common;

use std::time::Duration;

use common::{cluster::RedisCluster, eventually, woke_within};
use redisson_lock::{Client, Config, Error};
use tokio::time::Instant;

const WITHIN: Duration = Duration::from_secs(10);

async fn client(c: &RedisCluster, config: Config) -> Client {
    let seeds = c.seed_urls();
    let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
    Client::connect_cluster(&seeds, config).await.unwrap()
}

/// The PTTL of `key` on `port`, read with `ASKING` (the key may sit in an importing slot).
fn pttl_asking(port: u16, key: &str) -> i64 {
    RedisCluster::cmd_asking(port, &["PTTL", key])
        .int()
        .unwrap_or(-3)
}

/// The case: a lock held by watchdog (3 s), a waiter of another client; the lock's key
/// is MIGRATEd to another master and the slot stays in its `ASK` phase for 4 s (longer than
/// the lease) before `SETSLOT NODE`. Renewals reach the target during the `ASK` phase, every
/// command answers within its timeout, the hold survives, and the waiter acquires within 1 s
/// of the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_survives_an_ask_phase_longer_than_its_lease() {
    let c = RedisCluster::start();
    let timeout = Duration::from_millis(1500);
    let config = Config::default()
        .lock_watchdog_timeout(Duration::from_secs(3))
        .timeout(timeout);
    let (holder, other) = (client(&c, config.clone()).await, client(&c, config).await);
    let name = c.name_per_master("reshard-").remove(0);
    let lock = holder.get_lock(&name);
    let guard = lock.lock().await.unwrap();
    let contender = other.get_lock(&name);
    let waiter = tokio::spawn(async move {
        let g = contender.lock().await?;
        Ok::<_, Error>((Instant::now(), g))
    });
    let ch = format!("redisson_lock__channel:{{{name}}}");
    assert!(eventually(WITHIN, || async { other.stats().channel_waiters(&ch) == 1 }).await);

    let slot = RedisCluster::slot(&name);
    let from = c.master_for_key(&name);
    let to = c.masters().into_iter().find(|m| *m != from).unwrap();
    // The target has never seen the scripts: the first EVALSHA there meets NOSCRIPT.
    RedisCluster::cmd(to, &["SCRIPT", "FLUSH"]);
    c.begin_migration(slot, from, to);
    assert!(
        RedisCluster::query(from, &["EXISTS", &name])
            .unwrap()
            .text()
            .starts_with("ASK "),
        "the key left the source"
    );
    let ask_phase = Instant::now();
    let mut lowest = i64::MAX;
    while ask_phase.elapsed() < Duration::from_secs(4) {
        let pttl = pttl_asking(to, &name);
        lowest = lowest.min(pttl);
        let t = Instant::now();
        let n = tokio::time::timeout(timeout * 2, lock.hold_count()).await;
        assert!(
            matches!(n, Ok(Ok(1))),
            "hold_count during the ASK phase: {n:?} after {:?}",
            t.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // A new lock in the same slot, acquired during the ASK phase: it is made on the target
    // (ASKING, and the replica-sync WAIT there). Its release needs the unlock latch, a key
    // not on the target yet: a multi-key call answers TRYAGAIN until the slot is assigned, and
    // the release is retried until then.
    let second = holder.get_lock(&format!("{{{name}}}:second"));
    let g = tokio::time::timeout(timeout * 3, second.lock())
        .await
        .expect("an acquisition during the ASK phase answers")
        .unwrap();
    assert_eq!(
        RedisCluster::cmd_asking(to, &["EXISTS", second.raw_name()]).int(),
        Some(1),
        "made on the target"
    );
    let second_release = tokio::spawn(g.unlock());
    assert!(
        lowest > 1000,
        "renewals reach the target during the ASK phase (lowest PTTL {lowest} ms)"
    );
    assert!(!guard.is_lost());
    c.finish_migration(slot, from, to).await;
    tokio::time::timeout(WITHIN, second_release)
        .await
        .expect("the release during the ASK phase completes once the slot is assigned")
        .unwrap()
        .unwrap();
    assert_eq!(
        RedisCluster::cmd(to, &["EXISTS", second.raw_name()]).int(),
        Some(0)
    );

    // Every command answers within its timeout after the assignment.
    for _ in 0..10 {
        let n = tokio::time::timeout(timeout * 2, lock.hold_count()).await;
        assert!(
            matches!(n, Ok(Ok(1))),
            "hold_count after SETSLOT NODE: {n:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!guard.is_lost(), "the hold survives the reshard");
    assert!(pttl_asking(to, &name) > 1000);
    let released = Instant::now();
    guard.unlock().await.unwrap();
    let g = woke_within(waiter, released, Duration::from_millis(1000)).await;
    g.unlock().await.unwrap();
}

/// Five locks of one slot, renewed in one batch; the slot is marked migrating and only two of
/// the keys are MIGRATEd, and the slot stays so for longer than the lease: the batch call meets
/// `TRYAGAIN` (some keys here, some there) and is split per lock, so every hold is renewed
/// where its key is; after `SETSLOT NODE` all five are released cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_split_when_part_of_a_slot_has_moved() {
    let c = RedisCluster::start();
    let config = Config::default()
        .lock_watchdog_timeout(Duration::from_secs(3))
        .timeout(Duration::from_millis(1500));
    let holder = client(&c, config).await;
    let tag = c.name_per_master("split-").remove(0);
    let names: Vec<String> = (0..5).map(|i| format!("{{{tag}}}:{i}")).collect();
    let mut guards = Vec::new();
    for n in &names {
        guards.push(holder.get_lock(n).lock().await.unwrap());
    }
    let slot = RedisCluster::slot(&tag);
    let from = c.master_for_key(&tag);
    let to = c.masters().into_iter().find(|m| *m != from).unwrap();
    c.mark_migrating(slot, from, to);
    RedisCluster::migrate_keys(from, to, &names[..2]);
    let calls = holder.stats().renewal_calls;
    let start = Instant::now();
    let mut lowest = i64::MAX;
    while start.elapsed() < Duration::from_secs(4) {
        for (i, n) in names.iter().enumerate() {
            let pttl = if i < 2 {
                RedisCluster::cmd_asking(to, &["PTTL", n]).int().unwrap()
            } else {
                // An ASK here: the key is gone from the source (expired).
                RedisCluster::query(from, &["PTTL", n])
                    .unwrap()
                    .int()
                    .unwrap_or(-2)
            };
            lowest = lowest.min(pttl);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        holder.stats().renewal_calls >= calls + 3,
        "renewal runs went on"
    );
    assert!(
        lowest > 1000,
        "every hold renewed where its key is (lowest PTTL {lowest} ms)"
    );
    assert!(guards.iter().all(|g| !g.is_lost()));
    c.begin_migration(slot, from, to);
    c.finish_migration(slot, from, to).await;
    for g in guards {
        g.unlock().await.unwrap();
    }
    for n in &names {
        assert_eq!(RedisCluster::cmd(to, &["EXISTS", n]).int(), Some(0));
    }
}
