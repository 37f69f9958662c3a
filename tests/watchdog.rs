//! The renewal service: keeps watchdog locks alive, stops at unlock, batches, reports loss.
//! Ports Redisson's RedissonLockExpirationRenewalTest and the watchdog parts of RedissonLockTest.

use common::backend_tests;
use redisson_lock_test_kit as common;

use std::time::Duration;

use common::{Admin, Backend, RedisServer};
use fred::{interfaces::KeysInterface, types::Value};
use redisson_lock::{Client, Config, Error, GroupLock, HoldState, MultiLock};
use tokio::time::Instant;

fn wd(ms: u64) -> Config {
    Config::default().lock_watchdog_timeout(Duration::from_millis(ms))
}

/// A client of `b` with a watchdog timeout of `ms`.
async fn wd_client(b: &Backend, ms: u64) -> Client {
    b.client_with(b.config().lock_watchdog_timeout(Duration::from_millis(ms)))
        .await
}

async fn a_watchdog_lock_held_three_timeouts_never_expires(b: Backend) {
    let n = b.name("wd:held");
    // 2 s, not less: a renewal runs every third of it, and on a loaded 2-core machine a
    // renewal late by a whole 1 s timeout was seen (the lock expired while held).
    let client = wd_client(&b, 2000).await;
    let admin = b.admin().await;
    let g = client.get_lock(&n).lock().await.unwrap();
    let until = Instant::now() + Duration::from_secs(6);
    while Instant::now() < until {
        // The deadline read before the TTL, the clock after it: the key lives at least as
        // long as its holder believes it holds it (whatever the renewals' timing).
        let valid_until = g.valid_until();
        let ttl = admin.pttl(&n).await;
        let believed = valid_until.saturating_duration_since(Instant::now());
        assert!(ttl > 0, "lock expired while held (ttl {ttl})");
        assert!(
            ttl >= believed.as_millis() as i64,
            "the key has {ttl} ms left, its holder believes {believed:?}"
        );
        assert!(ttl <= 2000, "never extended beyond the watchdog timeout");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!g.is_lost());
    assert!(client.stats().renewal_calls >= 6);
    g.unlock().await.unwrap();
}

/// What a renewal must leave on the server for one hold: a key's TTL, a hash field holding an
/// epoch-ms deadline (a group lock's values), a sorted-set score holding one (a permit).
enum Probe {
    Ttl(String),
    Deadline { hash: String, field: String },
    Score { zset: String, member: Vec<u8> },
}

/// One watchdog hold under test: what it is, its guard's deadline, what renews it on the wire.
struct Watched<'a> {
    what: &'static str,
    valid_until: Box<dyn Fn() -> Instant + 'a>,
    probes: Vec<Probe>,
}

/// This machine's clock in epoch ms (the clock a group lock's and a permit's deadlines are
/// written in).
fn epoch_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The time left on the server for `probe` (ms), and the command that read it.
async fn left_on_server(admin: &Admin, probe: &Probe) -> (i64, String) {
    match probe {
        Probe::Ttl(key) => (admin.pttl(key).await, format!("PTTL {key}")),
        Probe::Deadline { hash, field } => {
            let v = admin
                .cmd("HGET", vec![hash.as_str().into(), field.as_str().into()])
                .await
                .unwrap();
            let at: i64 = v.as_string().map_or(-1, |s| s.parse().unwrap());
            (at - epoch_ms(), format!("HGET {hash} {field}"))
        }
        Probe::Score { zset, member } => {
            let v = admin
                .cmd(
                    "ZSCORE",
                    vec![zset.as_str().into(), Value::Bytes(member.clone().into())],
                )
                .await
                .unwrap();
            let at = v
                .as_string()
                .map_or(-1, |s| s.parse::<f64>().unwrap() as i64);
            (at - epoch_ms(), format!("ZSCORE {zset} <permit>"))
        }
    }
}

/// Watches `holds` until each has been renewed `renewals` times (its guard's deadline moved
/// forward), and right after each renewal reads what the renewal set on the server: every
/// probe must have at least the time the holder believes it has left (the deadline, read
/// before the probe, minus the clock after it), and a TTL at most the watchdog timeout.
///
/// The holder's deadline is the renewal's send time + `timeout` × 0.99 − 2 ms, and the server's
/// TTL starts no earlier than that send time: a renewal that sets the full timeout leaves a
/// margin of that drift (32 ms at 3 s) whatever the machine's load; one that sets 9/10 of the
/// timeout (the holder still believing the full timeout) is short by 9 % − 2 ms (268 ms) plus
/// the probe's own latency — the key would expire while its holder says `Held`.
async fn renewals_set_the_full_timeout(
    admin: &Admin,
    holds: &[Watched<'_>],
    timeout: Duration,
    renewals: usize,
) {
    let timeout_ms = timeout.as_millis() as i64;
    let mut seen: Vec<(Instant, usize)> = holds.iter().map(|h| ((h.valid_until)(), 0)).collect();
    // Every hold's every renewal is checked before the test fails, so a failure names every
    // kind the fault reaches.
    let mut short = Vec::new();
    let bound = Instant::now() + timeout * (renewals as u32 + 3);
    while seen.iter().any(|(_, n)| *n < renewals) {
        assert!(
            Instant::now() < bound,
            "renewals seen per hold: {:?}",
            holds
                .iter()
                .zip(&seen)
                .map(|(h, s)| (h.what, s.1))
                .collect::<Vec<_>>()
        );
        for (hold, (last, count)) in holds.iter().zip(seen.iter_mut()) {
            let valid_until = (hold.valid_until)();
            if valid_until <= *last {
                continue;
            }
            *last = valid_until;
            *count += 1;
            for probe in &hold.probes {
                let (left, read) = left_on_server(admin, probe).await;
                let believed = valid_until
                    .saturating_duration_since(Instant::now())
                    .as_millis() as i64;
                if left < believed {
                    short.push(format!(
                        "{}: renewal {count} left {left} ms on the server ({read}) while the \
                         holder believes {believed} ms",
                        hold.what
                    ));
                }
                if matches!(probe, Probe::Ttl(_)) && left > timeout_ms {
                    short.push(format!(
                        "{}: {read} = {left} ms, beyond the watchdog timeout",
                        hold.what
                    ));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        short.is_empty(),
        "renewals that did not set the watchdog timeout ({timeout_ms} ms):\n{}",
        short.join("\n")
    );
}

/// The hash's name of a read hold's timeout keys (`{N}`, or `N` when it has braces).
fn read_prefix(name: &str) -> String {
    if name.contains('{') {
        name.to_owned()
    } else {
        format!("{{{name}}}")
    }
}

/// Every kind the watchdog renews, held at once by one client: after each of three renewals
/// the server has what the holder believes, at least (see [`renewals_set_the_full_timeout`]):
/// the reentrant, fair, fenced, spin and non-reentrant locks' hashes, the write lock's hash,
/// the read lock's hash and its hold's timeout key, a group lock's hash and its value's
/// deadline field, the parts of a multi-lock, and a permit's score.
async fn a_renewal_sets_the_full_timeout_for_every_kind_it_renews(b: Backend) {
    let timeout = Duration::from_millis(3000);
    let client = wd_client(&b, 3000).await;
    let admin = b.admin().await;
    let n = |base: &str| b.name(&format!("wd:full:{base}"));
    let (reentrant, fair, fenced, spin, plain) =
        (n("re"), n("fair"), n("fenced"), n("spin"), n("nr"));
    let (write, read, group, sem) = (n("write"), n("read"), n("group"), n("sem"));
    let parts = [n("part-a"), n("part-b")];

    let g_re = client.get_lock(&reentrant).lock().await.unwrap();
    let g_fair = client.get_fair_lock(&fair).lock().await.unwrap();
    let g_fenced = client.get_fenced_lock(&fenced).lock().await.unwrap();
    let g_spin = client.get_spin_lock(&spin).lock().await.unwrap();
    let g_plain = client.get_non_reentrant_lock(&plain).lock().await.unwrap();
    let g_write = client
        .get_read_write_lock(&write)
        .write_lock()
        .lock()
        .await
        .unwrap();
    let g_read = client
        .get_read_write_lock(&read)
        .read_lock()
        .lock()
        .await
        .unwrap();
    let g_group = client
        .get_group_lock(&group, ["seat"])
        .lock()
        .await
        .unwrap();
    let multi = MultiLock::new(parts.iter().map(|p| client.get_lock(p).into()).collect()).unwrap();
    let g_multi = multi.lock().await.unwrap();
    let semaphore = client.get_permit_expirable_semaphore(&sem);
    assert!(semaphore.try_set_permits(1).await.unwrap());
    let permit = semaphore.acquire(None).await.unwrap();
    assert!(permit.is_watchdog());

    let mut holds = vec![
        Watched {
            what: "reentrant",
            valid_until: Box::new(|| g_re.valid_until()),
            probes: vec![Probe::Ttl(reentrant.clone())],
        },
        Watched {
            what: "fair",
            valid_until: Box::new(|| g_fair.valid_until()),
            probes: vec![Probe::Ttl(fair.clone())],
        },
        Watched {
            what: "fenced",
            valid_until: Box::new(|| g_fenced.valid_until()),
            probes: vec![Probe::Ttl(fenced.clone())],
        },
        Watched {
            what: "spin",
            valid_until: Box::new(|| g_spin.valid_until()),
            probes: vec![Probe::Ttl(spin.clone())],
        },
        Watched {
            what: "non-reentrant",
            valid_until: Box::new(|| g_plain.valid_until()),
            probes: vec![Probe::Ttl(plain.clone())],
        },
        Watched {
            what: "write",
            valid_until: Box::new(|| g_write.valid_until()),
            probes: vec![Probe::Ttl(write.clone())],
        },
        Watched {
            what: "read",
            valid_until: Box::new(|| g_read.valid_until()),
            probes: vec![
                Probe::Ttl(read.clone()),
                Probe::Ttl(format!(
                    "{}:{}:rwlock_timeout:1",
                    read_prefix(&read),
                    g_read.owner_field()
                )),
            ],
        },
        Watched {
            what: "group",
            valid_until: Box::new(|| g_group.valid_until()),
            probes: vec![
                Probe::Ttl(group.clone()),
                Probe::Deadline {
                    hash: group.clone(),
                    field: format!(
                        "{}:{}:expire_time",
                        GroupLock::value_field("seat"),
                        g_group.owner_field()
                    ),
                },
            ],
        },
        Watched {
            what: "permit",
            valid_until: Box::new(|| permit.valid_until()),
            probes: vec![Probe::Score {
                zset: semaphore.timeouts_key().to_owned(),
                member: permit.id().as_bytes().to_vec(),
            }],
        },
    ];
    for (part, name) in g_multi.parts().iter().zip(&parts) {
        holds.push(Watched {
            what: "multi-lock part",
            valid_until: Box::new(move || part.valid_until()),
            probes: vec![Probe::Ttl(name.clone())],
        });
    }
    renewals_set_the_full_timeout(&admin, &holds, timeout, 3).await;
    drop(holds);
    assert_eq!(g_multi.state(), HoldState::Held);
    assert_eq!(permit.state(), HoldState::Held);
    let guards = [
        g_re.erase(),
        g_fair.erase(),
        g_fenced.erase(),
        g_spin.erase(),
        g_plain.erase(),
        g_write.erase(),
        g_read.erase(),
        g_group.erase(),
    ];
    for g in guards {
        assert_eq!(g.state(), HoldState::Held, "{}", g.name());
    }
}

async fn after_unlock_no_renewal_reaches_the_key(b: Backend) {
    let n = b.name("wd:stop");
    let client = wd_client(&b, 600).await;
    let lock = client.get_lock(&n);
    let g = lock.lock().await.unwrap();
    let g2 = lock.lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(700)).await;
    g2.unlock().await.unwrap();
    g.unlock().await.unwrap();
    assert_eq!(client.stats().watchdog_holds, 0);
    let calls = client.stats().renewal_calls;
    // Every command on the key's server that names the key (the shared cluster's masters
    // serve parallel tests, so a server-wide count would not be this test's).
    let monitor = b.monitor(&n);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        client.stats().renewal_calls,
        calls,
        "no renewal run after the final unlock"
    );
    assert_eq!(monitor.count("pexpire", &n).await, 0);
    assert_eq!(monitor.count("evalsha", &n).await, 0);
}

/// The client's renewal call count, read at a moment between two renewal runs (a run's calls
/// take a few ms; runs are a third of the watchdog timeout apart).
async fn between_runs(client: &Client) -> u64 {
    loop {
        let before = client.stats().renewal_calls;
        tokio::time::sleep(Duration::from_millis(150)).await;
        if client.stats().renewal_calls == before {
            return before;
        }
    }
}

async fn renewing_a_thousand_locks_costs_ten_script_calls_per_period(b: Backend) {
    // 1000 locks over six hash tags, two on each master (on a cluster a script call may only
    // touch one slot): each run costs the sum over slots of ⌈locks in the slot / batch⌉
    // calls — 10 on a standalone server, 3+2+3+1+3+1 = 13 on the cluster.
    const BATCH: usize = 100;
    let client = b
        .client_with(
            b.config()
                .lock_watchdog_timeout(Duration::from_millis(3000))
                .lock_watchdog_batch_size(BATCH),
        )
        .await;
    let tags = b.names_on_every_master("wd:many", 2);
    let counts = [250, 150, 230, 70, 201, 99];
    let names: Vec<String> = tags
        .iter()
        .zip(counts)
        .flat_map(|(tag, count)| (0..count).map(move |i| format!("{{{tag}}}:{i}")))
        .collect();
    assert_eq!(names.len(), 1000);
    let mut per_slot = std::collections::HashMap::new();
    for name in &names {
        *per_slot.entry(b.slot(name)).or_insert(0usize) += 1;
    }
    let per_run: usize = per_slot.values().map(|n| n.div_ceil(BATCH)).sum();
    assert_eq!(per_run, if b.is_cluster() { 13 } else { 10 });

    let mut guards = Vec::new();
    for name in &names {
        guards.push(client.get_lock(name).lock().await.unwrap());
    }
    assert_eq!(client.stats().watchdog_holds, 1000);
    // This test's keys all start with `{<tags' base>-` ("wd:many-" or "wd:many-<n>-").
    let ours = format!("\"{{{}-", tags[0].rsplit_once('-').unwrap().0);
    let mine = |args: &str| args.contains(&ours);
    // The window opens and closes between two runs, so it holds whole runs only (the runs
    // while the locks were being taken renewed fewer locks). The client counts a run's calls
    // before it sends them: an unchanged count after opening (closing) the window means no
    // run was sent around that moment.
    let monitor = b.monitor_all();
    let start = loop {
        let start = between_runs(&client).await;
        monitor.clear();
        if client.stats().renewal_calls == start {
            break start;
        }
    };
    tokio::time::sleep(Duration::from_millis(3100)).await; // about three periods of 1 s
    let (end, scripts, renewed, evals) = loop {
        let end = between_runs(&client).await;
        let scripts = monitor.calls_where("evalsha", mine).await;
        let renewed = monitor.calls_where("pexpire", mine).await;
        let evals = monitor.count_where("eval", mine).await;
        if client.stats().renewal_calls == end {
            break (end, scripts, renewed, evals);
        }
    };
    drop(monitor);
    assert_eq!(evals, 0, "scripts were loaded at connect (on every master)");
    assert_eq!(
        (end - start) as usize,
        scripts.len(),
        "the servers saw the client's renewal calls"
    );
    // Runs are 1 s apart: split the calls where they pause. The masters' feeds interleave as
    // they arrive, so order the calls by server time first.
    let mut times: Vec<f64> = scripts.iter().map(|(at, _)| *at).collect();
    times.sort_by(f64::total_cmp);
    let mut runs: Vec<Vec<f64>> = Vec::new();
    for at in &times {
        match runs.last_mut() {
            Some(run) if at - run.last().unwrap() < 0.4 => run.push(*at),
            _ => runs.push(vec![*at]),
        }
    }
    let starts: Vec<String> = runs
        .iter()
        .map(|r| format!("{:.3}", r[0] - times[0]))
        .collect();
    assert!(
        (2..=5).contains(&runs.len()),
        "runs in the 3.1 s window start at {starts:?}"
    );
    for run in &runs {
        assert_eq!(run.len(), per_run, "script calls of the run at {starts:?}");
        // Every lock renewed once in the run: one PEXPIRE each, from inside the scripts.
        let (from, to) = (run[0], run.last().unwrap() + 0.3);
        let pexpires = renewed
            .iter()
            .filter(|(at, _)| (from..to).contains(at))
            .count();
        assert_eq!(pexpires, 1000, "keys renewed in one run");
    }
    for (at, args) in &scripts {
        // Each call touches one slot, and at most a batch of keys.
        let keys: Vec<&str> = args
            .split(' ')
            .filter(|a| a.starts_with(&ours))
            .map(|a| a.trim_matches('"'))
            .collect();
        assert!(keys.len() <= BATCH, "{at}: {} keys", keys.len());
        let slots: std::collections::HashSet<_> = keys.iter().map(|k| b.slot(k)).collect();
        assert_eq!(slots.len(), 1, "{at}: one slot per call");
    }
    for g in &guards {
        assert!(!g.is_lost());
    }
}

async fn a_lock_deleted_behind_the_holders_back_is_reported_lost(b: Backend) {
    let n = b.name("wd:lost");
    let client = wd_client(&b, 900).await;
    let admin = b.admin().await;
    let g = client.get_lock(&n).lock().await.unwrap();
    let _: i64 = admin.redis.del(&n).await.unwrap();
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), g.lost())
        .await
        .expect("loss reported");
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    assert!(g.is_lost());
    assert_eq!(client.stats().watchdog_holds, 0, "renewal for it stopped");
    assert!(matches!(g.unlock().await, Err(Error::NotHeld { .. })));
}

async fn max_renewals_caps_renewal_and_the_guard_then_reports_loss(b: Backend) {
    let n = b.name("wd:cap");
    let client = b
        .client_with(
            b.config()
                .lock_watchdog_timeout(Duration::from_millis(600))
                .max_renewals(Some(2)),
        )
        .await;
    let admin = b.admin().await;
    let g = client.get_lock(&n).lock().await.unwrap();
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), g.lost())
        .await
        .expect("lost");
    // 2 renewals at ~200 ms intervals, then the 600 ms TTL runs out.
    let held = started.elapsed();
    assert!(held >= Duration::from_millis(700), "{held:?}");
    assert!(common::eventually(Duration::from_secs(2), || async { !admin.exists(&n).await }).await);
}

#[tokio::test]
async fn renewal_survives_a_redis_restart_and_recovers_for_new_locks() {
    // Redisson testLockAfterTimeout: the held lock is gone after the restart; unlock says so;
    // a new lock is renewed normally afterwards.
    let mut s = RedisServer::start();
    let client = Client::connect(&s.url(), wd(1000)).await.unwrap();
    let lock = client.get_lock("wd:restart");
    let g = lock.lock().await.unwrap();
    s.restart();
    tokio::time::timeout(Duration::from_secs(10), g.lost())
        .await
        .expect("lost after restart");
    assert!(matches!(g.unlock().await, Err(Error::NotHeld { .. })));
    let admin = Admin::connect(&s.url()).await;
    let g = lock.lock().await.unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(admin.exists("wd:restart").await, "new lock renewed");
    assert!(!g.is_lost());
    g.unlock().await.unwrap();
    let g = lock.lock().await.unwrap();
    g.unlock().await.unwrap();
}

async fn stale_registrations_of_an_earlier_owner_do_not_stop_renewal_of_the_next(b: Backend) {
    // Redisson testLockReentrantRenew.
    let n = b.name("wd:reentrant");
    // A 1 s watchdog renews every 333 ms: a loaded 2-core machine running a six-node cluster
    // beside other tests has stalled a 600 ms one past its timeout.
    let client = wd_client(&b, 1000).await;
    let admin = b.admin().await;
    let first = client.get_lock(&n);
    let a = first.lock().await.unwrap();
    let b = first.lock().await.unwrap();
    drop(b);
    a.unlock().await.unwrap();
    let second = client.get_lock(&n);
    let g = second.lock().await.unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await; // 4 timeouts, 12 periods
    assert!(admin.exists(&n).await);
    assert!(!g.is_lost());
}

async fn a_cancelled_try_lock_leaves_no_renewal(b: Backend) {
    // Redisson testLockIsNotRenewedAfterInterruptedTryLock, with a 600 ms watchdog.
    let n = b.name("wd:interrupted");
    let client = wd_client(&b, 600).await;
    let admin = b.admin().await;
    let lock = client.get_lock(&n);
    let _ = tokio::time::timeout(Duration::from_micros(200), lock.try_lock()).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!admin.exists(&n).await);
    assert_eq!(client.stats().watchdog_holds, 0);
}

async fn shutdown_stops_renewal_and_the_lock_expires_within_one_timeout(b: Backend) {
    // Redisson testAutoExpire.
    let n = b.name("wd:auto");
    let client = wd_client(&b, 800).await;
    let admin = b.admin().await;
    let g = client.get_lock(&n).lock().await.unwrap();
    g.keep();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(admin.exists(&n).await);
    client.shutdown().await;
    let down = Instant::now();
    assert!(common::eventually(Duration::from_secs(3), || async { !admin.exists(&n).await }).await);
    assert!(
        down.elapsed() <= Duration::from_millis(1100),
        "{:?}",
        down.elapsed()
    );
}

async fn a_starved_runtime_learns_of_the_loss_the_moment_it_resumes(b: Backend) {
    // Fault S2: the holder's runtime is blocked longer than the watchdog timeout, so nothing
    // renews the lock; another client takes it. On resume the guard must already say "lost",
    // without waiting for a network round trip. The holder's runtime is a current-thread one
    // of its own, on a plain thread (a runtime cannot be started inside the test's).
    let n = b.name("wd:starved");
    let starved = move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let guard = rt.block_on(async {
            let c = wd_client(&b, 600).await;
            let g = c.get_lock(&n).lock().await.unwrap();
            assert!(!g.is_lost());
            g
        });
        // Block the runtime's only thread: no task (watchdog included) runs.
        std::thread::sleep(Duration::from_millis(1500));
        assert!(guard.is_lost(), "deadline passed while starved");
        let other = tokio::runtime::Runtime::new().unwrap();
        let taken = other.block_on(async {
            let c = wd_client(&b, 600).await;
            c.get_lock(&n).try_lock().await.unwrap().is_some()
        });
        assert!(taken, "the lock expired while the holder was starved");
        rt.block_on(async {
            tokio::time::timeout(Duration::from_millis(50), guard.lost())
                .await
                .expect("lost() resolves at once");
            assert!(matches!(guard.unlock().await, Err(Error::NotHeld { .. })));
        });
    };
    tokio::task::spawn_blocking(move || std::thread::spawn(starved).join().unwrap())
        .await
        .unwrap();
}

#[tokio::test]
async fn read_and_write_locks_recover_after_a_redis_restart() {
    // Redisson testWriteLockAfterTimeout / testReadLockAfterTimeout.
    let mut s = RedisServer::start();
    let client = Client::connect(&s.url(), wd(1000)).await.unwrap();
    let rw = client.get_read_write_lock("wd:rw");
    let w = rw.write_lock().lock().await.unwrap();
    let r = client
        .get_read_write_lock("wd:rw2")
        .read_lock()
        .lock()
        .await
        .unwrap();
    s.restart();
    tokio::time::timeout(Duration::from_secs(10), w.lost())
        .await
        .expect("write lost");
    tokio::time::timeout(Duration::from_secs(10), r.lost())
        .await
        .expect("read lost");
    assert!(matches!(w.unlock().await, Err(Error::NotHeld { .. })));
    assert!(matches!(r.unlock().await, Err(Error::NotHeld { .. })));
    let admin = Admin::connect(&s.url()).await;
    for _ in 0..2 {
        let w = rw.write_lock().lock().await.unwrap();
        let r = rw.read_lock().lock().await.unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(admin.exists("wd:rw").await, "renewed after the restart");
        r.unlock().await.unwrap();
        w.unlock().await.unwrap();
    }
}

backend_tests!(
    a_watchdog_lock_held_three_timeouts_never_expires,
    a_renewal_sets_the_full_timeout_for_every_kind_it_renews,
    after_unlock_no_renewal_reaches_the_key,
    renewing_a_thousand_locks_costs_ten_script_calls_per_period,
    a_lock_deleted_behind_the_holders_back_is_reported_lost,
    max_renewals_caps_renewal_and_the_guard_then_reports_loss,
    stale_registrations_of_an_earlier_owner_do_not_stop_renewal_of_the_next,
    a_cancelled_try_lock_leaves_no_renewal,
    shutdown_stops_renewal_and_the_lock_expires_within_one_timeout,
    a_starved_runtime_learns_of_the_loss_the_moment_it_resumes,
);
