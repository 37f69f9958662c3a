//! Redis Cluster behaviour beyond the shared behavioural suites: Java releases of both Redisson
//! generations, the `Both` bridge, slot safety, one subscription per channel, per-slot renewal
//! batches, a lock across a failover, a slot migration and a killed master, and the recipes
//! (an election, a run-once job) across a failover.

use redisson_lock_test_kit as common;

use std::time::Duration;

use common::{cluster::RedisCluster, eventually, woke_within, Admin};
use fred::{
    clients::SubscriberClient,
    interfaces::{ClientLike, EventInterface, PubsubInterface},
    types::config::Config as FredConfig,
};
use redisson_lock::{Client, Config, Error, HoldState, RunOnce, ShardedSubscriptionMode as Mode};
use tokio::time::Instant;

const WITHIN: Duration = Duration::from_secs(10);

/// Waits until a hold whose slot changed node (a failover, a migration: it is in doubt from
/// then on) is confirmed by a renewal on the new owner; `false` if it is still not held.
async fn held_again(state: impl Fn() -> HoldState) -> bool {
    eventually(WITHIN, || async { state() == HoldState::Held }).await
}

async fn client(c: &RedisCluster, config: Config) -> Client {
    let seeds = c.seed_urls();
    let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
    Client::connect_cluster(&seeds, config).await.unwrap()
}

fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

/// Subscribers of `channel` on its owner (sharded) and on all nodes (classic).
fn shard_subscribers(c: &RedisCluster, channel: &str) -> i64 {
    let owner = c.master_for_key(channel);
    RedisCluster::cmd(owner, &["PUBSUB", "SHARDNUMSUB", channel])
        .items()
        .get(1)
        .and_then(|n| n.int())
        .unwrap_or(0)
}

fn classic_subscribers(c: &RedisCluster, channel: &str) -> i64 {
    c.live_ports()
        .into_iter()
        .filter_map(|p| {
            let r = RedisCluster::cmd(p, &["PUBSUB", "NUMSUB", channel]);
            r.items().get(1).and_then(|n| n.int())
        })
        .sum()
}

/// A simulated Java holder blocks a waiter of the crate; the Java release (`sharded`: SPUBLISH
/// as Redisson >= 3.22, else PUBLISH as Redisson < 3.22) must wake it by its message (within
/// `WOKEN_BY_MESSAGE`, long before the 30 s hold's TTL).
async fn java_release_wakes(mode: Mode, sharded_java: bool) {
    let c = RedisCluster::shared();
    // The wake-up is measured up to the acquisition's return: without replica sync, so a
    // replica starved on a loaded machine (its acknowledgement, up to the sync timeout) does
    // not count as a slow wake-up. Replica sync has its own tests.
    let config = Config::default()
        .sharded_subscription_mode(mode)
        .check_lock_synced_replicas(false);
    let client = client(c, config).await;
    let mut admin = Admin::connect(&c.cluster_url()).await;
    admin.sharded = sharded_java;
    for name in c.name_per_master(&format!("java-{mode:?}-{sharded_java}-")) {
        admin.java_hold(&name, "java-uuid:1", 30_000).await;
        let lock = client.get_lock(&name);
        let task = tokio::spawn(async move {
            let g = lock.lock().await?;
            Ok::<_, Error>((Instant::now(), g))
        });
        let ch = channel(&name);
        assert!(
            eventually(WITHIN, || async {
                if sharded_java {
                    shard_subscribers(c, &ch) >= 1
                } else {
                    classic_subscribers(c, &ch) >= 1
                }
            })
            .await,
            "the waiter subscribed in the namespace the Java peer publishes in"
        );
        let released = Instant::now();
        admin.java_release(&name).await;
        let g = woke_within(task, released, common::WOKEN_BY_MESSAGE).await;
        g.unlock().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_spublish_release_wakes_the_waiter_in_auto_on_and_both() {
    for mode in [Mode::Auto, Mode::On, Mode::Both] {
        java_release_wakes(mode, true).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_publish_release_wakes_the_waiter_in_off_and_both() {
    for mode in [Mode::Off, Mode::Both] {
        java_release_wakes(mode, false).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_both_mode_one_release_reaches_a_subscriber_and_a_shard_subscriber() {
    let c = RedisCluster::shared();
    let client = client(c, Config::default().sharded_subscription_mode(Mode::Both)).await;
    for name in c.name_per_master("both-") {
        let ch = channel(&name);
        let classic = SubscriberClient::new(
            FredConfig::from_url(&c.cluster_url()).unwrap(),
            None,
            None,
            None,
        );
        let sharded = SubscriberClient::new(
            FredConfig::from_url(&c.cluster_url()).unwrap(),
            None,
            None,
            None,
        );
        classic.init().await.unwrap();
        sharded.init().await.unwrap();
        let (mut rx_classic, mut rx_sharded) = (classic.message_rx(), sharded.message_rx());
        classic.subscribe(ch.clone()).await.unwrap();
        sharded.ssubscribe(ch.clone()).await.unwrap();
        assert!(
            eventually(WITHIN, || async {
                shard_subscribers(c, &ch) == 1 && classic_subscribers(c, &ch) == 1
            })
            .await
        );

        client
            .get_lock(&name)
            .lock()
            .await
            .unwrap()
            .unlock()
            .await
            .unwrap();
        for rx in [&mut rx_classic, &mut rx_sharded] {
            let msg = tokio::time::timeout(WITHIN, rx.recv())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(&*msg.channel, ch.as_str());
            assert_eq!(msg.value.as_string().as_deref(), Some("0"));
        }
        let _ = classic.quit().await;
        let _ = sharded.quit().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_whose_keys_span_slots_is_refused_and_writes_nothing() {
    let c = RedisCluster::shared();
    let client = client(c, Config::default()).await;
    let admin = Admin::connect(&c.cluster_url()).await;
    for name in ["{abc", "a{b", "}{"] {
        let is_cross_slot = |r: Result<(), Error>| matches!(r, Err(Error::CrossSlot { .. }));
        let rlock = client.get_lock(name);
        assert!(is_cross_slot(rlock.lock().await.map(drop)), "{name}");
        assert!(is_cross_slot(rlock.try_lock().await.map(drop)));
        assert!(is_cross_slot(rlock.unlock().await.map(drop)));
        assert!(is_cross_slot(rlock.is_locked().await.map(drop)));
        assert!(is_cross_slot(rlock.hold_count().await.map(drop)));
        assert!(is_cross_slot(rlock.force_unlock().await.map(drop)));
        let fair = client.get_fair_lock(name);
        assert!(is_cross_slot(
            fair.try_lock_for(Duration::from_millis(50)).await.map(drop)
        ));
        let rw = client.get_read_write_lock(name);
        assert!(is_cross_slot(rw.read_lock().lock().await.map(drop)));
        assert!(is_cross_slot(rw.write_lock().lock().await.map(drop)));
        let fenced = client.get_fenced_lock(name);
        assert!(is_cross_slot(fenced.lock().await.map(drop)));
        assert!(is_cross_slot(fenced.token().await.map(drop)));
        assert!(is_cross_slot(
            client.get_spin_lock(name).lock().await.map(drop)
        ));
        for key in [
            name.to_owned(),
            format!("redisson_lock_queue:{name}"),
            format!("redisson_lock_timeout:{name}"),
            format!("redisson_lock_token:{name}"),
        ] {
            assert!(!admin.exists(&key).await, "{key} was written");
        }
    }
    // Names Redisson handles keep working on every master.
    for name in ["a{b}c", "x}y{z}", "plain"] {
        let g = client.get_fenced_lock(name).lock().await.unwrap();
        assert!(g.token() >= 1);
        g.unlock().await.unwrap();
        let g = client
            .get_read_write_lock(name)
            .write_lock()
            .lock()
            .await
            .unwrap();
        g.unlock().await.unwrap();
    }
}

/// 1 000 local waiters on one lock share one subscription; none is left after they leave.
async fn one_subscription_for_a_thousand_waiters(mode: Mode) {
    let c = RedisCluster::shared();
    let client = client(c, Config::default().sharded_subscription_mode(mode)).await;
    let admin = Admin::connect(&c.cluster_url()).await;
    let name = format!("thousand-{mode:?}");
    let ch = channel(&name);
    admin.java_hold(&name, "java-uuid:1", 60_000).await;
    let waiters: Vec<_> = (0..1000)
        .map(|_| {
            let lock = client.get_lock(&name);
            tokio::spawn(async move { lock.try_lock_for(Duration::from_secs(60)).await })
        })
        .collect();
    assert!(
        eventually(WITHIN, || async {
            client.stats().channel_waiters(&channel(&name)) == 1000
        })
        .await
    );
    let count = || {
        if mode == Mode::Off {
            classic_subscribers(c, &ch)
        } else {
            shard_subscribers(c, &ch)
        }
    };
    assert!(eventually(WITHIN, || async { count() == 1 }).await);
    assert_eq!(count(), 1, "exactly one subscription for 1 000 waiters");
    assert_eq!(client.stats().subscribed_channels, 1);
    for w in &waiters {
        w.abort();
    }
    assert!(
        eventually(WITHIN, || async { count() == 0 }).await,
        "none left"
    );
    assert_eq!(client.stats().subscribed_channels, 0);
    let _: i64 = fred::interfaces::KeysInterface::del(&admin.redis, name.as_str())
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_waiters_share_one_shard_subscription() {
    one_subscription_for_a_thousand_waiters(Mode::On).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_waiters_share_one_classic_subscription() {
    one_subscription_for_a_thousand_waiters(Mode::Off).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewal_calls_are_per_slot_on_a_cluster() {
    let c = RedisCluster::shared();
    let config = Config::default()
        .lock_watchdog_timeout(Duration::from_millis(1500))
        .lock_watchdog_batch_size(3);
    let client = client(c, config).await;
    // 5 locks in the slot of {g0}, 2 in the slot of {g1}, 1 in the slot of {g2}.
    let mut guards = Vec::new();
    for (tag, n) in [("g0", 5), ("g1", 2), ("g2", 1)] {
        for i in 0..n {
            guards.push(
                client
                    .get_lock(&format!("{{{tag}}}:renew{i}"))
                    .lock()
                    .await
                    .unwrap(),
            );
        }
    }
    // One run: ⌈5/3⌉ + ⌈2/3⌉ + ⌈1/3⌉ = 4 calls, counted at once when the run starts.
    assert!(eventually(WITHIN, || async { client.stats().renewal_calls > 0 }).await);
    assert_eq!(client.stats().renewal_calls, 4);
    assert!(eventually(WITHIN, || async { client.stats().renewal_calls > 4 }).await);
    assert_eq!(client.stats().renewal_calls, 8);
    tokio::time::sleep(Duration::from_millis(1600)).await; // longer than the TTL: renewals keep them
    for g in guards {
        assert!(!g.is_lost());
        g.unlock().await.unwrap();
    }
}

/// A lock held across a manual failover of its master: kept, renewed, and handed to a waiter
/// of another client after the release; new acquisitions from a third client work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_survives_a_manual_failover_and_hands_over_after_it() {
    let c = RedisCluster::start();
    let config = Config::default().lock_watchdog_timeout(Duration::from_secs(3));
    let (holder, waiter_client, third) = (
        client(&c, config.clone()).await,
        client(&c, config.clone()).await,
        client(&c, config).await,
    );
    let admin = Admin::connect(&c.cluster_url()).await;
    let name = c.name_per_master("failover-").remove(1);
    let guard = holder.get_lock(&name).lock().await.unwrap();
    let lock = waiter_client.get_lock(&name);
    let waiter = tokio::spawn(async move {
        let g = lock.lock().await?;
        Ok::<_, Error>((Instant::now(), g))
    });
    assert!(
        eventually(WITHIN, || async {
            waiter_client.stats().channel_waiters(&channel(&name)) == 1
        })
        .await
    );

    let replica = c.replica_for_key(&name);
    c.failover(replica).await;
    assert_eq!(c.master_for_key(&name), replica);
    // Renewals continue on the new master: after two more periods the TTL is still fresh.
    let calls = holder.stats().renewal_calls;
    assert!(
        eventually(WITHIN, || async {
            holder.stats().renewal_calls >= calls + 2
        })
        .await
    );
    assert!(held_again(|| guard.state()).await);
    let fields = admin.hgetall(&name).await;
    assert_eq!(
        fields.get(guard.owner_field()).map(String::as_str),
        Some("1")
    );
    assert!(admin.pttl(&name).await > 1000);

    // The waiter's client noticed the moved slot and subscribed again on the new owner.
    let ch = channel(&name);
    assert!(eventually(WITHIN, || async { shard_subscribers(&c, &ch) == 1 }).await);
    let released = Instant::now();
    guard.unlock().await.unwrap();
    let g = woke_within(waiter, released, Duration::from_millis(1000)).await;
    g.unlock().await.unwrap();
    let g = third
        .get_fair_lock(&name)
        .try_lock()
        .await
        .unwrap()
        .expect("free");
    g.unlock().await.unwrap();
}

/// A held lock whose slot migrates to another master: renewals, the release and the fair
/// queue scripts follow the redirect, and a waiter on the moved shard channel still wakes. A
/// leased hold in that slot (no renewal) is in doubt at the move and confirmed on the new
/// owner, as the watchdog hold is (issue 29, defect 5: it stayed in doubt until its deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_follows_its_slot_to_another_master() {
    let c = RedisCluster::start();
    let config = Config::default().lock_watchdog_timeout(Duration::from_secs(3));
    let (holder, other) = (client(&c, config.clone()).await, client(&c, config).await);
    let admin = Admin::connect(&c.cluster_url()).await;
    let name = c.name_per_master("migrate-").remove(0);
    let guard = holder.get_lock(&name).lock().await.unwrap();
    let lock = other.get_lock(&name);
    let waiter = tokio::spawn(async move {
        let g = lock.lock().await?;
        Ok::<_, Error>((Instant::now(), g))
    });
    assert!(
        eventually(WITHIN, || async {
            other.stats().channel_waiters(&channel(&name)) == 1
        })
        .await
    );
    // A fair lock in another slot of the same master, with a queued waiter.
    let fair_name = format!("{{{name}}}:fair");
    let fair_guard = holder.get_fair_lock(&fair_name).lock().await.unwrap();
    let fair = other.get_fair_lock(&fair_name);
    let fair_waiter = tokio::spawn(async move {
        let g = fair.try_lock_for(Duration::from_secs(20)).await?;
        Ok::<_, Error>((Instant::now(), g))
    });
    let queue = format!("redisson_lock_queue:{fair_name}");
    assert!(
        eventually(WITHIN, || async {
            let n = admin
                .cmd("LLEN", vec![queue.as_str().into()])
                .await
                .unwrap();
            n.as_i64() == Some(1)
        })
        .await
    );

    let leased_name = format!("{{{name}}}:leased");
    let leased = holder
        .get_lock(&leased_name)
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();

    let slot = RedisCluster::slot(&name);
    let from = c.master_for_key(&name);
    let to = c.masters().into_iter().find(|m| *m != from).unwrap();
    c.migrate_slot(slot, from, to).await;
    assert_eq!(c.master_for_key(&name), to);

    let calls = holder.stats().renewal_calls;
    assert!(
        eventually(WITHIN, || async {
            holder.stats().renewal_calls >= calls + 2
        })
        .await
    );
    assert!(
        held_again(|| guard.state()).await,
        "renewals follow the slot"
    );
    assert!(
        held_again(|| leased.state()).await,
        "the leased hold is checked on the new owner: {:?}",
        leased.state()
    );
    assert_eq!(
        RedisCluster::cmd(to, &["HEXISTS", &leased_name, leased.owner_field()]).int(),
        Some(1)
    );
    // The waiter's subscription moved with the slot.
    let ch = channel(&name);
    assert!(eventually(WITHIN, || async { shard_subscribers(&c, &ch) == 1 }).await);
    let released = Instant::now();
    guard.unlock().await.unwrap();
    let g = woke_within(waiter, released, Duration::from_millis(1000)).await;
    g.unlock().await.unwrap();
    assert_eq!(
        leased.unlock().await.unwrap(),
        redisson_lock::UnlockOutcome::Released
    );

    let released = Instant::now();
    fair_guard.unlock().await.unwrap();
    let g = woke_within(fair_waiter, released, Duration::from_millis(1000))
        .await
        .expect("the queued fair waiter acquires");
    g.unlock().await.unwrap();
}

/// `kill -9` of the lock's master: after the automatic failover the holder's renewals go to
/// the promoted replica. When the lock is not there (asynchronous replication lost it; simulated
/// here by deleting it on the new master, since a replica receives the stream into its socket
/// even while stopped), the renewal finds the field gone and the loss signal fires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_fails_over_and_a_lock_missing_there_fires_the_loss_signal() {
    let c = RedisCluster::start();
    let timeout = Duration::from_secs(12);
    let config = Config::default().lock_watchdog_timeout(timeout);
    let holder = client(&c, config).await;
    let name = c.name_per_master("killed-").remove(2);
    let master = c.master_for_key(&name);
    let guard = holder.get_lock(&name).lock().await.unwrap();
    let idx = c.masters().iter().position(|m| *m == master).unwrap();
    let (_, promoted) = c.kill_master(idx).await;
    let failed_over = Instant::now();
    assert_eq!(c.master_for_key(&name), promoted);
    // A renewal sent after the failover reached the promoted replica (where the replicated lock
    // is): the deadline moved past what any earlier renewal could give.
    assert!(
        eventually(Duration::from_secs(20), || async {
            guard.valid_until() > failed_over + timeout - Duration::from_secs(1)
        })
        .await,
        "renewals continue on the new master"
    );
    assert!(held_again(|| guard.state()).await);
    let admin = Admin::connect(&c.cluster_url()).await;
    let _: i64 = fred::interfaces::KeysInterface::del(&admin.redis, name.as_str())
        .await
        .unwrap();
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(8), guard.lost())
        .await
        .expect("the next renewal finds the field gone");
    assert!(
        guard.valid_until() > Instant::now(),
        "reported by the renewal, before the deadline would have passed"
    );
    assert!(
        started.elapsed() < timeout / 3 + Duration::from_secs(2),
        "within one renewal period"
    );
    assert!(matches!(guard.unlock().await, Err(Error::NotHeld { .. })));
}

/// `HGET key field` on a cluster replica (after `READONLY` on the same connection).
fn replica_hget(port: u16, key: &str, field: &str) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run redis-cli");
    let script = format!("READONLY\nHGET {key} {field}\n");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines().nth(1).unwrap_or_default().trim().to_owned()
}

/// Replica sync on a cluster (on by default): the script and the `WAIT` go to the master that
/// owns the key, so every master's replica has the hold when the acquisition returns; with
/// that master's replica silent (`DEBUG SLEEP`), the acquisition is undone and fails
/// `NotReplicated`, leaving nothing on the master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_replica_sync_waits_on_the_keys_master_and_undoes_without_an_ack() {
    let c = RedisCluster::start();
    // A fresh replica's first acknowledgement can take about a second (it reports `online`
    // before it acknowledges anything), and the machine may be loaded: the healthy part
    // allows 10 s; the silent part needs a timeout shorter than the replica's sleep.
    let patient = client(
        &c,
        Config::default().replicas_sync_timeout(Duration::from_secs(10)),
    )
    .await;
    let client = client(
        &c,
        Config::default().replicas_sync_timeout(Duration::from_millis(300)),
    )
    .await;
    for name in c.name_per_master("replica-sync") {
        let lock = patient.get_lock(&name);
        let g = lock.try_lock().await.unwrap().expect("acquired");
        let count = replica_hget(c.replica_for_key(&name), &name, &lock.owner_field());
        assert_eq!(count, "1", "{name}: the replica has the hold on return");
        let stats = RedisCluster::cmd(c.master_for_key(&name), &["INFO", "commandstats"]).text();
        assert!(
            stats.contains("cmdstat_wait:"),
            "{name}: WAIT on its master"
        );
        g.unlock().await.unwrap();
    }

    let name = c.name_per_master("replica-silent").remove(0);
    let (master, replica) = (c.master_for_key(&name), c.replica_for_key(&name));
    let lock = client.get_lock(&name);
    let mut refused = None;
    for _ in 0..5 {
        let sleeper = tokio::task::spawn_blocking(move || {
            RedisCluster::query(replica, &["DEBUG", "SLEEP", "1.5"])
        });
        while !sleeper.is_finished() {
            match lock.try_lock().await {
                Err(e) => {
                    refused = Some(e);
                    break;
                }
                Ok(Some(g)) => {
                    g.unlock().await.unwrap();
                }
                Ok(None) => panic!("nobody else holds {name}"),
            }
        }
        let _ = sleeper.await;
        if refused.is_some() {
            break;
        }
    }
    let e = refused.expect("an acquisition while the replica slept");
    assert!(
        matches!(
            e,
            Error::NotReplicated {
                wanted: 1,
                acked: 0,
                ..
            }
        ),
        "{e:?}"
    );
    let exists = RedisCluster::cmd(master, &["EXISTS", &name]).int();
    assert_eq!(exists, Some(0), "the undone acquisition left nothing");
    // The replica is back: acquisitions succeed again.
    let g = lock.try_lock().await.unwrap().expect("acquired");
    g.unlock().await.unwrap();
    client.shutdown().await;
}

/// Issue 23: `kill -9` of one master puts in doubt the holds on its slots at once (before the
/// failover), not the holds on the other masters; after the failover the promoted replica's
/// copy confirms the hold and it is held again. (While fred reconnects the cluster, commands to
/// every node wait: a renewal that times out then puts its holds in doubt too, until the next
/// renewal confirms them.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_master_puts_its_slots_holds_in_doubt_until_the_new_master_confirms() {
    use redisson_lock::HoldState;
    let c = RedisCluster::start();
    let config = Config::default().lock_watchdog_timeout(Duration::from_secs(15));
    let holder = client(&c, config).await;
    let names = c.name_per_master("doubt-");
    let mut guards = Vec::new();
    for name in &names {
        guards.push(holder.get_lock(name).lock().await.unwrap());
    }
    let victim = c.master_for_key(&names[1]);
    // The hold reached the victim's replica (replication is asynchronous).
    let replica = c.replica_for_key(&names[1]);
    let field = guards[1].owner_field().to_owned();
    assert!(
        eventually(WITHIN, || async {
            replica_hget(replica, &names[1], &field) == "1"
        })
        .await
    );
    let idx = c.masters().iter().position(|m| *m == victim).unwrap();
    let killed = Instant::now();
    let kill = c.kill_master(idx);
    let told = async {
        guards[1].lost().await;
        (killed.elapsed(), guards[0].state(), guards[2].state())
    };
    let ((_, promoted), (told, first, third)) = tokio::join!(kill, told);
    let failed_over = killed.elapsed();
    assert_eq!(c.master_for_key(&names[1]), promoted);
    assert!(
        told < failed_over,
        "told {told:?}, failover {failed_over:?}"
    );
    assert_eq!(
        (first, third),
        (HoldState::Held, HoldState::Held),
        "the dropped connection put in doubt only the holds on the killed master's slots"
    );
    assert!(
        eventually(Duration::from_secs(20), || async {
            guards.iter().all(|g| g.state() == HoldState::Held)
        })
        .await,
        "confirmed on the promoted replica: {:?}",
        guards.iter().map(|g| g.state()).collect::<Vec<_>>()
    );
    println!(
        "in doubt {told:?} after the kill; failover after {failed_over:?}; all held again after \
         {:?}",
        killed.elapsed()
    );
    for g in guards {
        g.unlock().await.unwrap();
    }
}

/// The recipes across a manual failover of their names' master: the leader keeps its term
/// (held again on the promoted replica, with the same fencing token, and another client's view
/// names it) and another candidate does not win meanwhile, not even for longer than a watchdog
/// timeout; a run-once job of the same master keeps its name (another client's run-once
/// skips) and ends `Ran`. Once the leader resigns, the other candidate wins with a later term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_election_and_a_run_once_job_keep_their_names_across_a_failover() {
    let c = RedisCluster::start();
    let config = Config::default().lock_watchdog_timeout(Duration::from_secs(3));
    let (a, b) = (client(&c, config.clone()).await, client(&c, config).await);
    let admin = Admin::connect(&c.cluster_url()).await;
    let n = c.name_per_master("recipe-").remove(1);
    // In the election's slot: `{n}:job` hashes as `n`.
    let job_name = format!("{{{n}}}:job");

    let leadership = a.get_election(&n).campaign().await.unwrap();
    let term = leadership.term();
    let (end_job, job_may_end) = tokio::sync::oneshot::channel::<()>();
    let job = tokio::spawn({
        let (a, job_name) = (a.clone(), job_name.clone());
        async move {
            a.run_once(
                &job_name,
                Duration::ZERO,
                Duration::from_secs(60),
                |_| async move {
                    let _ = job_may_end.await;
                },
            )
            .await
        }
    });
    assert!(
        eventually(WITHIN, || async { admin.exists(&job_name).await }).await,
        "the job took its name"
    );

    let replica = c.replica_for_key(&n);
    c.failover(replica).await;
    assert_eq!(c.master_for_key(&n), replica);
    // Two renewals after the failover, on the promoted replica: the leadership held by them.
    let calls = a.stats().renewal_calls;
    assert!(eventually(WITHIN, || async { a.stats().renewal_calls >= calls + 2 }).await);
    assert!(
        held_again(|| leadership.state()).await,
        "the leader held again"
    );
    let seen = b
        .get_election(&n)
        .leader()
        .await
        .unwrap()
        .expect("a leader after the failover");
    assert_eq!(seen.term, term, "the same term");
    assert!(seen.holder.starts_with(a.id()), "led by a: {seen:?}");
    // Longer than a watchdog timeout: a leadership whose renewals stopped would have expired.
    assert!(
        b.get_election(&n)
            .try_campaign_for(Duration::from_secs(4))
            .await
            .unwrap()
            .is_none(),
        "another candidate won while the leader held"
    );
    assert!(
        matches!(
            b.run_once(
                &job_name,
                Duration::ZERO,
                Duration::from_secs(1),
                |_| async {}
            )
            .await
            .unwrap(),
            RunOnce::Skipped
        ),
        "a second run while the job runs"
    );
    end_job.send(()).unwrap();
    assert!(matches!(job.await.unwrap().unwrap(), RunOnce::Ran(())));

    leadership.resign().await.unwrap();
    let next = b
        .get_election(&n)
        .try_campaign_for(WITHIN)
        .await
        .unwrap()
        .expect("the other candidate wins after the resign");
    assert!(next.term() > term, "a later term");
    next.resign().await.unwrap();
}
