//! Replica-synced acquisition (Redisson's `checkLockSyncedSlaves` / `slavesSyncTimeout`): a
//! master with one replica that replicates through a proxy the test freezes.

use redisson_lock_test_kit as common;

use std::time::Duration;

use common::{
    replica::{cli, until, wait_calls, ReplicaSet},
    RedisServer,
};
use redisson_lock::{Client, Config, Error, ErrorKind, Ttl};

const T: Duration = Duration::from_secs(30);

async fn client(url: &str, sync: Duration) -> Client {
    let config = Config::default().replicas_sync_timeout(sync);
    Client::connect(url, config).await.expect("connect")
}

/// The owner field's hold count in Redis (0 when absent).
async fn count_in(port: u16, lock: &str, field: &str) -> u64 {
    cli(port, &["HGET", lock, field]).await.parse().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_frozen_acquisition_fails_not_replicated_and_leaves_no_hold() {
    let set = ReplicaSet::start().await;
    let port = set.master.port();
    let c = client(&set.url(), Duration::from_millis(300)).await;
    // A re-entrant owner holding once, acquired while the replica is healthy.
    let owner = c.get_lock("replica-reentrant");
    let first = owner.try_lock().await.unwrap().expect("free lock");
    let field = owner.owner_field().to_owned();
    assert_eq!(count_in(port, "replica-reentrant", &field).await, 1);
    let waits_before = set.wait_calls().await;
    assert!(
        waits_before >= 1,
        "the healthy acquisition was synced with WAIT"
    );

    set.proxy.freeze();
    // A fresh acquisition: undone, typed error, nothing left in Redis.
    let fresh = c.get_lock("replica-fresh");
    let err = fresh.try_lock().await.unwrap_err();
    match &err {
        Error::NotReplicated {
            lock,
            wanted,
            acked,
        } => {
            assert_eq!(lock, "replica-fresh");
            assert_eq!((*wanted, *acked), (1, 0));
        }
        other => panic!("expected NotReplicated, got {other:?}"),
    }
    assert_eq!(err.kind(), ErrorKind::NotReplicated);
    assert!(err.to_string().contains("replica-fresh"), "{err}");
    assert_eq!(cli(port, &["EXISTS", "replica-fresh"]).await, "0");

    // A re-entry: only its own increment is taken back; the first hold stays.
    let err = owner.try_lock().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotReplicated, "{err:?}");
    assert_eq!(count_in(port, "replica-reentrant", &field).await, 1);
    assert_eq!(owner.hold_count().await.unwrap(), 1);
    assert!(set.wait_calls().await >= waits_before + 2);

    // A waiting acquisition retries within its wait and then gives the same error.
    let err = fresh
        .try_lock_for(Duration::from_millis(900))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotReplicated, "{err:?}");
    assert_eq!(cli(port, &["EXISTS", "replica-fresh"]).await, "0");

    // Every kind goes through the same engine: undone, nothing left.
    let fair = c
        .get_fair_lock("replica-fair")
        .try_lock()
        .await
        .unwrap_err();
    let rw = c.get_read_write_lock("replica-rw");
    let read = rw.read_lock().try_lock().await.unwrap_err();
    let write = rw.write_lock().try_lock().await.unwrap_err();
    let fenced = c
        .get_fenced_lock("replica-fenced")
        .try_lock()
        .await
        .unwrap_err();
    let spin = c
        .get_spin_lock("replica-spin")
        .try_lock()
        .await
        .unwrap_err();
    for e in [fair, read, write, fenced, spin] {
        assert_eq!(e.kind(), ErrorKind::NotReplicated, "{e:?}");
    }
    // No hold, no queue entry (the fenced lock's token counter only ever grows, by design).
    for key in [
        "replica-fair",
        "redisson_lock_queue:{replica-fair}",
        "redisson_lock_timeout:{replica-fair}",
        "replica-rw",
        "replica-fenced",
        "replica-spin",
    ] {
        assert_eq!(cli(port, &["EXISTS", key]).await, "0", "{key}");
    }

    set.proxy.unfreeze();
    first.unlock().await.unwrap();
    assert_eq!(cli(port, &["EXISTS", "replica-reentrant"]).await, "0");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_healthy_acquisition_succeeds_and_again_after_a_2s_lag() {
    let set = ReplicaSet::start().await;
    let (port, rport) = (set.master.port(), set.replica.port());
    let c = client(&set.url(), Duration::from_secs(1)).await;
    let lock = c.get_lock("replica-ok");
    let field = lock.owner_field().to_owned();
    let g = lock.try_lock().await.unwrap().expect("acquired");
    assert_eq!(count_in(port, "replica-ok", &field).await, 1);
    // Acknowledged by the replica before the call returned: the replica has the hold.
    assert_eq!(count_in(rport, "replica-ok", &field).await, 1);
    assert!(set.wait_calls().await >= 1);
    g.unlock().await.unwrap();

    // A 2 s lag: frozen, then thawed; the next acquisition succeeds again.
    set.proxy.freeze();
    tokio::time::sleep(Duration::from_secs(2)).await;
    set.proxy.unfreeze();
    let g = lock
        .try_lock()
        .await
        .unwrap()
        .expect("acquired after the lag");
    assert_eq!(count_in(rport, "replica-ok", &field).await, 1);
    g.unlock().await.unwrap();
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_sync_sends_no_wait_to_a_lone_server() {
    let s = RedisServer::start();
    let c = client(&s.url(), Duration::from_secs(1)).await;
    assert!(c.config().get_check_lock_synced_replicas(), "on by default");
    for i in 0..5 {
        let lock = c.get_lock(&format!("replica-lone-{i}"));
        let g = lock.lock().await.unwrap();
        let again = lock.try_lock().await.unwrap().expect("re-entry");
        again.unlock().await.unwrap();
        g.unlock().await.unwrap();
    }
    assert_eq!(wait_calls(s.port()).await, 0, "no WAIT without replicas");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_sync_off_sends_no_wait_even_with_a_frozen_replica() {
    let set = ReplicaSet::start().await;
    let config = Config::default().check_lock_synced_replicas(false);
    let c = Client::connect(&set.url(), config).await.unwrap();
    set.proxy.freeze();
    let g = c.get_lock("replica-off").try_lock().await.unwrap();
    assert!(g.is_some(), "acquired without waiting for the replica");
    assert_eq!(set.wait_calls().await, 0);
    drop(g);
    set.proxy.unfreeze();
    c.shutdown().await;
}

/// While one acquisition is blocked in `WAIT` (a frozen replica, a long sync timeout), the
/// client's other traffic goes on: other owners' releases, queries, a busy try, renewals; and
/// other acquisitions get connections of their own (each in its own `WAIT`, none queued behind
/// the first), so they all complete once the replica is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_wait_never_stalls_other_traffic_of_the_client() {
    let set = ReplicaSet::start().await;
    let port = set.master.port();
    let c = client(&set.url(), Duration::from_secs(60)).await;
    let other = Client::connect(&set.url(), Config::default())
        .await
        .unwrap();
    // Held before the freeze, by this client and by another one.
    let mut held = Vec::new();
    for i in 0..3 {
        let lock = c.get_lock(&format!("replica-held-{i}"));
        held.push(lock.try_lock().await.unwrap().expect("free"));
    }
    let busy = other.get_lock("replica-busy").try_lock().await.unwrap();
    assert!(busy.is_some());
    set.await_in_sync().await;

    set.proxy.freeze();
    let stuck_lock = c.get_lock("replica-stuck");
    let stuck = tokio::spawn(stuck_lock.try_lock());
    until("the acquisition blocked in WAIT", T, || async {
        set.blocked_clients().await == 1
    })
    .await;

    // Other traffic on the same client completes while that WAIT blocks.
    for g in held.drain(..) {
        let name = g.name().to_owned();
        g.unlock().await.unwrap();
        assert_eq!(cli(port, &["EXISTS", &name]).await, "0");
    }
    let b = c.get_lock("replica-busy");
    assert!(b.is_locked().await.unwrap());
    // The TTL the server has (the other client's watchdog lease, 30 s), read around it.
    let pttl = |v: String| v.trim().parse::<u64>().expect("a PTTL");
    let before = pttl(cli(port, &["PTTL", "replica-busy"]).await);
    let ttl = b.remaining_ttl().await.unwrap();
    let after = pttl(cli(port, &["PTTL", "replica-busy"]).await);
    let Ttl::Expires(ttl) = ttl else {
        panic!("a held lock with a lease: {ttl:?}")
    };
    let ms = ttl.as_millis() as u64;
    assert!(
        ms > 0 && ms <= 30_000 && ms + 5 >= before.min(after) && ms <= before.max(after) + 5,
        "remaining TTL {ms} ms; the server's PTTL {before} then {after} ms"
    );
    assert_eq!(b.hold_count().await.unwrap(), 0);
    assert!(!c.get_lock("replica-free").is_locked().await.unwrap());
    assert!(
        b.try_lock().await.unwrap().is_none(),
        "a busy try sends no WAIT"
    );
    assert!(!c.get_lock("replica-free").force_unlock().await.unwrap());
    assert!(
        !stuck.is_finished(),
        "the first acquisition is still in WAIT"
    );
    assert_eq!(set.blocked_clients().await, 1);

    // Three more acquisitions: each blocks in a WAIT of its own, at the same time.
    let more: Vec<_> = (0..3)
        .map(|i| tokio::spawn(c.get_lock(&format!("replica-more-{i}")).try_lock()))
        .collect();
    until("four acquisitions in WAIT at once", T, || async {
        set.blocked_clients().await == 4
    })
    .await;
    assert!(!stuck.is_finished());

    // The replica comes back: every one of them is acknowledged and holds its lock.
    set.proxy.unfreeze();
    let g = stuck.await.unwrap().unwrap().expect("acquired");
    assert_eq!(cli(port, &["EXISTS", "replica-stuck"]).await, "1");
    g.unlock().await.unwrap();
    for m in more {
        m.await
            .unwrap()
            .unwrap()
            .expect("acquired")
            .unlock()
            .await
            .unwrap();
    }
    drop(busy);
    c.shutdown().await;
    other.shutdown().await;
}

/// A waiting acquisition retries an unreplicated attempt: `lock()` gives up after
/// `retry_attempts` more attempts (each undone), and one whose replica comes back during its
/// retries acquires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_waiting_acquisitions_retry_a_bounded_number_of_times() {
    let set = ReplicaSet::start().await;
    let port = set.master.port();
    let config = Config::default()
        .replicas_sync_timeout(Duration::from_millis(150))
        .retry_attempts(2)
        .retry_delay(Duration::from_millis(50));
    let c = Client::connect(&set.url(), config).await.unwrap();
    // The client's first synced acquisition also probes `WAIT 0 0`: done before counting.
    let warm = c.get_lock("replica-warm").lock().await.unwrap();
    warm.unlock().await.unwrap();
    set.proxy.freeze();
    let waits = set.wait_calls().await;
    let err = c.get_lock("replica-retry").lock().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::NotReplicated, "{err:?}");
    assert_eq!(
        set.wait_calls().await - waits,
        3,
        "one attempt and two retries"
    );
    assert_eq!(cli(port, &["EXISTS", "replica-retry"]).await, "0");

    // The replica comes back after the first unreplicated attempt: a retry acquires.
    let waits = set.wait_calls().await;
    let lock = c.get_lock("replica-retry");
    let waiter = tokio::spawn(lock.try_lock_for(T));
    until("the first attempt's WAIT answered", T, || async {
        set.wait_calls().await > waits && set.blocked_clients().await == 0
    })
    .await;
    set.proxy.unfreeze();
    let g = waiter.await.unwrap().unwrap().expect("acquired on a retry");
    assert_eq!(cli(port, &["EXISTS", "replica-retry"]).await, "1");
    g.unlock().await.unwrap();
    c.shutdown().await;
}

/// With every replica-sync connection busy in a `WAIT` for a frozen replica, one more
/// acquisition gives up after the command timeout with `Timeout`, not `Ambiguous`: nothing was
/// sent, so there is nothing to reconcile, and Redis holds nothing for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_pool_exhausted_is_a_timeout_with_nothing_sent() {
    let set = ReplicaSet::start().await;
    let port = set.master.port();
    let config = Config::default()
        .replicas_sync_timeout(Duration::from_secs(20))
        .timeout(Duration::from_millis(700));
    let c = Client::connect(&set.url(), config).await.expect("connect");
    // Warm: one synced acquisition while healthy.
    c.get_lock("replica-pool-warm")
        .try_lock()
        .await
        .unwrap()
        .expect("free")
        .unlock()
        .await
        .unwrap();
    set.proxy.freeze();
    // Waiting acquisitions: their `WAIT` lasts the whole 20 s sync timeout (a single try's is
    // cut to its one command timeout, and would free its connection too early).
    let stuck: Vec<_> = (0..8)
        .map(|i| {
            let lock = c.get_lock(&format!("replica-pool-{i}"));
            tokio::spawn(async move {
                lock.try_lock_for(Duration::from_secs(60))
                    .await
                    .map(|g| g.map(|g| g.keep()))
            })
        })
        .collect();
    until("8 WAITs blocked", T, || async {
        set.blocked_clients().await >= 8
    })
    .await;
    let err = c
        .get_lock("replica-pool-extra")
        .try_lock()
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err:?}");
    assert_eq!(cli(port, &["EXISTS", "replica-pool-extra"]).await, "0");
    for t in stuck {
        t.abort();
    }
    set.proxy.unfreeze();
    c.shutdown().await;
}

/// A master whose replica lost its link (the link reset, reconnections refused) has no
/// replica online for a while: that is not a lone server (the replica can still be promoted,
/// without what it missed), so an acquisition still wants one acknowledgement and fails
/// `NotReplicated` without it, leaving nothing; once the replica is back, acquisitions are
/// synced and succeed again. (Before, a count of 0 read then switched the sync off: the chaos
/// runner's `lag-kill` lost acquisitions that way.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_gone_for_now_is_not_a_lone_server() {
    let set = ReplicaSet::start().await;
    let port = set.master.port();
    let c = client(&set.url(), Duration::from_millis(300)).await;
    let lock = c.get_lock("replica-gone");
    let g = lock.try_lock().await.unwrap().expect("free lock");
    g.unlock().await.unwrap();
    let synced_before = set.wait_calls().await;
    assert!(synced_before >= 1, "synced while the replica was there");

    set.proxy.refuse(true).await;
    set.proxy.reset();
    until("no replica online", T, || async move {
        !cli(port, &["INFO", "replication"])
            .await
            .contains("state=online")
    })
    .await;
    // Twice: the first WAIT's missing acknowledgement makes the client read the count again
    // (0 online), the second acquisition must still want one.
    for _ in 0..2 {
        let err = lock.try_lock().await.unwrap_err();
        match &err {
            Error::NotReplicated { wanted, acked, .. } => assert_eq!((*wanted, *acked), (1, 0)),
            other => panic!("expected NotReplicated, got {other:?}"),
        }
        assert_eq!(cli(port, &["EXISTS", "replica-gone"]).await, "0");
    }
    assert!(set.wait_calls().await >= synced_before + 2);

    set.proxy.refuse(false).await;
    until("the replica online again", T, || async move {
        cli(port, &["INFO", "replication"])
            .await
            .contains("state=online")
    })
    .await;
    let g = lock
        .try_lock_for(Duration::from_secs(5))
        .await
        .expect("synced again")
        .expect("free lock");
    let field = lock.owner_field().to_owned();
    assert_eq!(count_in(port, "replica-gone", &field).await, 1);
    g.unlock().await.unwrap();
    c.shutdown().await;
}

/// A replica still in its full sync (`state=wait_bgsave`: the master delays the diskless
/// transfer by a minute) cannot acknowledge a `WAIT`: it is not counted, so with no replica
/// online an acquisition is not synced and succeeds at once instead of failing
/// `NotReplicated` after the sync timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_in_full_sync_is_not_counted() {
    let master = RedisServer::start_with(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "60",
    ]);
    let port = master.port();
    let _replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port.to_string()]);
    until("the replica waiting for its full sync", T, || async move {
        cli(port, &["INFO", "replication"])
            .await
            .contains("state=wait_bgsave")
    })
    .await;
    let c = client(&master.url(), Duration::from_secs(1)).await;
    let lock = c.get_lock("replica-full-sync");
    let started = tokio::time::Instant::now();
    let guard = lock
        .try_lock()
        .await
        .expect("not NotReplicated: the syncing replica is not counted")
        .expect("free lock");
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "no WAIT for the sync timeout ({:?})",
        started.elapsed()
    );
    assert_eq!(wait_calls(port).await, 0, "no WAIT sent");
    let field = lock.owner_field().to_owned();
    assert_eq!(count_in(port, "replica-full-sync", &field).await, 1);
    assert!(
        cli(port, &["INFO", "replication"])
            .await
            .contains("state=wait_bgsave"),
        "the replica was still syncing throughout"
    );
    guard.unlock().await.unwrap();
    assert_eq!(count_in(port, "replica-full-sync", &field).await, 0);
}

/// The synchronizers sync where Redisson does (sync protocol §1.3): a permit no replica
/// acknowledged is released by its id and the acquisition fails `NotReplicated` (a waiting one
/// after its retries); a release, a set or an add no replica acknowledged fails `NotReplicated`
/// but stays done on the master (never run twice); the latch is never synced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_synchronizers_sync_where_redisson_does() {
    let set = ReplicaSet::start().await;
    let port = set.master.port();
    let config = Config::default()
        .replicas_sync_timeout(Duration::from_millis(200))
        .retry_attempts(1)
        .retry_delay(Duration::from_millis(100));
    let c = Client::connect(&set.url(), config).await.unwrap();
    let ps = c.get_permit_expirable_semaphore("replica-psem");
    assert!(ps.try_set_permits(2).await.unwrap());
    let healthy = ps.try_acquire(None).await.unwrap().expect("a free permit");
    let waits = set.wait_calls().await;
    assert!(waits >= 2, "set and acquisition synced with WAIT");

    set.proxy.freeze();
    let e = ps.try_acquire(None).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotReplicated, "{e:?}");
    assert_eq!(cli(port, &["GET", "replica-psem"]).await, "1", "given back");
    assert_eq!(cli(port, &["ZCARD", "{replica-psem}:timeout"]).await, "1");
    // A waiting acquisition: tried 1 + retry_attempts times, then the error.
    let e = ps
        .try_acquire_for(Duration::from_secs(5), None)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotReplicated, "{e:?}");
    assert_eq!(cli(port, &["GET", "replica-psem"]).await, "1");
    // A release: done on the master, reported.
    let e = healthy.release().await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotReplicated, "{e:?}");
    assert_eq!(cli(port, &["GET", "replica-psem"]).await, "2");
    assert_eq!(cli(port, &["ZCARD", "{replica-psem}:timeout"]).await, "0");
    // An add: done once.
    let sem = c.get_semaphore("replica-sem");
    let e = sem.add_permits(3).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotReplicated, "{e:?}");
    assert_eq!(cli(port, &["GET", "replica-sem"]).await, "3");
    // The latch: no WAIT at all.
    let waits = set.wait_calls().await;
    let latch = c.get_count_down_latch("replica-cdl");
    assert!(latch.try_set_count(1).await.unwrap());
    latch.count_down().await.unwrap();
    assert_eq!(set.wait_calls().await, waits, "the latch never syncs");
    set.proxy.unfreeze();
    assert!(ps.try_acquire(None).await.unwrap().is_some());
    c.shutdown().await;
}

/// The non-reentrant, non-reentrant fair and group locks go through the same replica-synced
/// acquisition: with the replica frozen each is undone (its own release) and fails
/// `NotReplicated`; a group holder's re-entry takes back only its own increment, on every value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_frozen_non_reentrant_and_group_acquisitions_are_undone() {
    let set = ReplicaSet::start().await;
    let port = set.master.port();
    let c = client(&set.url(), Duration::from_millis(300)).await;
    let group = c.get_group_lock("replica-group", ["a", "b"]);
    let held = group.try_lock().await.unwrap().expect("free group");
    let count_field = |v: &str| {
        format!(
            "{}:{}:lock_count",
            redisson_lock::GroupLock::value_field(v),
            group.owner_field()
        )
    };
    set.proxy.freeze();
    let nr = c
        .get_non_reentrant_lock("replica-nr")
        .try_lock()
        .await
        .unwrap_err();
    let nrf = c
        .get_non_reentrant_fair_lock("replica-nrf")
        .try_lock()
        .await
        .unwrap_err();
    let fresh_group = c
        .get_group_lock("replica-group", ["c"])
        .try_lock()
        .await
        .unwrap_err();
    let reentry = group.try_lock().await.unwrap_err();
    for e in [nr, nrf, fresh_group, reentry] {
        assert_eq!(e.kind(), ErrorKind::NotReplicated, "{e:?}");
    }
    assert_eq!(cli(port, &["EXISTS", "replica-nr"]).await, "0");
    assert_eq!(cli(port, &["EXISTS", "replica-nrf"]).await, "0");
    for v in ["a", "b"] {
        assert_eq!(
            cli(port, &["HGET", "replica-group", &count_field(v)]).await,
            "1"
        );
    }
    assert_eq!(
        cli(
            port,
            &[
                "HEXISTS",
                "replica-group",
                &redisson_lock::GroupLock::value_field("c")
            ]
        )
        .await,
        "0"
    );
    assert_eq!(group.hold_count().await.unwrap(), 1);
    set.proxy.unfreeze();
    held.unlock().await.unwrap();
    assert_eq!(cli(port, &["EXISTS", "replica-group"]).await, "0");
}
