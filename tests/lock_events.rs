//! Lock events (Redisson's lock listeners): deleted and expired events of a lock's key from
//! keyspace notifications; the server setting checked when asked for, a typed error when off.
//! On a Redis Cluster (a 3+3 cluster per test: the tests change its settings and topology) the
//! events come from every master, the lock's slot owner at the time, in every sharded mode.

use redisson_lock_test_kit as common;

use std::{sync::mpsc::RecvTimeoutError, time::Duration};

use common::{cluster::RedisCluster, RedisServer};
use redisson_lock::{Client, Config, ErrorKind, LockEvent, LockEvents, ShardedSubscriptionMode};

async fn next(events: &mut redisson_lock::LockEvents) -> LockEvent {
    tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("an event in time")
        .expect("the stream is open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlocks_force_unlocks_and_expiries_are_reported_for_the_locks_name_only() {
    let server = RedisServer::start_with(&["--notify-keyspace-events", "Egx"]);
    let client = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let admin = common::Admin::connect(&server.url()).await;
    let lock = client.get_lock("ev");
    let mut events = lock.events().await.unwrap();

    // Another lock's key is not this lock's event.
    let other = client.get_lock("ev-other").lock().await.unwrap();
    other.unlock().await.unwrap();
    // A release that frees the lock deletes its key.
    let g = lock.lock().await.unwrap();
    g.unlock().await.unwrap();
    assert_eq!(next(&mut events).await, LockEvent::Deleted);
    // A forced unlock too (the non-reentrant lock of the name is the same key).
    let g = client.get_non_reentrant_lock("ev").lock().await.unwrap();
    assert!(lock.force_unlock().await.unwrap());
    assert_eq!(next(&mut events).await, LockEvent::Deleted);
    drop(g);
    // A lease that runs out: the key expires.
    let g = lock
        .lock_with_lease(Duration::from_millis(100))
        .await
        .unwrap();
    assert_eq!(next(&mut events).await, LockEvent::Expired);
    assert!(!admin.exists("ev").await);
    g.keep();
    // Nothing else was reported (the other lock's events were filtered out).
    assert!(
        tokio::time::timeout(Duration::from_millis(300), events.next())
            .await
            .is_err(),
        "no further event"
    );
    // A group lock's hash is deleted with its last value.
    let group = client.get_group_lock("ev-group", ["a", "b"]);
    let mut group_events = group.events().await.unwrap();
    group.lock().await.unwrap().unlock().await.unwrap();
    assert_eq!(next(&mut group_events).await, LockEvent::Deleted);
    // Dropping the streams leaves the channels.
    drop(events);
    drop(group_events);
    assert!(
        common::eventually(Duration::from_secs(2), || async {
            admin.numsub("__keyevent@0__:del").await == 0
        })
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_the_needed_setting_is_a_typed_error_not_a_silent_stream() {
    for setting in ["", "Kgx", "Eg"] {
        let server = RedisServer::start_with(&["--notify-keyspace-events", setting]);
        let client = Client::connect(&server.url(), Config::default())
            .await
            .unwrap();
        let err = client.get_lock("ev").events().await.unwrap_err();
        assert_eq!(
            err.kind(),
            ErrorKind::EventsUnavailable,
            "{setting:?}: {err}"
        );
        assert!(err.to_string().contains("notify-keyspace-events"), "{err}");
        assert_eq!(client.stats().subscribed_channels, 0, "nothing subscribed");
    }
}

/// A stream already waiting for an event when its client shuts down ends (`None`, as
/// documented); it used to wait for ever (its channels' senders live as long as it does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_stream_ends_when_its_client_shuts_down() {
    let server = RedisServer::start_with(&["--notify-keyspace-events", "Egx"]);
    let client = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let mut events = client.get_lock("ev-end").events().await.unwrap();
    let waiting = tokio::spawn(async move { events.next().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    client.shutdown().await;
    let ended = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the stream ends once the client is shut down")
        .unwrap();
    assert_eq!(ended, None);
}

/// A stream whose client is dropped (every handle, no shutdown) ends too: the registry's tasks
/// are gone with the client, so nothing would ever come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_stream_ends_when_its_client_is_dropped() {
    let server = RedisServer::start_with(&["--notify-keyspace-events", "Egx"]);
    let client = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let mut events = client.get_lock("ev-dropped").events().await.unwrap();
    let waiting = tokio::spawn(async move { events.next().await });
    drop(client);
    let ended = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("the stream ends once the client is dropped")
        .unwrap();
    assert_eq!(ended, None);
}

/// The blocking twin: a release's deletion and a lease's expiry come through the iterator and
/// `next_timeout`; a wait with no event times out and keeps the stream; a server without the
/// setting is the same typed error; dropping it leaves the channels; after the client's
/// shutdown the stream ends.
#[test]
fn the_blocking_facade_reports_deletions_and_expiries_and_ends_after_shutdown() {
    let off = RedisServer::start_with(&["--notify-keyspace-events", ""]);
    let client = redisson_lock::blocking::Client::connect(&off.url(), Config::default()).unwrap();
    assert_eq!(
        client.get_lock("ev").events().unwrap_err().kind(),
        ErrorKind::EventsUnavailable
    );
    let server = RedisServer::start_with(&["--notify-keyspace-events", "Egx"]);
    let client =
        redisson_lock::blocking::Client::connect(&server.url(), Config::default()).unwrap();
    let lock = client.get_lock("ev");
    let mut events = lock.events().unwrap();
    assert_eq!(
        events.next_timeout(Duration::from_millis(200)),
        Err(RecvTimeoutError::Timeout)
    );
    lock.lock().unwrap().unlock().unwrap();
    assert_eq!(
        events.next_timeout(Duration::from_secs(5)),
        Ok(LockEvent::Deleted)
    );
    lock.lock_with_lease(Duration::from_millis(100))
        .unwrap()
        .keep();
    assert_eq!(events.next(), Some(LockEvent::Expired));
    // A second stream; dropping both leaves the channel.
    let other = client.get_lock("ev").events().unwrap();
    drop(other);
    drop(events);
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let admin = common::Admin::connect(&server.url()).await;
        assert!(
            common::eventually(Duration::from_secs(2), || async {
                admin.numsub("__keyevent@0__:del").await == 0
            })
            .await,
            "the channels left"
        );
    });
    let mut events = lock.events().unwrap();
    client.shutdown();
    assert_eq!(
        events.next_timeout(Duration::from_secs(5)),
        Err(RecvTimeoutError::Disconnected)
    );
    assert_eq!(events.next(), None);
}

/// `notify-keyspace-events` set to `setting` on every node of the cluster, replicas included
/// (a replica may be promoted).
fn set_everywhere(c: &RedisCluster, setting: &str) {
    for port in c.ports() {
        let reply = RedisCluster::cmd(port, &["CONFIG", "SET", "notify-keyspace-events", setting]);
        assert!(!reply.is_error(), "{port}: {}", reply.text());
    }
}

async fn cluster_client(c: &RedisCluster, config: Config) -> Client {
    let seeds = c.seed_urls();
    let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
    Client::connect_cluster(&seeds, config).await.unwrap()
}

/// `PUBSUB NUMSUB channel` on one node: its own subscribers only (classic pub/sub).
fn numsub(port: u16, channel: &str) -> i64 {
    RedisCluster::cmd(port, &["PUBSUB", "NUMSUB", channel])
        .items()
        .get(1)
        .and_then(|n| n.int())
        .unwrap_or(-1)
}

const DEL: &str = "__keyevent@0__:del";
const EXPIRED: &str = "__keyevent@0__:expired";

/// No event arrives within a short while.
async fn quiet(events: &mut LockEvents) {
    assert!(
        tokio::time::timeout(Duration::from_millis(300), events.next())
            .await
            .is_err(),
        "no further event"
    );
}

/// An unlock and a lease that runs out of `name`, each reported on `events`.
async fn unlock_and_expiry_are_reported(client: &Client, name: &str, events: &mut LockEvents) {
    let lock = client.get_lock(name);
    lock.lock().await.unwrap().unlock().await.unwrap();
    assert_eq!(next(events).await, LockEvent::Deleted, "{name}: unlock");
    let g = lock
        .lock_with_lease(Duration::from_millis(100))
        .await
        .unwrap();
    assert_eq!(next(events).await, LockEvent::Expired, "{name}: lease");
    g.keep();
}

/// The classic subscription on every master and on no replica: one per channel and node for
/// the client, however many streams it has open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_cluster_events_come_from_every_master_in_every_sharded_mode() {
    let c = RedisCluster::start();
    set_everywhere(&c, "Egx");
    let names = c.name_per_master("ev-");
    let masters: Vec<u16> = names.iter().map(|n| c.master_for_key(n)).collect();
    assert_eq!(masters.len(), 3);
    assert!(masters[0] != masters[1] && masters[1] != masters[2] && masters[0] != masters[2]);
    for mode in [
        ShardedSubscriptionMode::Auto,
        ShardedSubscriptionMode::On,
        ShardedSubscriptionMode::Off,
        ShardedSubscriptionMode::Both,
    ] {
        let client = cluster_client(&c, Config::default().sharded_subscription_mode(mode)).await;
        let mut streams = Vec::new();
        for name in &names {
            streams.push(client.get_lock(name).events().await.unwrap());
        }
        for (name, events) in names.iter().zip(streams.iter_mut()) {
            unlock_and_expiry_are_reported(&client, name, events).await;
        }
        // Each stream saw its own lock's events only.
        for events in &mut streams {
            quiet(events).await;
        }
        for &m in &c.masters() {
            assert_eq!(numsub(m, DEL), 1, "{mode:?}: master {m}");
            assert_eq!(numsub(m, EXPIRED), 1, "{mode:?}: master {m}");
        }
        for &r in &c.replicas() {
            assert_eq!(numsub(r, DEL), 0, "{mode:?}: replica {r}");
        }
        // The last stream gone, every master's subscription goes.
        drop(streams);
        assert!(
            common::eventually(Duration::from_secs(5), || async {
                c.masters()
                    .into_iter()
                    .all(|m| numsub(m, DEL) == 0 && numsub(m, EXPIRED) == 0)
            })
            .await,
            "{mode:?}: unsubscribed everywhere"
        );
        client.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_master_without_the_setting_is_named_in_the_error() {
    let c = RedisCluster::start();
    set_everywhere(&c, "Egx");
    let masters = c.masters();
    let (off, other) = (masters[1], masters[0]);
    RedisCluster::cmd(off, &["CONFIG", "SET", "notify-keyspace-events", "Kgx"]);
    let client = cluster_client(&c, Config::default()).await;
    // A lock on another master: the events of any key may come from any master after a move,
    // so every master is asked.
    let name = c.names_on(other, "ev-", 1).remove(0);
    let err = client.get_lock(&name).events().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::EventsUnavailable, "{err}");
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{off}")), "{text}");
    // The setting as that master reports it (Redis reorders the flags).
    let reported = RedisCluster::cmd(off, &["CONFIG", "GET", "notify-keyspace-events"])
        .items()
        .remove(1)
        .text();
    assert!(
        text.contains("notify-keyspace-events") && text.contains(&format!("{reported:?}")),
        "{text}"
    );
    for m in masters.iter().filter(|&&m| m != off) {
        assert!(!text.contains(&format!("127.0.0.1:{m}")), "{text}");
    }
    assert_eq!(client.stats().subscribed_channels, 0, "nothing subscribed");
    // Set on that master too, the events are available.
    RedisCluster::cmd(off, &["CONFIG", "SET", "notify-keyspace-events", "Egx"]);
    let mut events = client.get_lock(&name).events().await.unwrap();
    unlock_and_expiry_are_reported(&client, &name, &mut events).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_still_arrive_after_the_locks_slot_migrates_to_another_master() {
    let c = RedisCluster::start();
    set_everywhere(&c, "Egx");
    let client = cluster_client(&c, Config::default()).await;
    let name = c.name_per_master("mig-").remove(0);
    let mut events = client.get_lock(&name).events().await.unwrap();
    let lock = client.get_lock(&name);
    lock.lock().await.unwrap().unlock().await.unwrap();
    assert_eq!(
        next(&mut events).await,
        LockEvent::Deleted,
        "from the first owner"
    );

    let slot = RedisCluster::slot(&name);
    let from = c.master_for_key(&name);
    let to = c.masters().into_iter().find(|m| *m != from).unwrap();
    c.migrate_slot(slot, from, to).await;
    assert_eq!(c.master_for_key(&name), to);

    unlock_and_expiry_are_reported(&client, &name, &mut events).await;
    assert_eq!(
        RedisCluster::cmd(to, &["EXISTS", &name]).int(),
        Some(0),
        "the key lived and expired on the new owner"
    );
    quiet(&mut events).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_follow_a_failover_to_the_promoted_replica() {
    let c = RedisCluster::start();
    set_everywhere(&c, "Egx");
    let client = cluster_client(&c, Config::default()).await;
    let name = c.name_per_master("fo-").remove(0);
    let mut events = client.get_lock(&name).events().await.unwrap();
    let old = c.master_for_key(&name);
    let replica = c.replica_of(old);
    assert_eq!(numsub(replica, DEL), 0, "a replica is not listened to");

    c.failover(replica).await;
    assert_eq!(c.master_for_key(&name), replica);
    // The client sees the promotion (a topology event or its periodic check) and listens on
    // the new master; the demoted one, now a replica, is left.
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            numsub(replica, DEL) == 1
                && numsub(replica, EXPIRED) == 1
                && numsub(old, DEL) == 0
                && numsub(old, EXPIRED) == 0
        })
        .await,
        "listening on the promoted master {replica}, not on the demoted {old}"
    );
    unlock_and_expiry_are_reported(&client, &name, &mut events).await;
    quiet(&mut events).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_resume_after_the_subscriber_connection_to_a_master_drops() {
    let c = RedisCluster::start();
    set_everywhere(&c, "Egx");
    let client = cluster_client(&c, Config::default()).await;
    let name = c.name_per_master("rc-").remove(1);
    let mut events = client.get_lock(&name).events().await.unwrap();
    let master = c.master_for_key(&name);
    let killed = RedisCluster::cmd(master, &["CLIENT", "KILL", "TYPE", "pubsub"]).int();
    assert!(killed.is_some_and(|n| n >= 1), "{killed:?}");
    // The client reconnects and subscribes again.
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            numsub(master, DEL) == 1 && numsub(master, EXPIRED) == 1
        })
        .await,
        "subscribed again on {master}"
    );
    unlock_and_expiry_are_reported(&client, &name, &mut events).await;
    quiet(&mut events).await;
}

/// The lock's master is killed: until the automatic failover it cannot be listened to; then the
/// promoted replica is, and a new stream (of the same client) opens at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_follow_an_automatic_failover_after_a_master_is_killed() {
    let c = RedisCluster::start();
    set_everywhere(&c, "Egx");
    let client = cluster_client(&c, Config::default()).await;
    let names = c.name_per_master("kill-");
    let (name, other) = (names[0].clone(), names[1].clone());
    let mut events = client.get_lock(&name).events().await.unwrap();
    let idx = c
        .masters()
        .iter()
        .position(|&m| m == c.master_for_key(&name))
        .unwrap();
    let (killed, promoted) = c.kill_master(idx).await;
    assert_eq!(c.master_for_key(&name), promoted);
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            numsub(promoted, DEL) == 1 && numsub(promoted, EXPIRED) == 1
        })
        .await,
        "listening on {promoted}, promoted after {killed} was killed"
    );
    unlock_and_expiry_are_reported(&client, &name, &mut events).await;
    quiet(&mut events).await;
    // Another stream (a lock on another master) joins the live subscriptions: they are ready,
    // and every master of the moment answers the setting check.
    let mut second = tokio::time::timeout(Duration::from_secs(5), client.get_lock(&other).events())
        .await
        .expect("a second stream opens in time")
        .unwrap();
    unlock_and_expiry_are_reported(&client, &other, &mut second).await;
}
