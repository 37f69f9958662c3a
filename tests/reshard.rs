//! Live resharding on the 3+3 cluster: a lock whose slot is in its `ASK` phase (keys moved to
//! the target, the slot still `MIGRATING`/`IMPORTING`) for longer than a renewal period.

use redisson_lock_test_kit as common;

use std::time::Duration;

use common::{cluster::RedisCluster, eventually, woke_within};
use redisson_lock::{Client, Config, Error, HoldState};
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
    // A waiter that starts during the ASK phase (its subscription made while the slot
    // migrates) of a third client.
    let third = client(&c, Config::default().timeout(timeout)).await;
    let late = third.get_lock(&name);
    let late_waiter = tokio::spawn(async move {
        let g = late.lock().await?;
        Ok::<_, Error>((Instant::now(), g))
    });
    assert!(eventually(WITHIN, || async { third.stats().channel_waiters(&ch) == 1 }).await);
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
    // The slot changed node: in doubt until a renewal on the new owner confirms it.
    assert!(
        eventually(WITHIN, || async { guard.state() == HoldState::Held }).await,
        "the hold survives the reshard"
    );
    assert!(pttl_asking(to, &name) > 1000);
    let released = Instant::now();
    guard.unlock().await.unwrap();
    // Both waiters are served, one after the other, each within 1 s of the release before.
    let (mut first, mut second) = (waiter, late_waiter);
    let winner = tokio::time::timeout(WITHIN, async {
        tokio::select! {
            r = &mut first => (r, second),
            r = &mut second => (r, first),
        }
    })
    .await
    .expect("a waiter acquires after the release");
    let (at, g) = winner.0.unwrap().unwrap();
    assert!(at.saturating_duration_since(released) < Duration::from_millis(1000));
    let released = Instant::now();
    g.unlock().await.unwrap();
    let g = woke_within(winner.1, released, Duration::from_millis(1000)).await;
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

/// Errors seen by kind (`Debug` of the kind), for the report.
type Tally = std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, usize>>>;

fn count(tally: &Tally, what: String) {
    *tally.lock().unwrap().entry(what).or_default() += 1;
}

/// A live `redis-cli --cluster reshard` of 400 slots (keys moved by `MIGRATE`, 10 per call,
/// 20 filler keys per lock so each slot spends several calls in its `ASK` phase) while 200
/// locks are held by watchdog (6 s), 50 waiters of another client wait on 50 of them, and 8
/// tasks loop lock/unlock on 4 locks of the moving slots (two per lock, mutual exclusion
/// checked). Zero holds lost, no error but transient ones, every waiter served once the holds
/// are released, no lock key left behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_reshard_under_load_loses_no_hold() {
    reshard_under_load(false).await;
}

/// The same, with a `CLUSTER FAILOVER` of the target between two halves of the reshard
/// (200 slots, the failover while the load goes on, 200 more slots to the promoted replica).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_reshard_with_a_failover_of_the_target_loses_no_hold() {
    reshard_under_load(true).await;
}

async fn reshard_under_load(failover: bool) {
    use std::sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    };
    const SLOTS: usize = 400;
    let c = Arc::new(RedisCluster::start());
    let config = Config::default().lock_watchdog_timeout(Duration::from_secs(6));
    let holder = client(&c, config.clone()).await;
    let waiting = client(&c, config.clone()).await;
    let looping = client(&c, config).await;
    let (from, to) = (c.masters()[0], c.masters()[1]);
    let moving: std::collections::HashSet<u16> = c.slots_of(from).into_iter().take(SLOTS).collect();
    let in_moving = |prefix: &str, n: usize| -> Vec<String> {
        (0..)
            .map(|i| format!("{prefix}{i}"))
            .filter(|k| moving.contains(&RedisCluster::slot(k)))
            .take(n)
            .collect()
    };
    let holds = in_moving("hold-", 200);
    let loops = in_moving("loop-", 4);
    let admin = common::Admin::connect(&c.cluster_url()).await;
    for h in &holds {
        let sets =
            (0..20).map(|j| admin.cmd("SET", vec![format!("{{{h}}}:fill:{j}").into(), "x".into()]));
        for r in futures::future::join_all(sets).await {
            r.unwrap();
        }
    }
    let mut guards = Vec::new();
    for h in &holds {
        guards.push(holder.get_lock(h).lock().await.unwrap());
    }

    let errors: Tally = Default::default();
    let waiters: Vec<_> = holds[..50]
        .iter()
        .map(|h| {
            let lock = waiting.get_lock(h);
            let errors = errors.clone();
            tokio::spawn(async move {
                loop {
                    match lock.lock().await {
                        Ok(g) => {
                            let at = Instant::now();
                            g.unlock().await.unwrap();
                            return at;
                        }
                        Err(e) => count(&errors, format!("waiter {:?}: {e}", e.kind())),
                    }
                }
            })
        })
        .collect();
    let stop = Arc::new(AtomicBool::new(false));
    let iterations = Arc::new(AtomicUsize::new(0));
    // When each lock/unlock of the loopers completed, per loop lock.
    let done: Arc<std::sync::Mutex<Vec<Vec<Instant>>>> =
        Arc::new(std::sync::Mutex::new(vec![Vec::new(); 4]));
    let inside: Arc<Vec<AtomicBool>> = Arc::new((0..4).map(|_| AtomicBool::new(false)).collect());
    let loopers: Vec<_> = (0..8)
        .map(|k| {
            let lock = looping.get_lock(&loops[k % 4]);
            let (stop, iterations, inside, errors, done) = (
                stop.clone(),
                iterations.clone(),
                inside.clone(),
                errors.clone(),
                done.clone(),
            );
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    match lock.try_lock_for(Duration::from_secs(10)).await {
                        Ok(Some(g)) => {
                            assert!(
                                !inside[k % 4].swap(true, Ordering::SeqCst),
                                "two holders of one lock at once"
                            );
                            tokio::time::sleep(Duration::from_millis(2)).await;
                            inside[k % 4].store(false, Ordering::SeqCst);
                            if let Err(e) = g.unlock().await {
                                count(&errors, format!("loop unlock {:?}: {e}", e.kind()));
                            }
                            iterations.fetch_add(1, Ordering::Relaxed);
                            done.lock().unwrap()[k % 4].push(Instant::now());
                        }
                        Ok(None) => count(&errors, "loop: not acquired within 10 s".into()),
                        Err(e) => count(&errors, format!("loop {:?}: {e}", e.kind())),
                    }
                }
            })
        })
        .collect();

    let reshard = |to: u16, slots: usize| {
        let c = c.clone();
        tokio::task::spawn_blocking(move || c.reshard(from, to, slots, 10))
    };
    // The loopers are going before the reshard starts.
    assert!(
        eventually(WITHIN, || async {
            iterations.load(Ordering::Relaxed) >= 40
        })
        .await,
        "the loopers are going"
    );
    let moving_from = Instant::now();
    let (took, to) = if failover {
        let first = reshard(to, SLOTS / 2).await.unwrap();
        let t0 = Instant::now();
        let promoted = c.replica_of(to);
        c.failover_under_load(promoted).await;
        let failed_over = t0.elapsed();
        let second = reshard(promoted, SLOTS - SLOTS / 2).await.unwrap();
        eprintln!("failover of the target {to} to {promoted} took {failed_over:?}");
        (first + second, promoted)
    } else {
        (reshard(to, SLOTS).await.unwrap(), to)
    };
    let moved_at = Instant::now();
    // (Not `wait_stable`: under this load the replicas' acknowledgements always trail.)
    let now_owned: std::collections::HashSet<u16> = c.slots_of(to).into_iter().collect();
    assert!(
        moving.iter().all(|s| now_owned.contains(s)),
        "every slot moved"
    );
    // The load goes on after the reshard: every loop lock is taken again there.
    assert!(
        eventually(WITHIN, || async {
            done.lock()
                .unwrap()
                .iter()
                .all(|d| d.iter().filter(|&&t| t > moved_at).count() >= 5)
        })
        .await,
        "every loop lock is taken after the reshard"
    );
    stop.store(true, Ordering::Relaxed);
    for l in loopers {
        tokio::time::timeout(WITHIN * 2, l).await.unwrap().unwrap();
    }
    // Progress while the reshard ran (its slots in their ASK phase one after another, the loop
    // locks among them): each loop lock was taken during the move, and no stall that began
    // during it (up to the next acquisition, after the move if need be) lasted 5 s (a failover
    // of the target takes well under 1 s; a stall is typically under 0.2 s), so the transient
    // errors hid no standstill.
    let stalls: Vec<(usize, Duration)> = done
        .lock()
        .unwrap()
        .iter()
        .map(|d| {
            // Two loopers per lock: their entries may be a little out of order.
            let mut d = d.clone();
            d.sort();
            let during = d
                .iter()
                .filter(|&&t| t >= moving_from && t <= moved_at)
                .count();
            let mut edges = vec![moving_from];
            edges.extend(d.iter().copied().filter(|&t| t > moving_from));
            let longest = edges
                .windows(2)
                .filter(|w| w[0] <= moved_at)
                .map(|w| w[1] - w[0])
                .max()
                .unwrap_or_default();
            (during, longest)
        })
        .collect();
    assert!(
        stalls
            .iter()
            .all(|&(n, longest)| n > 0 && longest < Duration::from_secs(5)),
        "lock/unlock per loop lock during the {:?} reshard (count, longest stall): {stalls:?}",
        moved_at - moving_from
    );

    // A slot that changed node puts its holds in doubt until the next renewal on the new owner
    // confirms them (issue 23): none may end lost.
    eventually(WITHIN, || async {
        guards.iter().all(|g| g.state() != HoldState::InDoubt)
    })
    .await;
    let kept = guards
        .iter()
        .filter(|g| g.state() == HoldState::Held)
        .count();
    for (g, h) in guards.iter().zip(&holds) {
        assert_eq!(
            RedisCluster::cmd(to, &["HEXISTS", h, g.owner_field()]).int(),
            Some(1),
            "{h} is held on its new master"
        );
    }
    let released = Instant::now();
    // When the release of each hold began: its waiter may not have acquired before.
    let mut unlocking = Vec::with_capacity(guards.len());
    for g in guards {
        unlocking.push(Instant::now());
        g.unlock().await.unwrap();
    }
    let mut slowest = Duration::ZERO;
    for (i, w) in waiters.into_iter().enumerate() {
        let at = tokio::time::timeout(WITHIN, w).await.unwrap().unwrap();
        assert!(
            at > unlocking[i],
            "the waiter of {} acquired {:?} before its hold's release began",
            holds[i],
            unlocking[i] - at
        );
        slowest = slowest.max(at.saturating_duration_since(released));
    }
    for name in holds.iter().chain(&loops) {
        assert_eq!(
            RedisCluster::cmd(to, &["EXISTS", name]).int(),
            Some(0),
            "{name} left behind"
        );
    }
    let errors = errors.lock().unwrap().clone();
    eprintln!(
        "live reshard (failover: {failover}): {SLOTS} slots ({} keys) moved in {took:?}; holds kept {kept}/200; \
         {} lock/unlock loops, per loop lock during the move (count, longest stall): {stalls:?}; \
         every waiter served after its hold's release, the last {slowest:?} after the releases \
         began; errors by kind: {errors:?}",
        holds.len() * 21,
        iterations.load(Ordering::Relaxed)
    );
    assert_eq!(kept, 200, "no hold lost");
    let lasting: Vec<_> = errors
        .iter()
        .filter(|(k, _)| {
            let kind = k.split(':').next().unwrap_or_default();
            !["Timeout", "Connection", "Ambiguous"]
                .iter()
                .any(|t| kind.ends_with(t))
        })
        .collect();
    assert!(lasting.is_empty(), "only transient errors: {errors:?}");
}
