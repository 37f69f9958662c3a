//! Redis Sentinel: locks, waits and wake-ups before and after `kill -9` of the master and across
//! a switch-over; a demoted master's READONLY never escapes as a lock error; sentinel and data
//! node passwords. Run on their own with `cargo test --test sentinel`.

use common::sentinel as sentinel_rig;
use redisson_lock_test_kit as common;

use std::time::Duration;

use common::woke_within;
use redisson_lock::{Client, Config, Error, ErrorKind};
use sentinel_rig::{Auth, SentinelSet, MASTER_NAME};
use tokio::time::Instant;

fn config() -> Config {
    Config::default()
        .connect_timeout(Duration::from_secs(5))
        .reconnect_max_delay(Duration::from_millis(500))
        .lock_watchdog_timeout(Duration::from_secs(6))
}

async fn connect(set: &SentinelSet, config: Config) -> Client {
    let urls = set.sentinel_urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    Client::connect_sentinel(MASTER_NAME, &urls, config)
        .await
        .expect("connect through the sentinels")
}

/// A holder in `a`, a waiter in `b`; the waiter must be woken by the release.
async fn lock_wait_wake(a: &Client, b: &Client, name: &str) -> Duration {
    let guard = a.get_lock(name).lock().await.expect("lock");
    let waiter = {
        let lock = b.get_lock(name);
        tokio::spawn(async move {
            let g = lock.try_lock_for(Duration::from_secs(20)).await?;
            Ok::<_, Error>((Instant::now(), g))
        })
    };
    // The waiter is in (its subscription made or being made: it attempts again once it is).
    // (10 s: longer than the bound the caller after the failover retries within.)
    let channel = format!("redisson_lock__channel:{{{name}}}");
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            b.stats().channel_waiters(&channel) > 0
        })
        .await,
        "the waiter on {name} is waiting"
    );
    let released = Instant::now();
    guard.unlock().await.expect("unlock");
    let g = woke_within(waiter, released, common::WOKEN_BY_MESSAGE).await;
    let woke = released.elapsed();
    g.expect("the waiter acquired").unlock().await.unwrap();
    woke
}

fn not_readonly(e: &Error) {
    let text = format!("{e} {e:?}");
    assert!(!text.contains("READONLY"), "READONLY escaped: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_lock_wait_wake_before_and_after_master_kill() {
    let mut set = SentinelSet::start();
    let a = connect(&set, config()).await;
    let b = connect(&set, config()).await;
    let before = lock_wait_wake(&a, &b, "sentinel:before").await;
    println!("before the failover: waiter woke {before:?} after the release");

    // A watchdog hold taken before the kill; it was not necessarily replicated.
    let old = set.master_port();
    set.kill_port(old);
    let killed = Instant::now();
    let new = set.await_new_master(old, Duration::from_secs(30));
    let failed_over = killed.elapsed();

    // New acquisitions succeed once the client has followed the switch.
    let lock = a.get_lock("sentinel:after-kill");
    let mut errors = Vec::new();
    let acquired = loop {
        match lock.try_lock().await {
            Ok(Some(g)) => break g,
            Ok(None) => panic!("nobody else holds it"),
            Err(e) => {
                not_readonly(&e);
                errors.push(e.kind());
                assert!(killed.elapsed() < Duration::from_secs(40), "{errors:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let first_ok = killed.elapsed();
    acquired.unlock().await.unwrap();
    println!(
        "master {old} killed; sentinels promoted {new} after {failed_over:?}; first acquisition \
         after {first_ok:?} ({} transient errors: {errors:?})",
        errors.len()
    );
    assert!(errors
        .iter()
        .all(|k| matches!(k, ErrorKind::Connection | ErrorKind::Timeout)));

    // Both clients' subscriber connections moved too: a release on the new master wakes the
    // waiter by its message (within `WOKEN_BY_MESSAGE`).
    let after = {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            // The subscriber may follow the switch a little after the command connection.
            let r = tokio::time::timeout(
                Duration::from_secs(5),
                lock_wait_wake(&a, &b, "sentinel:after"),
            )
            .await;
            match r {
                Ok(d) => break d,
                Err(_) if Instant::now() < deadline => continue,
                Err(_) => panic!("no wake-up after the failover"),
            }
        }
    };
    println!("after the failover: waiter woke {after:?} after the release");
    a.shutdown().await;
    b.shutdown().await;
}

/// Four tasks loop try_lock + unlock through a `SENTINEL FAILOVER`, and on after the old
/// master is demoted (by hand at the switch, as the sentinels do at their next look at it, up
/// to 10 s later): there is traffic before, during and after the switch, no error but transient
/// ones (or a release that found its hold gone), never READONLY, and what is acquired after the
/// switch is on the new master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_switchover_never_lets_readonly_escape() {
    use std::sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    };
    let set = SentinelSet::start();
    let client = connect(&set, config()).await;
    let old = set.master_port();
    let stop = Arc::new(AtomicBool::new(false));
    // Every attempt: when it began, and whether it acquired and released.
    let log: Arc<Mutex<Vec<(Instant, bool)>>> = Default::default();
    let mut tasks = Vec::new();
    for t in 0..4 {
        let (client, stop, log) = (client.clone(), stop.clone(), log.clone());
        tasks.push(tokio::spawn(async move {
            let mut errs = Vec::new();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let lock = client.get_lock(&format!("sentinel:switch:{t}:{}", i % 3));
                let began = Instant::now();
                let ok = match lock.try_lock().await {
                    Ok(Some(g)) => match g.unlock().await {
                        Ok(_) => true,
                        Err(e) => {
                            errs.push(e);
                            false
                        }
                    },
                    Ok(None) => false,
                    Err(e) => {
                        errs.push(e);
                        false
                    }
                };
                log.lock().unwrap().push((began, ok));
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            errs
        }));
    }
    let count = |from: Instant, to: Option<Instant>, ok: bool| {
        log.lock()
            .unwrap()
            .iter()
            .filter(|(at, done)| *at >= from && to.is_none_or(|to| *at < to) && (*done || !ok))
            .count()
    };
    let started = Instant::now();
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            count(started, None, true) >= 20
        })
        .await,
        "traffic before the failover"
    );
    let failover = Instant::now();
    let reply = set.sentinel_cli(
        set.sentinel_ports()[0],
        &["SENTINEL", "FAILOVER", MASTER_NAME],
    );
    assert_eq!(reply, "OK", "SENTINEL FAILOVER");
    let new = set.await_new_master(old, Duration::from_secs(30));
    let switched = Instant::now();
    // The sentinels turn the old master into a replica of the new one at their next look at it;
    // here at once, so that a connection left on it would get READONLY from now on.
    let replicaof = set.data_cli(old, &["REPLICAOF", "127.0.0.1", &new.to_string()]);
    assert_eq!(replicaof, "OK", "REPLICAOF on the old master");
    assert!(set.data_cli(old, &["ROLE"]).starts_with("slave"));
    let demoted = Instant::now();
    let went_on = common::eventually(Duration::from_secs(20), || async {
        count(demoted, None, true) >= 20
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    let mut errors = std::collections::BTreeMap::<String, usize>::new();
    for t in tasks {
        for e in &t.await.unwrap() {
            not_readonly(e);
            assert!(e.is_transient() || e.kind() == ErrorKind::NotHeld, "{e:?}");
            *errors.entry(format!("{:?}", e.kind())).or_default() += 1;
        }
    }
    assert!(
        went_on,
        "traffic after the old master's demotion: {} attempts, {} clean; errors {errors:?}",
        count(demoted, None, false),
        count(demoted, None, true)
    );
    // Traffic inside the switch: attempts begun between the command and the new master named
    // by every sentinel, and some of them went through.
    let (during, during_ok) = (
        count(failover, Some(switched), false),
        count(failover, Some(switched), true),
    );
    assert!(
        during > 0 && during_ok > 0,
        "{during} attempts during the switch, {during_ok} clean"
    );
    // After the switch, everything works, on the new master.
    for i in 0..20 {
        let name = format!("sentinel:post:{i}");
        let lock = client.get_lock(&name);
        let g = lock.lock().await.expect("lock on the new master");
        assert_eq!(
            set.data_cli(new, &["HEXISTS", &name, &lock.owner_field()]),
            "1",
            "held on the new master"
        );
        g.unlock().await.expect("unlock on the new master");
    }
    println!(
        "switch-over {old} -> {new} in {:?}: {} clean lock+unlock before it, {during_ok} of \
         {during} attempts clean during it, {} after the old master's demotion; transient \
         errors {errors:?}",
        switched - failover,
        count(started, Some(failover), true),
        count(demoted, None, true)
    );
    client.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_with_data_and_sentinel_passwords() {
    let auth = Auth {
        data: Some("data-Secret-1".into()),
        sentinel: Some("sentinel-Secret-2".into()),
    };
    let set = SentinelSet::start_with(auth);
    // Without the sentinel password the sentinels refuse.
    let urls = set.sentinel_urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let err = Client::connect_sentinel(
        MASTER_NAME,
        &urls,
        config()
            .password("data-Secret-1")
            .connect_timeout(Duration::from_secs(3)),
    )
    .await
    .unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("Secret"), "{shown}");

    let client = connect(
        &set,
        config()
            .password("data-Secret-1")
            .sentinel_password("sentinel-Secret-2"),
    )
    .await;
    let shown = format!("{client:?} {:?}", client.config());
    assert!(!shown.contains("Secret"), "{shown}");
    let g = client.get_lock("sentinel:auth").lock().await.unwrap();
    g.unlock().await.unwrap();
    client.shutdown().await;

    // Wrong data password: a typed refusal, no secret in it.
    let err = Client::connect_sentinel(
        MASTER_NAME,
        &urls,
        config()
            .password("wrong-Secret-3")
            .sentinel_password("sentinel-Secret-2")
            .connect_timeout(Duration::from_secs(3)),
    )
    .await
    .unwrap_err();
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains("Secret"), "{shown}");
}

#[tokio::test]
async fn sentinel_arguments_are_checked() {
    for (master, sentinels) in [
        ("", vec!["redis://127.0.0.1:1"]),
        ("m", vec![]),
        ("m", vec!["http://127.0.0.1:1"]),
        ("m", vec!["redis-cluster://127.0.0.1:1"]),
        ("m", vec!["redis://127.0.0.1:1/3"]),
    ] {
        let err = Client::connect_sentinel(master, &sentinels, Config::default())
            .await
            .unwrap_err();
        assert_eq!(
            err.kind(),
            ErrorKind::InvalidArgument,
            "{master} {sentinels:?}: {err}"
        );
    }
}

/// Replica sync is on by default where replicas exist: an acquisition through Sentinel returns
/// only once a replica acknowledged it, so a replica has the hold when it returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_replica_sync_acquisitions_reach_the_replicas() {
    let set = SentinelSet::start();
    let client = connect(&set, config()).await;
    let master = set.master_port();
    let info = set.data_cli(master, &["INFO", "replication"]);
    let replicas: Vec<u16> = info
        .lines()
        .filter(|l| l.starts_with("slave"))
        .filter_map(|l| l.split(',').find_map(|kv| kv.strip_prefix("port=")))
        .filter_map(|p| p.trim().parse().ok())
        .collect();
    assert_eq!(replicas.len(), 2, "{info}");
    let lock = client.get_lock("sentinel:replica-sync");
    let g = lock.try_lock().await.unwrap().expect("acquired");
    let holding = replicas
        .iter()
        .filter(|&&port| {
            set.data_cli(
                port,
                &["HGET", "sentinel:replica-sync", &lock.owner_field()],
            ) == "1"
        })
        .count();
    assert!(
        holding >= 1,
        "a replica has the hold when the acquisition returns"
    );
    let stats = set.data_cli(master, &["INFO", "commandstats"]);
    assert!(stats.contains("cmdstat_wait:"), "a WAIT was sent");
    g.unlock().await.unwrap();
    client.shutdown().await;
}

/// A paused replica (SIGSTOP: it acknowledges nothing) never blocks lock operations while the
/// other replica is healthy: one acknowledgement is all an acquisition waits for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_a_paused_replica_never_blocks_lock_operations() {
    let set = SentinelSet::start();
    // A long sync timeout: an acquisition that waited for the paused replica would take 20 s.
    let client = connect(
        &set,
        config().replicas_sync_timeout(Duration::from_secs(20)),
    )
    .await;
    let master = set.master_port();
    let paused = set
        .servers
        .iter()
        .flatten()
        .find(|s| s.port() != master)
        .expect("a replica");
    let pid = paused.pid().expect("running").to_string();
    let signal = |sig: &str| {
        let ok = std::process::Command::new("kill")
            .args([sig, pid.as_str()])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "kill {sig} {pid}");
    };
    signal("-STOP");
    let started = std::time::Instant::now();
    let outcome = async {
        for i in 0..5 {
            let lock = client.get_lock(&format!("sentinel:paused-replica:{i}"));
            let g = lock.lock().await?;
            g.unlock().await?;
        }
        let fair = client.get_fair_lock("sentinel:paused-replica:fair");
        fair.lock().await?.unlock().await?;
        Ok::<(), redisson_lock::Error>(())
    }
    .await;
    let took = started.elapsed();
    signal("-CONT");
    outcome.unwrap();
    assert!(
        took < Duration::from_secs(10),
        "6 lock+unlock cycles took {took:?} with one of two replicas paused"
    );
    client.shutdown().await;
}

// Issue 23: a hold is in doubt from the master's kill (before the sentinels promote a replica)
// until a renewal on the new master confirms it; meanwhile nobody else gets in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_a_hold_is_in_doubt_from_the_master_kill_until_the_new_master_confirms_it() {
    use redisson_lock::HoldState;
    let mut set = SentinelSet::start();
    let config = config().lock_watchdog_timeout(Duration::from_secs(12));
    let a = connect(&set, config.clone()).await;
    let b = connect(&set, config).await;
    let lock = a.get_lock("sentinel:doubt");
    let field = lock.owner_field().to_owned();
    let guard = lock.lock().await.expect("lock");
    let old = set.master_port();
    // The hold reached the replicas before the kill (so the new master has it).
    replicated(&set, &["HEXISTS", "sentinel:doubt", &field]);
    assert_eq!(guard.state(), HoldState::Held);

    set.kill_port(old);
    let killed = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("in doubt when the master's connection drops");
    let told = killed.elapsed();
    assert_eq!(guard.state(), HoldState::InDoubt);
    let new = set.await_new_master(old, Duration::from_secs(30));
    let failed_over = killed.elapsed();
    assert!(
        told < failed_over,
        "told {told:?}, failover {failed_over:?}"
    );

    let deadline = Instant::now() + Duration::from_secs(20);
    while guard.state() == HoldState::InDoubt && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let confirmed = killed.elapsed();
    assert_eq!(
        guard.state(),
        HoldState::Held,
        "confirmed on the new master"
    );
    assert_eq!(
        set.data_cli(new, &["HEXISTS", "sentinel:doubt", &field])
            .trim(),
        "1"
    );
    println!(
        "in doubt {told:?} after the kill; new master {new} after {failed_over:?}; held again \
         after {confirmed:?}"
    );
    // Nobody else gets in while it is held.
    let other = b.get_lock("sentinel:doubt");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match other.try_lock().await {
            Ok(None) => break,
            Ok(Some(_)) => panic!("another client acquired a held lock after the failover"),
            Err(e) => {
                not_readonly(&e);
                assert!(Instant::now() < deadline, "{e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    guard.unlock().await.expect("unlock on the new master");
    a.shutdown().await;
    b.shutdown().await;
}

/// `SENTINEL FAILOVER` through the first sentinel; waits until `guard` is in doubt (no
/// connection drops in a switchover: only the sentinels' events tell the client), then until
/// every sentinel names the new master. Returns the new master's port and when the doubt came
/// (from the command).
async fn switch_over(
    set: &SentinelSet,
    old: u16,
    guard: &redisson_lock::Guard<redisson_lock::Reentrant>,
) -> (u16, Duration) {
    let reply = set.sentinel_cli(
        set.sentinel_ports()[0],
        &["SENTINEL", "FAILOVER", MASTER_NAME],
    );
    assert_eq!(reply, "OK", "SENTINEL FAILOVER");
    let began = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), guard.lost())
        .await
        .expect("in doubt once the failover begins");
    let told = began.elapsed();
    (set.await_new_master(old, Duration::from_secs(30)), told)
}

/// Waits (at most `within`) until `guard` is held again. There is no event for a hold
/// confirmed again, so its state is looked at every 20 ms.
async fn held_again(
    guard: &redisson_lock::Guard<redisson_lock::Reentrant>,
    within: Duration,
) -> bool {
    let deadline = Instant::now() + within;
    while guard.state() != redisson_lock::HoldState::Held && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    guard.state() == redisson_lock::HoldState::Held
}

/// A `SENTINEL FAILOVER` leaves the old master running, and answering as a master, until the
/// sentinels' next `INFO` poll of it (up to 10 s). A client must not go on working there: its
/// holds are in doubt from the failover's start until the new master confirms them, and its
/// command and subscriber connections move to the new master at the switch, so that what it
/// acquires next is on the master every other client uses, and it hears their unlocks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_a_switchover_moves_the_client_before_the_old_master_is_demoted() {
    use redisson_lock::HoldState;
    let set = SentinelSet::start();
    let config = config().lock_watchdog_timeout(Duration::from_secs(12));
    let a = connect(&set, config.clone()).await;
    let held = a.get_lock("sentinel:split:held");
    let guard = held.lock().await.expect("lock");
    assert_eq!(guard.state(), HoldState::Held);
    let old = set.master_port();

    let began = Instant::now();
    let (new, told) = switch_over(&set, old, &guard).await;
    let switched = began.elapsed();
    assert!(
        held_again(&guard, Duration::from_secs(10)).await,
        "confirmed on the new master (it was replicated before the failover)"
    );
    let confirmed = began.elapsed();

    // The old master still acts as one (the window this test is about): checked again once
    // everything below is, so that all of it happened inside the window.
    let in_window = |when: &str| {
        let role = set.data_cli(old, &["ROLE"]);
        assert!(
            role.starts_with("master"),
            "the old master was demoted {when} ({:?} after the failover began): the window \
             this test is about was missed, it shows nothing; role {role:?}",
            began.elapsed()
        );
    };
    in_window("before the checks");
    let b = connect(&set, config).await;
    let next = a.get_lock("sentinel:split:next");
    let field = next.owner_field().to_owned();
    let g = next.try_lock().await.expect("try_lock").expect("free");
    assert_eq!(
        set.data_cli(new, &["HEXISTS", "sentinel:split:next", &field])
            .trim(),
        "1",
        "acquired on the new master"
    );
    assert_eq!(
        set.data_cli(old, &["EXISTS", "sentinel:split:next"]).trim(),
        "0",
        "nothing written on the old master"
    );
    assert!(
        b.get_lock("sentinel:split:next")
            .try_lock()
            .await
            .expect("try_lock")
            .is_none(),
        "one holder"
    );
    g.unlock().await.expect("unlock");
    // `a` listens on the new master: `b`'s unlock there wakes `a`'s waiter at once.
    let woke = lock_wait_wake(&b, &a, "sentinel:split:wake").await;
    in_window("during the checks");
    println!(
        "switchover {old} -> {new}: in doubt after {told:?}, switched after {switched:?}, \
         held again after {confirmed:?}; the old master still a master {:?} after the failover \
         began, when the checks were done; waiter woke {woke:?} after the release",
        began.elapsed()
    );
    guard.unlock().await.expect("unlock on the new master");
    a.shutdown().await;
    b.shutdown().await;
}

/// A sentinel that has not caught up with a switchover (a stand-in here, first in the client's
/// list, still naming the old master, as one in TILT mode or cut off from the others would)
/// makes the client's discovery reach the old master again, which stays a master for seconds
/// after `SENTINEL FAILOVER`. No hold may be confirmed there: the hold stays in doubt until
/// the connections reach the master most sentinels name, and is confirmed then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_a_stale_first_sentinel_keeps_holds_in_doubt_until_the_named_master_is_reached() {
    use common::fake_sentinel::FakeSentinel;
    use redisson_lock::HoldState;
    let set = SentinelSet::start();
    let old = set.master_port();
    let stale = FakeSentinel::start(("127.0.0.1".into(), old));
    let mut urls = vec![stale.url()];
    urls.extend(set.sentinel_urls());
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let config = config()
        .connect_timeout(Duration::from_secs(1))
        .lock_watchdog_timeout(Duration::from_secs(30));
    let a = Client::connect_sentinel(MASTER_NAME, &urls, config)
        .await
        .expect("connect through the sentinels");
    let lock = a.get_lock("sentinel:stale:held");
    let guard = lock.lock().await.expect("lock");
    assert_eq!(guard.state(), HoldState::Held);

    let (new, _) = switch_over(&set, old, &guard).await;
    let switched = Instant::now();
    let asked_at_switch = stale.asked();
    // The stand-in still names the old master, which still acts as one (for ~10 s): whatever
    // the client reaches, nothing confirms the hold. The connect timeout (1 s) bounds each
    // move, and every sentinel's announcement of the switch starts one: after the last, the
    // client used to give up and confirm the hold on the master it had reached.
    let mut looked_while_old_was_master = 0;
    let mut last_look = Duration::ZERO;
    while switched.elapsed() < Duration::from_secs(6) {
        let at = switched.elapsed();
        if !set.data_cli(old, &["ROLE"]).starts_with("master") {
            break;
        }
        looked_while_old_was_master += 1;
        last_look = at;
        assert_ne!(
            guard.state(),
            HoldState::Held,
            "confirmed {:?} after the switch, while a sentinel names another master",
            switched.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The window was there and looked into: the old master still a master for 4 s after the
    // switch (past every sentinel's announcement and its 1 s move: the defect confirmed the
    // hold there 3.1 s after the switch), the hold never confirmed meanwhile (above), and the
    // client's discovery asked the stand-in again after the switch (so it was sent to the old
    // master's address).
    assert!(
        last_look >= Duration::from_secs(4),
        "the old master was demoted {last_look:?} after the switch ({looked_while_old_was_master} \
         looks): the window this test is about was missed, it shows nothing"
    );
    let asked_after_switch = stale.asked() - asked_at_switch;
    assert!(
        asked_after_switch > 0,
        "the stand-in was not asked after the switch (asked {asked_at_switch} times before)"
    );
    // It catches up: the client reaches the new master and the hold is confirmed there.
    stale.name(("127.0.0.1".into(), new));
    let caught_up = Instant::now();
    assert!(
        held_again(&guard, Duration::from_secs(10)).await,
        "confirmed on the new master"
    );
    let confirmed = caught_up.elapsed();
    let next = a.get_lock("sentinel:stale:next");
    let field = next.owner_field().to_owned();
    let g = next.try_lock().await.expect("try_lock").expect("free");
    assert_eq!(
        set.data_cli(new, &["HEXISTS", "sentinel:stale:next", &field])
            .trim(),
        "1",
        "acquired on the new master"
    );
    println!(
        "switchover {old} -> {new}: {looked_while_old_was_master} looks in doubt while the old \
         master was still one; the stand-in asked {asked_after_switch} times after the switch; \
         held again {confirmed:?} after the stale sentinel caught up"
    );
    g.unlock().await.expect("unlock");
    guard.unlock().await.expect("unlock on the new master");
    a.shutdown().await;
}

/// Semaphore, permit-expirable semaphore and count-down latch waits through the sentinels,
/// each woken within 300 ms of its message (acquisitions synced to the replicas).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_synchronizers_wait_and_wake_up() {
    let set = SentinelSet::start();
    let a = connect(&set, config()).await;
    let b = connect(&set, config()).await;
    common::synchronizers_wait_wake(&a, &b, "sentinel:sync", Duration::from_millis(300)).await;
    a.shutdown().await;
    b.shutdown().await;
}

/// The non-reentrant, non-reentrant fair and group locks through Sentinel: the holder's
/// re-entry refused, a waiter in another client woken by the release, every acquisition
/// replica-synced (a replica has the hold when it returns; `WAIT` sent), and lock events of the
/// master's keyspace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_non_reentrant_and_group_locks_wake_sync_and_report_events() {
    let set = SentinelSet::start();
    let a = connect(&set, config()).await;
    let b = connect(&set, config()).await;
    let master = set.master_port();
    set.data_cli(master, &["CONFIG", "SET", "notify-keyspace-events", "Egx"]);
    let mut events = a.get_lock("sentinel:nr").events().await.unwrap();

    // Non-reentrant: refused re-entry, then a waiter in b woken by a's release.
    let nr = a.get_non_reentrant_lock("sentinel:nr");
    let g = nr.lock().await.unwrap();
    assert_eq!(nr.try_lock().await.unwrap_err().kind(), ErrorKind::Reentry);
    let waiter = {
        let lock = b.get_non_reentrant_lock("sentinel:nr");
        tokio::spawn(async move {
            let g = lock.try_lock_for(Duration::from_secs(20)).await?;
            Ok::<_, Error>((Instant::now(), g))
        })
    };
    // The waiter is in (its subscription made or being made: it attempts again once it is).
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            b.stats()
                .channel_waiters("redisson_lock__channel:{sentinel:nr}")
                > 0
        })
        .await
    );
    let released = Instant::now();
    g.unlock().await.unwrap();
    let got = woke_within(waiter, released, common::WOKEN_BY_MESSAGE).await;
    assert_eq!(
        tokio::time::timeout(Duration::from_secs(5), events.next())
            .await
            .unwrap(),
        Some(redisson_lock::LockEvent::Deleted)
    );
    got.unwrap().unlock().await.unwrap();

    // Non-reentrant fair: refused re-entry, nothing queued.
    let nrf = a.get_non_reentrant_fair_lock("sentinel:nrf");
    let g = nrf.lock().await.unwrap();
    assert_eq!(
        nrf.try_lock_for(Duration::from_secs(1))
            .await
            .unwrap_err()
            .kind(),
        ErrorKind::Reentry
    );
    assert_eq!(
        set.data_cli(master, &["EXISTS", "redisson_lock_queue:{sentinel:nrf}"]),
        "0"
    );
    g.unlock().await.unwrap();

    // Group: a's {x, y}, b waits for {y}; replica-synced acquisition.
    let group = a.get_group_lock("sentinel:group", ["x", "y"]);
    let g = group.lock().await.unwrap();
    let field = redisson_lock::GroupLock::value_field("x");
    let info = set.data_cli(master, &["INFO", "replication"]);
    let replicas: Vec<u16> = info
        .lines()
        .filter(|l| l.starts_with("slave"))
        .filter_map(|l| l.split(',').find_map(|kv| kv.strip_prefix("port=")))
        .filter_map(|p| p.trim().parse().ok())
        .collect();
    let holding = replicas
        .iter()
        .filter(|&&port| {
            set.data_cli(port, &["HGET", "sentinel:group", &field]) == group.owner_field()
        })
        .count();
    assert!(holding >= 1, "a replica has the group hold when it returns");
    assert!(set
        .data_cli(master, &["INFO", "commandstats"])
        .contains("cmdstat_wait:"));
    let waiter = {
        let lock = b.get_group_lock("sentinel:group", ["y"]);
        tokio::spawn(async move {
            let g = lock.try_lock_for(Duration::from_secs(20)).await?;
            Ok::<_, Error>((Instant::now(), g))
        })
    };
    // The waiter is in (its subscription made or being made: it attempts again once it is).
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            b.stats()
                .channel_waiters("redisson_lock__channel:{sentinel:group}")
                > 0
        })
        .await
    );
    let released = Instant::now();
    g.unlock().await.unwrap();
    let got = woke_within(waiter, released, common::WOKEN_BY_MESSAGE).await;
    got.unwrap().unlock().await.unwrap();
    a.shutdown().await;
    b.shutdown().await;
}

/// `kill <sig> <pid>` of a server this test started.
fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(ok, "kill {sig} {pid}");
}

/// Issue 29, availability after a failover, with one master and one replica (a common
/// Sentinel set-up). First, what the chaos runner's `lag-kill` taught stays: the master's only
/// replica stops and its link drops, no failover: the master had a replica, so acquisitions
/// still want one acknowledgement and fail `NotReplicated`, leaving nothing, until it is back.
/// Then the master is killed for good and the replica promoted: the new master has no replica
/// and never had one; it is judged by its own replicas, so the client locks there within a
/// few seconds of the switch (it used to refuse every acquisition `NotReplicated` for 10
/// minutes: the replicas seen on the old master were remembered for the whole deployment).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_one_replica_lost_keeps_wanting_an_ack_and_a_promoted_lone_master_locks_at_once() {
    let mut set = SentinelSet::start_with_replicas(1);
    let config = config().replicas_sync_timeout(Duration::from_millis(300));
    let client = connect(&set, config).await;
    let old = set.master_port();
    let replica = set.servers[1].as_ref().expect("the replica");
    let (replica_port, replica_pid) = (replica.port(), replica.pid().expect("running"));
    let lock = client.get_lock("sentinel:one-replica");
    let field = lock.owner_field().to_owned();
    let g = lock.try_lock().await.unwrap().expect("free");
    assert_eq!(
        set.data_cli(replica_port, &["HGET", "sentinel:one-replica", &field]),
        "1",
        "synced: the replica has the hold when the acquisition returns"
    );
    g.unlock().await.unwrap();

    // The replica stops and the master drops its link: no replica online, no failover.
    signal(replica_pid, "-STOP");
    set.data_cli(old, &["CLIENT", "KILL", "TYPE", "replica"]);
    sentinel_rig::wait_for("no replica online", Duration::from_secs(10), || {
        !set.data_cli(old, &["INFO", "replication"])
            .contains("state=online")
    });
    // Twice: the first missing acknowledgement makes the client read the count again.
    for _ in 0..2 {
        match lock.try_lock().await {
            Err(Error::NotReplicated { wanted, acked, .. }) => assert_eq!((wanted, acked), (1, 0)),
            other => panic!("expected NotReplicated, got {other:?}"),
        }
        assert_eq!(set.data_cli(old, &["EXISTS", "sentinel:one-replica"]), "0");
    }
    signal(replica_pid, "-CONT");
    sentinel_rig::wait_for("the replica online again", Duration::from_secs(10), || {
        set.data_cli(old, &["INFO", "replication"])
            .contains("state=online")
    });
    let g = lock
        .try_lock_for(Duration::from_secs(5))
        .await
        .expect("synced again")
        .expect("free");
    g.unlock().await.unwrap();

    // The master dies for good; the replica is promoted and has no replica.
    set.kill_port(old);
    let killed = Instant::now();
    let new = set.await_new_master(old, Duration::from_secs(30));
    assert_eq!(new, replica_port);
    let switched = Instant::now();
    let failed_over = killed.elapsed();
    let (g, errors) = first_lock_after(&lock, switched, Duration::from_secs(15)).await;
    let first_ok = switched.elapsed();
    assert_eq!(
        set.data_cli(new, &["HGET", "sentinel:one-replica", &field]),
        "1",
        "held on the new master"
    );
    println!(
        "master {old} killed; {new} promoted after {failed_over:?}; first acquisition \
         {first_ok:?} after the switch ({} errors before: {:?})",
        errors.len(),
        errors.iter().rev().take(5).collect::<Vec<_>>()
    );
    assert!(
        first_ok < Duration::from_secs(10),
        "locked {first_ok:?} after the switch"
    );
    g.unlock().await.unwrap();
    client.shutdown().await;
}

/// Issue 29, availability after a graceful failover (`SENTINEL FAILOVER`) of one master and
/// one replica. The old master lives on and stays a master until the sentinels reconfigure it
/// (about 10 s later): the sentinels already list it as the promoted master's replica and it
/// accepts connections, but it can acknowledge nothing before it has become a replica and
/// synced. A client that waited for it refused every acquisition `NotReplicated` for those
/// 10 s (the chaos runner's Sentinel 1 + 1 row); the sentinels report its role (`role-reported`
/// `master`), so it is not waited for, and the client locks within a few seconds of the switch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_graceful_failover_of_one_master_and_one_replica_locks_within_seconds() {
    let set = SentinelSet::start_with_replicas(1);
    let config = config().replicas_sync_timeout(Duration::from_millis(300));
    let client = connect(&set, config).await;
    let old = set.master_port();
    let lock = client.get_lock("sentinel:graceful");
    let field = lock.owner_field().to_owned();
    let g = lock.try_lock().await.unwrap().expect("free");
    g.unlock().await.unwrap();
    let sentinel = set.sentinel_ports()[0];
    let reply = set.sentinel_cli(sentinel, &["SENTINEL", "FAILOVER", MASTER_NAME]);
    assert!(reply.contains("OK"), "SENTINEL FAILOVER: {reply}");
    let new = set.await_new_master(old, Duration::from_secs(30));
    let switched = Instant::now();
    let (g, errors) = first_lock_after(&lock, switched, Duration::from_secs(30)).await;
    let first_ok = switched.elapsed();
    // The case under test: the old master had not become a replica yet when the client locked
    // (otherwise the window was missed and the test proves nothing).
    let old_role = set.data_cli(old, &["ROLE"]);
    assert_eq!(
        set.data_cli(new, &["HGET", "sentinel:graceful", &field]),
        "1",
        "held on the new master"
    );
    println!(
        "graceful failover {old} -> {new}: first acquisition {first_ok:?} after the switch \
         ({} errors before: {:?}); the old master's role then: {}",
        errors.len(),
        errors.iter().rev().take(5).collect::<Vec<_>>(),
        old_role.lines().next().unwrap_or("")
    );
    assert!(
        first_ok < Duration::from_secs(5),
        "locked {first_ok:?} after the switch"
    );
    assert!(
        old_role.starts_with("master") || first_ok < Duration::from_secs(1),
        "the window was missed: the old master was already a replica ({old_role:?})"
    );
    g.unlock().await.unwrap();
    client.shutdown().await;
}

/// The first `try_lock` of `lock` that succeeds after a failover switched at `switched`
/// (retried every 100 ms; no error may be a READONLY), and the kinds of the errors before it;
/// fails when `within` passes first.
async fn first_lock_after<K: redisson_lock::Kind>(
    lock: &redisson_lock::Lock<K>,
    switched: Instant,
    within: Duration,
) -> (redisson_lock::Guard<K>, Vec<redisson_lock::ErrorKind>) {
    let mut errors = Vec::new();
    loop {
        match lock.try_lock().await {
            Ok(Some(g)) => return (g, errors),
            Ok(None) => panic!("nobody else holds it"),
            Err(e) => {
                not_readonly(&e);
                errors.push(e.kind());
                assert!(
                    switched.elapsed() < within,
                    "no acquisition {within:?} after the switch: {:?}",
                    errors.iter().rev().take(5).collect::<Vec<_>>()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// One real master, named by two stand-in sentinels the test makes announce failover events
/// (`leader` begins them), and a client watching both: the client's failover handling is
/// driven exactly, on a live server, without a real failover's timing.
struct Announced {
    server: common::RedisServer,
    leader: common::fake_sentinel::FakeSentinel,
    other: common::fake_sentinel::FakeSentinel,
    client: Client,
}

impl Announced {
    async fn start() -> Self {
        use common::fake_sentinel::FakeSentinel;
        let server = common::RedisServer::start();
        let master = ("127.0.0.1".to_owned(), server.port());
        let leader = FakeSentinel::start(master.clone());
        let other = FakeSentinel::start(master);
        let urls = [leader.url(), other.url()];
        let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
        // A failover under way holds each command at most one command timeout (0.5 s); the
        // cap on an attempt without news (one watchdog timeout) is longer than the test.
        let config = config()
            .timeout(Duration::from_millis(500))
            .lock_watchdog_timeout(Duration::from_secs(20));
        let client = Client::connect_sentinel(MASTER_NAME, &urls, config)
            .await
            .expect("connect through the stand-in sentinels");
        let rig = Self {
            server,
            leader,
            other,
            client,
        };
        sentinel_rig::wait_for(
            "the client watching both sentinels",
            Duration::from_secs(10),
            || {
                rig.leader.subscribed("+try-failover") > 0
                    && rig.other.subscribed("+reset-master") > 0
            },
        );
        rig
    }

    /// `master <name> <ip> <port>`: the payload of an event about the master.
    fn about_master(&self) -> String {
        format!("master {MASTER_NAME} 127.0.0.1 {}", self.server.port())
    }

    /// The leader begins a failover of the master.
    fn begin(&self) {
        assert_eq!(
            self.leader.publish("+try-failover", &self.about_master()),
            1
        );
    }
}

/// Waits (at most `within`) until `state` is `Held`.
async fn becomes_held(state: impl Fn() -> redisson_lock::HoldState, within: Duration) -> bool {
    let until = Instant::now() + within;
    while state() != redisson_lock::HoldState::Held && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    state() == redisson_lock::HoldState::Held
}

/// Whether `state` stays other than `Held` for `during` (looked at every 20 ms).
async fn never_held(state: impl Fn() -> redisson_lock::HoldState, during: Duration) -> bool {
    let until = Instant::now() + during;
    while Instant::now() < until {
        if state() == redisson_lock::HoldState::Held {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

/// Issue 29, 6c: a `+reset-master` of a sentinel that is not replacing the master, heard while
/// another sentinel's failover is under way, must not end that failover on the master being
/// replaced (the holds were confirmed there: the client took the reset for "ask the sentinels
/// again", they still named the old master, and it ended the failover there). The reset of the
/// sentinel that was replacing it does end its attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_a_reset_sentinel_does_not_end_a_failover_under_way() {
    use redisson_lock::HoldState;
    let rig = Announced::start().await;
    let guard = rig.client.get_lock("sentinel:reset").lock().await.unwrap();
    assert_eq!(guard.state(), HoldState::Held);
    rig.begin();
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("in doubt once the failover begins");

    assert_eq!(rig.other.publish("+reset-master", &rig.about_master()), 1);
    assert!(
        never_held(|| guard.state(), Duration::from_secs(2)).await,
        "confirmed on the master being replaced after another sentinel's reset"
    );
    assert_eq!(guard.state(), HoldState::InDoubt);

    // The sentinel that was replacing it is reset: its attempt is gone, the failover ends on
    // the master the sentinels name, and the hold is confirmed there.
    assert_eq!(rig.leader.publish("+reset-master", &rig.about_master()), 1);
    assert!(
        becomes_held(|| guard.state(), Duration::from_secs(5)).await,
        "confirmed once no attempt is left"
    );
    guard.unlock().await.unwrap();
    rig.client.shutdown().await;
}

/// Issue 29, defect 4: a `MultiLock` taken with a lease and a wait during a Sentinel failover
/// reports its parts' doubt, as a plain leased guard taken at the same moment does (its parts
/// are taken with a longer lease, then set to the lease: that used to give each part a fresh,
/// held state). Once the failover ends, the parts are checked and held again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_a_leased_multi_lock_taken_during_a_failover_is_in_doubt() {
    use redisson_lock::{HoldState, MultiLock};
    let rig = Announced::start().await;
    let c = &rig.client;
    let multi = MultiLock::new(vec![
        c.get_lock("sentinel:multi:a").into(),
        c.get_lock("sentinel:multi:b").into(),
    ])
    .unwrap();
    // Each command waits out the failover's bound (0.5 s): a wait long enough for them all.
    let (wait, lease) = (Duration::from_secs(10), Duration::from_secs(15));
    rig.begin();
    // The failover is under way once a hold taken before it is in doubt.
    let before = c.get_lock("sentinel:multi:before").lock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), before.lost())
        .await
        .expect("in doubt once the failover begins");

    let plain = c
        .get_lock("sentinel:multi:plain")
        .try_lock_with_lease(wait, lease)
        .await
        .unwrap()
        .expect("free");
    let g = multi
        .try_lock_with_lease(wait, lease)
        .await
        .unwrap()
        .expect("free");
    let parts: Vec<HoldState> = g.parts().iter().map(|p| p.state()).collect();
    assert_eq!(plain.state(), HoldState::InDoubt, "the plain leased guard");
    assert_eq!(
        (g.state(), parts.as_slice()),
        (HoldState::InDoubt, [HoldState::InDoubt; 2].as_slice()),
        "the multi-lock, as the plain guard"
    );
    assert!(g.is_lost());

    // The failover is given up: checked on the master, every part is held again, set to the
    // lease (taken with twice the wait), and never valid longer than its key lives.
    assert_eq!(
        rig.leader
            .publish("-failover-abort-not-elected", &rig.about_master()),
        1
    );
    assert!(becomes_held(|| g.state(), Duration::from_secs(5)).await);
    assert!(becomes_held(|| plain.state(), Duration::from_secs(5)).await);
    for part in g.parts() {
        let pttl: u64 = sentinel_rig::cli(rig.server.port(), &["PTTL", part.name()])
            .parse()
            .expect("a TTL");
        let left = part.valid_until().saturating_duration_since(Instant::now());
        assert!(
            pttl <= lease.as_millis() as u64 && left <= Duration::from_millis(pttl),
            "{}: valid {left:?} more, PTTL {pttl} ms, lease {lease:?}",
            part.name()
        );
    }
    g.unlock().await.unwrap();
    plain.unlock().await.unwrap();
    before.unlock().await.unwrap();
    c.shutdown().await;
}

/// Issue 29 and the chaos runner's `lag-kill`: a master promoted by a failover has no replica
/// online until the others attach to it. While one the sentinels list for it is alive (it
/// will attach), an acquisition there still wants one acknowledgement: granted unsynced, it
/// would be lost if the promoted master died before the replica attached (seen: a promoted
/// master killed 3 s later, its replicas never attached). Here one replica cannot attach
/// (wrong `masterauth`, and never promoted): acquisitions on the promoted master fail
/// `NotReplicated`, leaving nothing, until it does; then they are synced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_a_promoted_master_wants_an_ack_while_a_live_replica_is_not_attached() {
    const PASSWORD: &str = "data-pass-29";
    let mut set = SentinelSet::start_with(Auth {
        data: Some(PASSWORD.into()),
        sentinel: None,
    });
    let config = config()
        .password(PASSWORD)
        .replicas_sync_timeout(Duration::from_millis(300));
    let client = connect(&set, config).await;
    let old = set.master_port();
    let ports: Vec<u16> = set.servers.iter().flatten().map(|s| s.port()).collect();
    let (promoted, blocked) = (ports[1], ports[2]);
    for (name, value) in [("replica-priority", "0"), ("masterauth", "wrong")] {
        assert_eq!(set.data_cli(blocked, &["CONFIG", "SET", name, value]), "OK");
    }
    let lock = client.get_lock("sentinel:attaching");
    let field = lock.owner_field().to_owned();
    lock.try_lock()
        .await
        .unwrap()
        .expect("free")
        .unlock()
        .await
        .unwrap();

    set.kill_port(old);
    assert_eq!(set.await_new_master(old, Duration::from_secs(30)), promoted);
    let switched = Instant::now();
    let (mut refused, mut errors) = (0, Vec::new());
    while switched.elapsed() < Duration::from_secs(2) || refused < 2 {
        assert!(
            !set.data_cli(promoted, &["INFO", "replication"])
                .contains("state=online"),
            "the blocked replica attached"
        );
        match lock.try_lock().await {
            Err(Error::NotReplicated { .. }) => refused += 1,
            Err(e) => errors.push(e.kind()),
            Ok(g) => panic!(
                "acquired unsynced {:?} after the switch, a live replica not attached: {g:?}",
                switched.elapsed()
            ),
        }
        assert_eq!(
            set.data_cli(promoted, &["EXISTS", "sentinel:attaching"]),
            "0"
        );
        assert!(switched.elapsed() < Duration::from_secs(15), "{errors:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    assert_eq!(
        set.data_cli(blocked, &["CONFIG", "SET", "masterauth", PASSWORD]),
        "OK"
    );
    let g = lock
        .try_lock_for(Duration::from_secs(10))
        .await
        .expect("synced once the replica attached")
        .expect("free");
    assert_eq!(
        set.data_cli(blocked, &["HGET", "sentinel:attaching", &field]),
        "1",
        "the replica has the hold when the acquisition returns"
    );
    println!(
        "{refused} acquisitions refused NotReplicated in the first {:?} after the switch \
         (other errors: {errors:?}); synced after the replica attached",
        Duration::from_secs(2)
    );
    g.unlock().await.unwrap();
    client.shutdown().await;
}

/// Issue 38, finding 4: a failover under way keeps every hold in doubt, a new one too, while
/// the client's connections still reach the master being replaced. `run_as_leader` waits in
/// its term (the body stopped) instead of campaigning again at round-trip speed (each campaign
/// a new term, an unlock message to every campaigner and watcher), and once the failover is
/// given up and the hold confirmed, the body starts again in the same term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_run_as_leader_waits_out_a_failover_in_its_term() {
    let rig = Announced::start().await;
    let mut leading = common::Leading::start(rig.client.get_election("sentinel:leader"));
    let term = leading.next_start(Duration::from_secs(10)).await;
    let spent = || -> u64 {
        sentinel_rig::cli(
            rig.server.port(),
            &["GET", "redisson_lock_token:{sentinel:leader}"],
        )
        .parse()
        .expect("a token counter")
    };
    rig.begin();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        spent(),
        term,
        "terms spent while the failover was under way"
    );
    assert!(
        !leading.starts_within(Duration::ZERO).await,
        "the body ran while in doubt"
    );

    assert_eq!(
        rig.leader
            .publish("-failover-abort-not-elected", &rig.about_master()),
        1
    );
    assert_eq!(
        leading.next_start(Duration::from_secs(10)).await,
        term,
        "the same term, confirmed"
    );
    assert_eq!(spent(), term);
    drop(leading);
    rig.client.shutdown().await;
}

/// A real failover (the master killed, a replica promoted): the leader's term is in doubt from
/// the kill, its body stops, and it starts again once: in the same term when the new master has
/// the hold (it was replicated before the kill), and the terms spent stay bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_run_as_leader_across_a_master_kill_spends_no_term() {
    let mut set = SentinelSet::start();
    let config = config().lock_watchdog_timeout(Duration::from_secs(12));
    let client = connect(&set, config).await;
    let mut leading = common::Leading::start(client.get_election("sentinel:elect"));
    let term = leading.next_start(Duration::from_secs(10)).await;
    let old = set.master_port();
    replicated(&set, &["EXISTS", "sentinel:elect"]);
    set.kill_port(old);
    let new = set.await_new_master(old, Duration::from_secs(30));
    let again = leading.next_start(Duration::from_secs(30)).await;
    assert_eq!(again, term, "the same term, confirmed on the new master");
    let spent: u64 = set
        .data_cli(new, &["GET", "redisson_lock_token:{sentinel:elect}"])
        .trim()
        .parse()
        .expect("a token counter");
    assert_eq!(spent, term, "no term spent across the failover");
    assert!(
        !leading.starts_within(Duration::from_secs(2)).await,
        "the body started once more, not twice"
    );
    drop(leading);
    client.shutdown().await;
}

/// Waits (at most 10 s) until every replica of the current master answers `1` to `query`.
fn replicated(set: &SentinelSet, query: &[&str]) {
    let old = set.master_port();
    let replicas: Vec<u16> = set
        .servers
        .iter()
        .flatten()
        .map(|s| s.port())
        .filter(|&p| p != old)
        .collect();
    sentinel_rig::wait_for("replicated", Duration::from_secs(10), || {
        replicas
            .iter()
            .all(|&p| set.data_cli(p, query).trim() == "1")
    });
}
