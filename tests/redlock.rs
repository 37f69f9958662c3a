//! MultiLock and RedLock over independent redis-server processes (5 masters for RedLock),
//! with nodes killed or frozen (SIGSTOP) by PID.

use redisson_lock_test_kit as common;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use common::{Admin, RedisServer};
use fred::interfaces::KeysInterface;
use redisson_lock::{Client, Config, MultiLock, RedLock, RedLockOptions};
use tokio::time::Instant;

fn signal(server: &RedisServer, sig: &str) {
    let pid = server.pid().expect("running").to_string();
    let ok = std::process::Command::new("kill")
        .args([sig, &pid])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

struct Nodes {
    servers: Vec<RedisServer>,
}

impl Nodes {
    fn start(n: usize) -> Self {
        Nodes {
            servers: (0..n).map(|_| RedisServer::start()).collect(),
        }
    }

    /// One client per node (a "RedLock client" in the algorithm's sense).
    async fn clients(&self) -> Vec<Client> {
        let cfg = Config::default().timeout(Duration::from_millis(1000));
        let mut out = Vec::new();
        for s in &self.servers {
            out.push(Client::connect(&s.url(), cfg.clone()).await.unwrap());
        }
        out
    }

    async fn key_exists_on(&self, i: usize, key: &str) -> bool {
        Admin::connect(&self.servers[i].url())
            .await
            .exists(key)
            .await
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for s in &self.servers {
            if s.pid().is_some() {
                let _ = std::process::Command::new("kill")
                    .args(["-CONT", &s.pid().unwrap().to_string()])
                    .status();
            }
        }
    }
}

fn redlock(clients: &[Client], name: &str, opts: RedLockOptions) -> RedLock {
    RedLock::with_options(
        clients.iter().map(|c| c.get_lock(name).into()).collect(),
        opts,
    )
    .unwrap()
}

fn fast() -> RedLockOptions {
    RedLockOptions::default()
        .node_timeout(Duration::from_millis(50))
        .retry_delay(Duration::from_millis(20), Duration::from_millis(60))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_five_up_acquire_with_validity_and_exclude_a_second_client() {
    let nodes = Nodes::start(5);
    let c1 = nodes.clients().await;
    let c2 = nodes.clients().await;
    let lease = Duration::from_secs(10);
    let a = redlock(&c1, "rl", fast());
    assert_eq!(a.quorum(), 3);
    let started = Instant::now();
    let g = a
        .try_lock_with_lease(Duration::ZERO, lease)
        .await
        .unwrap()
        .expect("acquired");
    assert_eq!(g.acquired_parts(), 5);
    let validity = g.validity();
    assert!(
        validity > Duration::from_millis(9_000) && validity <= lease,
        "{validity:?}"
    );
    assert!(
        g.valid_until() <= started + lease,
        "validity never beyond the earliest expiry"
    );
    for i in 0..5 {
        assert!(nodes.key_exists_on(i, "rl").await);
    }
    let b = redlock(&c2, "rl", fast());
    assert!(b
        .try_lock_with_lease(Duration::from_millis(300), lease)
        .await
        .unwrap()
        .is_none());
    g.unlock().await.unwrap();
    for i in 0..5 {
        assert!(!nodes.key_exists_on(i, "rl").await);
    }
    let g = b
        .try_lock_with_lease(Duration::ZERO, lease)
        .await
        .unwrap()
        .expect("free now");
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_of_five_down_still_acquire_three_down_fail_and_leave_no_key() {
    let mut nodes = Nodes::start(5);
    let clients = nodes.clients().await;
    let lock = redlock(&clients, "rl", fast());
    nodes.servers[0].kill();
    signal(&nodes.servers[1], "-STOP");
    let started = Instant::now();
    let g = lock
        .try_lock_with_lease(Duration::from_secs(2), Duration::from_secs(10))
        .await
        .unwrap()
        .expect("a quorum of 3 remains");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(g.acquired_parts(), 3);
    g.unlock().await.unwrap();

    signal(&nodes.servers[2], "-STOP");
    let wait = Duration::from_millis(800);
    let started = Instant::now();
    let r = lock
        .try_lock_with_lease(wait, Duration::from_secs(10))
        .await
        .unwrap();
    let took = started.elapsed();
    assert!(r.is_none());
    assert!(
        took >= wait && took < wait + Duration::from_millis(500),
        "{took:?}"
    );
    for i in [3, 4] {
        assert!(
            !nodes.key_exists_on(i, "rl").await,
            "live node {i} keeps no key"
        );
    }
    signal(&nodes.servers[1], "-CONT");
    signal(&nodes.servers[2], "-CONT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_frozen_mid_acquire_does_not_stretch_the_round() {
    let nodes = Nodes::start(5);
    let clients = nodes.clients().await;
    let lock = redlock(&clients, "rl", fast());
    signal(&nodes.servers[4], "-STOP");
    for _ in 0..5 {
        let started = Instant::now();
        let g = lock
            .try_lock_with_lease(Duration::ZERO, Duration::from_secs(10))
            .await
            .unwrap()
            .expect("four nodes answer");
        let took = started.elapsed();
        // One round: bounded by the 50 ms node timeout, not by the 1 s command timeout.
        assert!(took < Duration::from_millis(400), "{took:?}");
        g.unlock().await.unwrap();
    }
    signal(&nodes.servers[4], "-CONT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_shorter_than_the_acquisition_is_a_failure_and_every_part_is_released() {
    let nodes = Nodes::start(5);
    let clients = nodes.clients().await;
    // The frozen node makes the round last its whole 400 ms node timeout, longer than the lease.
    let opts = fast().node_timeout(Duration::from_millis(400));
    let lock = redlock(&clients, "rl", opts);
    signal(&nodes.servers[0], "-STOP");
    let admins: Vec<Admin> = futures::future::join_all(
        nodes.servers[1..]
            .iter()
            .map(|s| Admin::connect_url(s.url())),
    )
    .await;
    for a in &admins {
        a.reset_stats().await;
    }
    let r = lock
        .try_lock_with_lease(Duration::ZERO, Duration::from_millis(300))
        .await
        .unwrap();
    assert!(r.is_none(), "validity <= 0 must be reported as failure");
    for (i, a) in admins.iter().enumerate() {
        assert!(!a.exists("rl").await, "node {} still locked", i + 1);
        // acquire + release reached every live node.
        assert!(
            a.command_calls("evalsha").await >= 2,
            "node {} not released",
            i + 1
        );
    }
    signal(&nodes.servers[0], "-CONT");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_mutual_exclusion_with_a_node_killed_mid_run() {
    let mut nodes = Nodes::start(5);
    let observer = RedisServer::start();
    let c1 = nodes.clients().await;
    let c2 = nodes.clients().await;
    let inside = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for t in 0..4 {
        let clients = if t % 2 == 0 { c1.clone() } else { c2.clone() };
        let (inside, done) = (inside.clone(), done.clone());
        let obs = Admin::connect(&observer.url()).await;
        tasks.push(tokio::spawn(async move {
            let lock = redlock(&clients, "rl", fast());
            for _ in 0..40 {
                let g = lock
                    .try_lock_with_lease(Duration::from_secs(20), Duration::from_secs(5))
                    .await
                    .unwrap()
                    .expect("acquired within the wait");
                assert!(!g.is_lost());
                assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                let v: Option<i64> = obs.redis.get("counter").await.unwrap();
                let _: () = obs
                    .redis
                    .set("counter", v.unwrap_or(0) + 1, None, None, false)
                    .await
                    .unwrap();
                inside.fetch_sub(1, Ordering::SeqCst);
                done.fetch_add(1, Ordering::SeqCst);
                g.unlock().await.unwrap();
            }
        }));
    }
    assert!(
        common::eventually(Duration::from_secs(60), || async {
            done.load(Ordering::SeqCst) >= 40
        })
        .await
    );
    nodes.servers[2].kill();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .unwrap()
            .unwrap();
    }
    let obs = Admin::connect(&observer.url()).await;
    let n: i64 = obs.redis.get("counter").await.unwrap();
    assert_eq!(n, 160);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multilock_failed_attempt_leaves_no_part_locked() {
    let nodes = Nodes::start(3);
    let clients = nodes.clients().await;
    let multi = MultiLock::new(
        clients
            .iter()
            .map(|c| {
                c.get_lock_with_owner("ml", redisson_lock::Owner::new())
                    .into()
            })
            .collect(),
    )
    .unwrap();
    let blocker = clients[1]
        .get_lock_with_owner("ml", redisson_lock::Owner::new())
        .lock()
        .await
        .unwrap();
    assert!(multi.try_lock().await.unwrap().is_none());
    assert!(!nodes.key_exists_on(0, "ml").await);
    assert!(!nodes.key_exists_on(2, "ml").await);
    let started = Instant::now();
    assert!(multi
        .try_lock_with_lease(Duration::from_millis(500), Duration::from_secs(5))
        .await
        .unwrap()
        .is_none());
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(!nodes.key_exists_on(0, "ml").await);
    assert!(!nodes.key_exists_on(2, "ml").await);
    blocker.unlock().await.unwrap();

    // Redisson testLockUnlock and testMultiThreads.
    let g = multi
        .lock_with_lease(Duration::from_secs(10))
        .await
        .unwrap();
    assert!(multi.is_held_by_current().await.unwrap());
    for i in 0..3 {
        let ttl = Admin::connect(&nodes.servers[i].url())
            .await
            .pttl("ml")
            .await;
        assert!(
            (9_000..=10_000).contains(&ttl),
            "part {i} set to the lease: {ttl}"
        );
    }
    let other = MultiLock::new(
        clients
            .iter()
            .map(|c| {
                c.get_lock_with_owner("ml", redisson_lock::Owner::new())
                    .into()
            })
            .collect(),
    )
    .unwrap();
    let waiter = tokio::spawn(async move {
        let g = other.lock().await.unwrap();
        g.unlock().await.unwrap();
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiter.is_finished());
    g.unlock().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap()
        .unwrap();
    assert!(!multi.is_held_by_current().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multilock_without_wait_lets_exactly_one_of_ten_in_at_once() {
    // Redisson testWaitAndLeaseTimeouts.
    let nodes = Nodes::start(3);
    let clients = nodes.clients().await;
    let mut tasks = Vec::new();
    let started = Instant::now();
    for _ in 0..10 {
        let multi =
            MultiLock::new(clients.iter().map(|c| c.get_lock("ml").into()).collect()).unwrap();
        tasks.push(tokio::spawn(async move {
            multi
                .try_lock_with_lease(Duration::ZERO, Duration::from_secs(10))
                .await
                .unwrap()
        }));
    }
    // Keep the winner's guard until every task is done: a guard dropped early would let a
    // later task in.
    let mut winners = Vec::new();
    for t in tasks {
        if let Some(g) = t.await.unwrap() {
            winners.push(g);
        }
    }
    assert_eq!(winners.len(), 1);
    assert_eq!(winners[0].parts().len(), 3);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_counts_only_with_a_quorum_of_nodes() {
    let nodes = Nodes::start(5);
    let clients = nodes.clients().await;
    let lock = redlock(&clients, "rl", fast());
    let mut g = lock
        .try_lock_with_lease(Duration::ZERO, Duration::from_secs(2))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(g.extend(Duration::from_secs(10)).await.unwrap());
    assert!(g.validity() > Duration::from_secs(9));
    let ttl = Admin::connect(&nodes.servers[0].url())
        .await
        .pttl("rl")
        .await;
    assert!(ttl > 9_000, "{ttl}");
    // Two nodes lose the key: 3 of 5 still extend.
    for i in [0, 1] {
        let _: i64 = Admin::connect(&nodes.servers[i].url())
            .await
            .redis
            .del("rl")
            .await
            .unwrap();
    }
    assert!(g.extend(Duration::from_secs(10)).await.unwrap());
    assert_eq!(
        g.acquired_parts(),
        3,
        "the parts whose key was gone left the guard"
    );
    // A third: no quorum, the extension does not count and validity is unchanged.
    let _: i64 = Admin::connect(&nodes.servers[2].url())
        .await
        .redis
        .del("rl")
        .await
        .unwrap();
    let before = g.valid_until();
    assert!(!g.extend(Duration::from_secs(30)).await.unwrap());
    assert_eq!(g.valid_until(), before);
    g.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watchdog_redlock_stays_valid_with_a_quorum_and_is_lost_without() {
    let mut nodes = Nodes::start(5);
    let cfg = Config::default()
        .timeout(Duration::from_millis(500))
        .lock_watchdog_timeout(Duration::from_millis(900));
    let mut clients = Vec::new();
    for s in &nodes.servers {
        clients.push(Client::connect(&s.url(), cfg.clone()).await.unwrap());
    }
    let lock = redlock(&clients, "rl", fast());
    let g = lock
        .try_lock_for(Duration::from_secs(1))
        .await
        .unwrap()
        .expect("acquired");
    nodes.servers[0].kill();
    nodes.servers[1].kill();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(!g.is_lost(), "3 of 5 parts are still renewed");
    assert!(g.validity() > Duration::ZERO);
    nodes.servers[2].kill();
    assert!(common::eventually(Duration::from_secs(5), || async { g.is_lost() }).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_part_that_fails_to_extend_is_released_when_its_node_answers() {
    let nodes = Nodes::start(3);
    let clients = nodes.clients().await;
    let lock = redlock(&clients, "rl", fast());
    let mut g = lock
        .try_lock_with_lease(Duration::ZERO, Duration::from_secs(5))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(g.acquired_parts(), 3);
    // Node 0 stops answering for a while: its renewal misses the node timeout.
    let admin0 = Admin::connect(&nodes.servers[0].url()).await;
    admin0
        .cmd("CLIENT", vec!["PAUSE".into(), "600".into(), "ALL".into()])
        .await
        .unwrap();
    assert!(g.extend(Duration::from_secs(10)).await.unwrap(), "2 of 3");
    assert_eq!(g.acquired_parts(), 2, "the failed part left the guard");
    // Once node 0 answers again, the part is released there; the others are extended.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!nodes.key_exists_on(0, "rl").await, "released on node 0");
    for i in [1, 2] {
        let ttl = Admin::connect(&nodes.servers[i].url())
            .await
            .pttl("rl")
            .await;
        assert!(ttl > 8_000, "node {i}: {ttl}");
    }
    g.unlock().await.unwrap();
    assert!(!nodes.key_exists_on(1, "rl").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duration_max_waits_without_limit_for_multilock_and_redlock() {
    let nodes = Nodes::start(3);
    let clients = nodes.clients().await;
    let lease = Duration::from_secs(5);
    let multi = MultiLock::new(vec![
        clients[0].get_lock("m1").into(),
        clients[1].get_lock("m2").into(),
    ])
    .unwrap();
    // Was: "lease too large" (wait × 2 overflowed into the part lease).
    let g = multi
        .try_lock_with_lease(Duration::MAX, lease)
        .await
        .unwrap()
        .expect("an unlimited wait ends by acquiring");
    let ttl = Admin::connect(&nodes.servers[0].url())
        .await
        .pttl("m1")
        .await;
    assert!(ttl > 0 && ttl <= 5_000, "parts carry the lease: {ttl}");
    // A second MultiLock over the same names waits (no limit) until the first is released.
    let other = MultiLock::new(vec![
        clients[0].get_lock("m1").into(),
        clients[1].get_lock("m2").into(),
    ])
    .unwrap();
    let waiter = tokio::spawn(async move {
        let g = other.try_lock_for(Duration::MAX).await;
        (Instant::now(), g)
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished());
    g.unlock().await.unwrap();
    let (_, g2) = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .unwrap()
        .unwrap();
    g2.unwrap().expect("acquired").unlock().await.unwrap();

    let red = redlock(&clients, "rmax", fast());
    let g = red
        .try_lock_with_lease(Duration::MAX, lease)
        .await
        .unwrap()
        .expect("acquired");
    assert_eq!(g.acquired_parts(), 3);
    g.unlock().await.unwrap();
    // A single lock too.
    let single = clients[0].get_lock("s");
    let g = single
        .try_lock_with_lease(Duration::MAX, lease)
        .await
        .unwrap()
        .expect("acquired");
    g.unlock().await.unwrap();
}

/// The delayed-restart rule (fault catalogue S4 B and B′). Client A holds a RedLock on nodes 0
/// and 1 (node 2 was frozen). Node 0 then crashes and comes back empty.
/// B: it restarts at once, so client B could gather node 0 and node 2 while A still holds; the
/// restarted node must not be counted. B′: it stays down one lease, A's lock has expired, and B
/// acquires normally with every node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_restarted_empty_is_not_counted_until_one_lease_after_it_went_down() {
    for (case, down_for) in [("B", Duration::ZERO), ("B'", Duration::from_millis(2500))] {
        let mut nodes = Nodes::start(3);
        let a_clients = nodes.clients().await;
        let b_clients = nodes.clients().await;
        let name = "s4:delayed-restart";
        let lease = Duration::from_secs(2);
        let options = RedLockOptions::default().node_timeout(Duration::from_millis(100));
        let a = RedLock::with_options(
            a_clients.iter().map(|c| c.get_lock(name).into()).collect(),
            options.clone(),
        )
        .unwrap();
        signal(&nodes.servers[2], "-STOP");
        let held = a
            .try_lock_with_lease(Duration::ZERO, lease)
            .await
            .unwrap()
            .expect("a quorum of 2 of 3");
        assert_eq!(held.acquired_parts(), 2);
        signal(&nodes.servers[2], "-CONT");

        nodes.servers[0].kill();
        tokio::time::sleep(down_for).await;
        nodes.servers[0].restart();
        // B's connection to node 0 is back (it answers), on an empty server.
        assert!(
            common::eventually(Duration::from_secs(10), || async {
                b_clients[0].get_lock("probe").is_locked().await.is_ok()
            })
            .await
        );
        let b = RedLock::with_options(
            b_clients.iter().map(|c| c.get_lock(name).into()).collect(),
            options,
        )
        .unwrap();
        let got = b.try_lock_with_lease(Duration::ZERO, lease).await.unwrap();
        match case {
            "B" => {
                assert!(
                    got.is_none(),
                    "{case}: the restarted node was counted while A still holds"
                );
                assert!(!held.is_lost(), "{case}: A's lock is still valid");
            }
            _ => {
                // It acquires normally; the restarted node votes again as soon as this client
                // has read its new run_id after the reconnect (well within one lease: a node
                // that stayed down a whole lease is not held out for another one).
                let g = got.expect("B' acquires normally");
                g.unlock().await.unwrap();
                let deadline = Instant::now() + Duration::from_secs(1);
                loop {
                    let g = b
                        .try_lock_with_lease(Duration::ZERO, lease)
                        .await
                        .unwrap()
                        .expect("B' acquires normally");
                    let parts = g.acquired_parts();
                    g.unlock().await.unwrap();
                    if parts == 3 {
                        break;
                    }
                    assert!(
                        Instant::now() < deadline,
                        "{case}: the restarted node still does not vote"
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
}

/// Issue 23, per instance: a RedLock stays held while a quorum of its parts is confirmed, is in
/// doubt the moment fewer are (a second node's connection dropped), and lost once fewer than a
/// quorum can still be held (a node restarted without the key, another past its deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_is_in_doubt_when_a_quorum_is_no_longer_confirmed() {
    use redisson_lock::HoldState;
    let mut nodes = Nodes::start(3);
    let cfg = Config::default()
        .timeout(Duration::from_millis(500))
        .retry_delay(Duration::from_millis(100))
        .reconnect_max_delay(Duration::from_millis(100))
        .lock_watchdog_timeout(Duration::from_secs(3));
    let mut clients = Vec::new();
    for s in &nodes.servers {
        clients.push(Client::connect(&s.url(), cfg.clone()).await.unwrap());
    }
    let g = redlock(&clients, "rl-doubt", fast())
        .try_lock_for(Duration::from_secs(1))
        .await
        .unwrap()
        .expect("acquired");
    assert_eq!(g.state(), HoldState::Held);
    nodes.servers[0].kill();
    // Its part is in doubt at once; the quorum is not.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(g.state(), HoldState::Held, "2 of 3 parts are confirmed");
    nodes.servers[1].kill();
    let killed = Instant::now();
    assert!(
        common::eventually(Duration::from_secs(2), || async {
            g.state() == HoldState::InDoubt
        })
        .await,
        "{:?}",
        g.state()
    );
    assert!(
        killed.elapsed() < Duration::from_secs(1),
        "told at the drop, not at a deadline"
    );
    assert!(!g.is_lost(), "still valid: two parts are held or in doubt");
    nodes.servers[1].restart();
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            g.state() == HoldState::Lost
        })
        .await,
        "{:?}",
        g.state()
    );
}

/// The blocking MultiLock (issue 41): every part is held by the calling thread (whatever
/// thread built the multi-lock), which re-enters a part through its own lock handle; another
/// thread sharing the same MultiLock is another owner, so it cannot take it until the holder
/// unlocks, then does, as itself. A dropped guard releases every part.
#[test]
fn blocking_multilock_is_owned_by_the_calling_thread() {
    use redisson_lock::{blocking, Owner};
    let s = RedisServer::start();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let admin = rt.block_on(Admin::connect(&s.url()));
    let hash = |key: &str| rt.block_on(admin.hgetall(key));
    let client = blocking::Client::connect(&s.url(), Config::default()).unwrap();
    let field = |owner: Owner| format!("{}:{}", client.id(), owner.id());
    let multi = Arc::new(
        blocking::MultiLock::new(vec![
            client.get_lock("bm:a").into(),
            client.get_fair_lock("bm:b").into(),
        ])
        .unwrap(),
    );
    assert!(matches!(
        blocking::MultiLock::new(Vec::new()),
        Err(redisson_lock::Error::InvalidArgument(_))
    ));

    let guard = multi.lock().unwrap();
    let me = Owner::current_thread();
    assert_eq!(guard.state(), redisson_lock::HoldState::Held);
    assert!(!guard.is_lost());
    assert_eq!(guard.parts().len(), 2);
    assert!(guard.parts().iter().all(|p| p.owner() == me));
    for key in ["bm:a", "bm:b"] {
        let h = hash(key);
        assert_eq!(h.len(), 1, "{key}: {h:?}");
        assert_eq!(h.get(&field(me)).map(String::as_str), Some("1"), "{key}");
    }
    assert!(multi.is_held_by_current_thread().unwrap());
    // The same thread through its own handle of a part: the same owner, it re-enters.
    let a = client.get_lock("bm:a");
    assert!(a.is_held_by_current_thread().unwrap());
    a.try_lock().unwrap().expect("re-entered").unlock().unwrap();

    // Another thread is another owner: excluded while held, then it takes every part.
    let (started, waiting) = std::sync::mpsc::channel();
    let other = {
        let multi = multi.clone();
        std::thread::spawn(move || {
            let them = Owner::current_thread();
            assert!(!multi.is_held_by_current_thread().unwrap());
            assert!(multi.try_lock().unwrap().is_none(), "excluded while held");
            started.send(()).unwrap();
            let g = multi
                .try_lock_for(Duration::from_secs(20))
                .unwrap()
                .expect("acquired after the release");
            assert!(g.parts().iter().all(|p| p.owner() == them));
            assert!(multi.is_held_by_current_thread().unwrap());
            (them, g)
        })
    };
    waiting.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(hash("bm:a").get(&field(me)).map(String::as_str), Some("1"));
    guard.unlock().unwrap();
    let (them, theirs) = other.join().unwrap();
    assert_ne!(them, me);
    for key in ["bm:a", "bm:b"] {
        let h = hash(key);
        assert_eq!(h.len(), 1, "{key}: {h:?}");
        assert_eq!(h.get(&field(them)).map(String::as_str), Some("1"), "{key}");
    }
    assert!(!multi.is_held_by_current_thread().unwrap());
    // Dropped (here, on another thread than the one that took it): released in the background.
    drop(theirs);
    assert!(
        common::eventually_sync(Duration::from_secs(5), || {
            !rt.block_on(admin.exists("bm:a")) && !rt.block_on(admin.exists("bm:b"))
        }),
        "a dropped guard releases every part"
    );
    let leased = multi
        .try_lock_with_lease(Duration::from_secs(5), Duration::from_secs(10))
        .unwrap()
        .expect("free");
    let ttl = rt.block_on(admin.pttl("bm:a"));
    assert!(ttl > 8_000 && ttl <= 10_000, "{ttl}");
    leased.unlock().unwrap();
    client.shutdown();
}

/// The blocking RedLock over three masters (issue 41): acquired by the calling thread on every
/// node (the owner field and TTL checked on each), excluded for another thread, extended (the
/// TTL raised on every node), unlocked (gone from every node).
#[test]
fn blocking_redlock_over_three_masters_acquires_extends_and_unlocks() {
    use redisson_lock::{blocking, HoldState, Owner};
    let nodes = Nodes::start(3);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let admins: Vec<Admin> = nodes
        .servers
        .iter()
        .map(|s| rt.block_on(Admin::connect(&s.url())))
        .collect();
    let cfg = Config::default().timeout(Duration::from_millis(1000));
    let clients: Vec<blocking::Client> = nodes
        .servers
        .iter()
        .map(|s| blocking::Client::connect(&s.url(), cfg.clone()).unwrap())
        .collect();
    let red = Arc::new(
        blocking::RedLock::with_options(
            clients.iter().map(|c| c.get_lock("brl").into()).collect(),
            fast(),
        )
        .unwrap(),
    );
    assert_eq!(red.quorum(), 2);
    let me = Owner::current_thread();
    let mut guard = red
        .try_lock_with_lease(Duration::ZERO, Duration::from_secs(10))
        .unwrap()
        .expect("acquired");
    assert_eq!(guard.acquired_parts(), 3);
    assert_eq!(guard.state(), HoldState::Held);
    assert!(!guard.is_lost());
    let validity = guard.validity();
    assert!(
        validity > Duration::from_secs(9) && validity <= Duration::from_secs(10),
        "{validity:?}"
    );
    for (admin, client) in admins.iter().zip(&clients) {
        let h = rt.block_on(admin.hgetall("brl"));
        let field = format!("{}:{}", client.id(), me.id());
        assert_eq!(h.len(), 1, "{h:?}");
        assert_eq!(h.get(&field).map(String::as_str), Some("1"));
        let ttl = rt.block_on(admin.pttl("brl"));
        assert!(ttl > 9_000 && ttl <= 10_000, "{ttl}");
    }
    // Another thread is another owner: no node grants it the lock.
    let other = red.clone();
    let theirs = std::thread::spawn(move || {
        other
            .try_lock_with_lease(Duration::from_millis(200), Duration::from_secs(10))
            .unwrap()
            .is_some()
    })
    .join()
    .unwrap();
    assert!(!theirs, "excluded while held");

    assert!(guard.extend(Duration::from_secs(30)).unwrap());
    assert_eq!(guard.acquired_parts(), 3);
    assert!(guard.validity() > Duration::from_secs(20));
    for admin in &admins {
        let ttl = rt.block_on(admin.pttl("brl"));
        assert!(
            ttl > 20_000 && ttl <= 30_000,
            "extended on every node: {ttl}"
        );
    }
    guard.unlock().unwrap();
    for admin in &admins {
        assert!(!rt.block_on(admin.exists("brl")), "released on every node");
    }
    // Free again: the other thread takes it now, in watchdog mode.
    let other = red.clone();
    let parts = std::thread::spawn(move || {
        let g = other
            .try_lock_for(Duration::from_secs(5))
            .unwrap()
            .expect("free");
        let n = g.acquired_parts();
        g.unlock().unwrap();
        n
    })
    .join()
    .unwrap();
    assert_eq!(parts, 3);
    for c in &clients {
        c.shutdown();
    }
}
