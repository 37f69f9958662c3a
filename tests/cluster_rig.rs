//! The Redis Cluster test rig, and what fred 10.1 does on a cluster (raw fred, no crate code):
//! how scripts and sharded pub/sub are routed, and what a client sees across a manual
//! failover, a slot migration and a killed master. Each assertion records an observed
//! behaviour the cluster support relies on or has to work around (see the notes of each test).

use redisson_lock_test_kit as common;

use std::time::Duration;

use common::cluster::{RedisCluster, Reply};
use fred::{
    clients::{Client as FredClient, SubscriberClient},
    error::ErrorKind,
    interfaces::{ClientLike, EventInterface, KeysInterface, LuaInterface, PubsubInterface},
    types::{
        config::{Config as FredConfig, Options, ReconnectPolicy, Server, ServerConfig},
        Builder, ClusterHash, CustomCommand, MessageKind, Value,
    },
};
use tokio::sync::broadcast::Receiver;

/// Writes both keys, returns the first: any two keys of one slot.
const SCRIPT: &str = "redis.call('SET', KEYS[1], ARGV[1]); redis.call('SET', KEYS[2], ARGV[1]); \
                      return redis.call('GET', KEYS[1])";

/// fred's "Too many failed write attempts." (a command re-queued after MOVED with no attempt left).
const NO_ATTEMPT_LEFT: &str = "Too many failed write attempts.";

fn builder(config: FredConfig, attempts: u32) -> Builder {
    let mut b = Builder::from_config(config);
    b.set_policy(ReconnectPolicy::new_exponential(0, 50, 1000, 2));
    b.with_connection_config(|c| c.max_command_attempts = attempts);
    b
}

/// A clustered fred client from the `redis-cluster://…?node=…` seed URL.
async fn client(c: &RedisCluster, attempts: u32) -> FredClient {
    let client = builder(FredConfig::from_url(&c.cluster_url()).unwrap(), attempts)
        .build()
        .unwrap();
    client.init().await.unwrap();
    client
}

async fn subscriber(c: &RedisCluster) -> SubscriberClient {
    let sub = builder(FredConfig::from_url(&c.cluster_url()).unwrap(), 3)
        .build_subscriber_client()
        .unwrap();
    sub.init().await.unwrap();
    sub
}

/// PING on the connection of the shard that owns `channel`: the barrier after SSUBSCRIBE.
async fn barrier(sub: &SubscriberClient, channel: &str) {
    let slot = RedisCluster::slot(channel);
    let _: Value = sub
        .with_options(&Options {
            cluster_hash: Some(ClusterHash::Custom(slot)),
            ..Default::default()
        })
        .ping(None)
        .await
        .unwrap();
}

/// The next message as (channel, value), if one comes within `within`.
async fn next_msg(
    rx: &mut Receiver<fred::types::Message>,
    within: Duration,
) -> Option<(String, String)> {
    match tokio::time::timeout(within, rx.recv()).await {
        Ok(Ok(m)) => {
            assert_eq!(m.kind, MessageKind::SMessage);
            Some((
                m.channel.to_string(),
                m.value.as_string().unwrap_or_default(),
            ))
        }
        _ => None,
    }
}

fn script_exists(port: u16, sha: &str) -> bool {
    RedisCluster::cmd(port, &["SCRIPT", "EXISTS", sha]).items()[0] == Reply::Int(1)
}

fn shardnumsub(port: u16, channel: &str) -> i64 {
    RedisCluster::cmd(port, &["PUBSUB", "SHARDNUMSUB", channel]).items()[1]
        .int()
        .unwrap()
}

fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

/// `SCRIPT LOAD` on one node: `custom` honours `with_cluster_node`, `script_load` does not.
async fn load_on(fc: &FredClient, port: u16) -> String {
    fc.with_cluster_node(Server::new("127.0.0.1", port))
        .custom(
            CustomCommand::new_static("SCRIPT", ClusterHash::Random, false),
            vec!["LOAD", SCRIPT],
        )
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fixture_is_a_settled_cluster_of_three_shards() {
    let c = RedisCluster::shared();
    eprintln!("shared cluster started in {:?}", c.started_in());
    let masters = c.masters();
    assert_eq!(masters.len(), 3);
    assert_eq!(c.replicas().len(), 3);
    for &m in &masters {
        assert_eq!(c.master_of(c.replica_of(m)), m);
    }
    assert_eq!(c.seed_urls().len(), 6);
    assert_eq!(c.master_of_slot(0), masters[0]);
    assert_eq!(c.master_of_slot(16383), masters[2]);
    // fred's local CRC16 (fred::util::redis_keyslot) agrees with CLUSTER KEYSLOT, hash tags too.
    for key in [
        "orders",
        "{user1}:lock",
        "redisson_lock__channel:{user1}:lock",
        "a{b",
        "a{}b",
        "{}x",
    ] {
        assert_eq!(RedisCluster::slot(key), c.keyslot(key), "{key}");
    }
    // Redisson's prefix rule keeps a name's slot: `prefix:{N}` hashes on N.
    assert_eq!(
        RedisCluster::slot("redisson_lock__channel:{orders}"),
        c.keyslot("orders")
    );
    let names = c.name_per_master("lock:");
    let owners: Vec<u16> = names.iter().map(|n| c.master_for_key(n)).collect();
    assert_eq!(owners, masters);
    for &m in &masters {
        for n in c.names_on(m, "n:", 5) {
            assert_eq!(c.master_for_key(&n), m);
        }
    }

    // Both seed forms give a working clustered client.
    let seeds: Vec<(String, u16)> = c
        .live_ports()
        .into_iter()
        .map(|p| ("127.0.0.1".to_string(), p))
        .collect();
    let from_list = FredConfig {
        server: ServerConfig::new_clustered(seeds),
        ..Default::default()
    };
    for config in [from_list, FredConfig::from_url(&c.cluster_url()).unwrap()] {
        assert!(config.server.is_clustered());
        let fc = builder(config, 3).build().unwrap();
        fc.init().await.unwrap();
        for n in &names {
            let _: () = fc.set(n.as_str(), "1", None, None, false).await.unwrap();
        }
        fc.quit().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scripts_are_routed_by_their_keys_and_must_stay_in_one_slot() {
    let c = RedisCluster::shared();
    let fc = client(c, 3).await;
    let masters = c.masters();

    // `script_load` hashes its first string argument, the script text: one master only.
    let sha: String = fc.script_load(SCRIPT).await.unwrap();
    let text_owner = c.master_of_slot(RedisCluster::slot(SCRIPT));
    for &m in &masters {
        assert_eq!(
            script_exists(m, &sha),
            m == text_owner,
            "script_load on {m}"
        );
    }
    // LuaInterface is not implemented for WithOptions: `with_cluster_node(..).script_load`
    // derefs to the plain client and ignores the pin (it still lands on the text's owner).
    let other = *masters.iter().find(|&&m| m != text_owner).unwrap();
    RedisCluster::cmd(text_owner, &["SCRIPT", "FLUSH"]);
    let _: String = fc
        .with_cluster_node(Server::new("127.0.0.1", other))
        .script_load(SCRIPT)
        .await
        .unwrap();
    assert!(script_exists(text_owner, &sha) && !script_exists(other, &sha));
    // `custom` does honour the pin.
    assert_eq!(load_on(&fc, other).await, sha);
    assert!(script_exists(other, &sha));
    // `script_load_cluster` loads on every master.
    let _: String = fc.script_load_cluster(SCRIPT).await.unwrap();
    for &m in &masters {
        assert!(script_exists(m, &sha), "script_load_cluster on {m}");
    }

    // EVALSHA goes to the master of its keys' slot (fred checks the keys, then routes by slot).
    for name in c.name_per_master("rig:") {
        let keys = vec![format!("{{{name}}}:a"), format!("{{{name}}}:b")];
        let v: String = fc.evalsha(&sha, keys.clone(), vec!["v"]).await.unwrap();
        assert_eq!(v, "v");
        let owner = c.master_for_key(&name);
        for &m in &masters {
            let n = RedisCluster::query(m, &["EXISTS", keys[0].as_str(), keys[1].as_str()]);
            if m == owner {
                assert_eq!(n, Ok(Reply::Int(2)));
            } else {
                let e = n.unwrap().text();
                assert!(
                    e.starts_with("MOVED") && e.ends_with(&format!(":{owner}")),
                    "{e}"
                );
            }
        }
    }

    // Keys of two slots of one master: the server refuses (CROSSSLOT), EVAL and EVALSHA alike.
    let two = c.names_on(masters[0], "x:", 2);
    assert_ne!(RedisCluster::slot(&two[0]), RedisCluster::slot(&two[1]));
    let e = fc
        .evalsha::<Value, _, _, _>(&sha, two.clone(), vec!["v"])
        .await
        .unwrap_err();
    assert!(e.details().starts_with("CROSSSLOT"), "{e:?}");
    let e = fc
        .eval::<Value, _, _, _>(SCRIPT, two.clone(), vec!["v"])
        .await
        .unwrap_err();
    assert!(e.details().starts_with("CROSSSLOT"), "{e:?}");
    // Keys of two masters: fred refuses before sending (ErrorKind::Cluster).
    let names = c.name_per_master("y:");
    let e = fc
        .evalsha::<Value, _, _, _>(&sha, vec![names[0].clone(), names[1].clone()], vec!["v"])
        .await
        .unwrap_err();
    assert_eq!(*e.kind(), ErrorKind::Cluster);
    assert_eq!(
        e.details(),
        "All keys must belong to the same cluster node."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharded_pubsub_lives_on_the_shard_of_the_channel() {
    let c = RedisCluster::shared();
    let fc = client(c, 3).await;
    let sub = subscriber(c).await;
    let mut rx = sub.message_rx();
    let chans: Vec<String> = c
        .name_per_master("ch:")
        .iter()
        .map(|n| channel(n))
        .collect();
    for ch in &chans {
        sub.ssubscribe(ch.as_str()).await.unwrap();
        barrier(&sub, ch).await;
        // PING with a message hashes the message: also a barrier on the channel's shard.
        let pong: Vec<String> = sub.ping(Some(ch.clone())).await.unwrap();
        assert_eq!(pong, vec!["pong".to_string(), ch.clone()]);
    }
    assert_eq!(sub.tracked_shard_channels().len(), 3);
    for ch in &chans {
        let owner = c.master_for_key(ch);
        // SPUBLISH is routed by the channel; its reply counts the subscribers on that node.
        let n: i64 = fc.spublish(ch.as_str(), "0").await.unwrap();
        assert_eq!(n, 1);
        assert_eq!(
            next_msg(&mut rx, Duration::from_secs(5)).await,
            Some((ch.clone(), "0".into()))
        );
        // PUBSUB SHARDNUMSUB with a channel is routed by the channel; counts are per node.
        let v: Vec<Value> = fc.pubsub_shardnumsub(ch.as_str()).await.unwrap();
        assert_eq!(v[1].as_i64(), Some(1));
        for m in c.masters() {
            assert_eq!(
                shardnumsub(m, ch),
                i64::from(m == owner),
                "SHARDNUMSUB on {m}"
            );
        }
        // Classic PUBLISH is another namespace: not delivered to SSUBSCRIBE.
        let n: i64 = fc.publish(ch.as_str(), "0").await.unwrap();
        assert_eq!(n, 0);
        assert_eq!(next_msg(&mut rx, Duration::from_millis(200)).await, None);
    }

    // A replica serves SSUBSCRIBE for its master's slots and gets SPUBLISH through replication,
    // but the master's SPUBLISH reply does not count it.
    let ch = channel("on-replica");
    let replica = c.replica_for_key(&ch);
    let rsub = builder(
        FredConfig::from_url(&RedisCluster::url(replica)).unwrap(),
        3,
    )
    .build_subscriber_client()
    .unwrap();
    rsub.init().await.unwrap();
    let mut rrx = rsub.message_rx();
    rsub.ssubscribe(ch.as_str()).await.unwrap();
    let _: Value = rsub.ping(None).await.unwrap();
    assert_eq!(shardnumsub(replica, &ch), 1);
    let n: i64 = fc.spublish(ch.as_str(), "1").await.unwrap();
    assert_eq!(n, 0);
    assert_eq!(
        next_msg(&mut rrx, Duration::from_secs(5)).await,
        Some((ch, "1".into()))
    );
}

/// The first SSUBSCRIBE after a topology change may hit MOVED: fred builds pub/sub commands with
/// one attempt whatever `max_command_attempts` says, so it fails with NO_ATTEMPT_LEFT, but the
/// MOVED made fred re-read the slots and the next one succeeds. Returns whether the first failed.
async fn ssubscribe_again(sub: &SubscriberClient, ch: &str) -> bool {
    match sub.ssubscribe(ch).await {
        Ok(()) => false,
        Err(e) => {
            assert_eq!(e.details(), NO_ATTEMPT_LEFT, "{e:?}");
            sub.ssubscribe(ch).await.unwrap();
            true
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fred_across_failover_migration_and_a_killed_master() {
    let c = RedisCluster::start();
    eprintln!("owned cluster started in {:?}", c.started_in());
    let fc = client(&c, 3).await; // fred's default attempts
    let one = client(&c, 1).await; // the crate's standalone setting
    let mut changes = fc.cluster_change_rx();
    let sub = subscriber(&c).await;
    let mut sub_changes = sub.cluster_change_rx();
    let mut sub_reconnects = sub.reconnect_rx();
    let mut rx = sub.message_rx();

    let name = c.name_per_master("lock:")[0].clone();
    let keys = vec![name.clone(), format!("{{{name}}}:b")];
    let ch = channel(&name);
    let slot = RedisCluster::slot(&name);
    let sha: String = fc.script_load_cluster(SCRIPT).await.unwrap();
    let _: String = fc.evalsha(&sha, keys.clone(), vec!["1"]).await.unwrap();
    let _: Option<String> = one.get(name.as_str()).await.unwrap();
    sub.ssubscribe(ch.as_str()).await.unwrap();
    barrier(&sub, &ch).await;
    while sub_reconnects.try_recv().is_ok() {} // the initial connections

    // 1. Manual failover.
    let owner = c.master_for_key(&name);
    let replica = c.replica_of(owner);
    let t = std::time::Instant::now();
    c.failover(replica).await;
    eprintln!("failover {owner} -> {replica}: {:?}", t.elapsed());
    assert_eq!(c.master_for_key(&name), replica);
    // The old master answers MOVED; with one attempt the command fails, but fred re-read the
    // slots, so the next command goes to the new master.
    let e = one
        .get::<Option<String>, _>(name.as_str())
        .await
        .unwrap_err();
    assert_eq!(e.details(), NO_ATTEMPT_LEFT);
    assert_eq!(
        one.get::<Option<String>, _>(name.as_str()).await.unwrap(),
        Some("1".into())
    );
    // With attempts left the MOVED is followed transparently, and announced.
    assert_eq!(
        fc.get::<Option<String>, _>(name.as_str()).await.unwrap(),
        Some("1".into())
    );
    assert!(changes.try_recv().is_ok(), "cluster_change_rx after MOVED");
    // The script cache is not replicated: the promoted replica has no script.
    let e = fc
        .evalsha::<Value, _, _, _>(&sha, keys.clone(), vec!["2"])
        .await
        .unwrap_err();
    assert!(e.details().starts_with("NOSCRIPT"), "{e:?}");
    let _: String = fc.eval(SCRIPT, keys.clone(), vec!["2"]).await.unwrap();
    let _: String = fc.evalsha(&sha, keys.clone(), vec!["2"]).await.unwrap();
    // The server dropped the shard subscription (the slot left the node) and fred did not
    // notice: no event on the subscriber, the message is lost.
    let n: i64 = fc.spublish(ch.as_str(), "0").await.unwrap();
    assert_eq!(n, 0);
    assert_eq!(next_msg(&mut rx, Duration::from_millis(300)).await, None);
    assert!(sub_changes.try_recv().is_err() && sub_reconnects.try_recv().is_err());
    assert!(sub.tracked_shard_channels().contains(ch.as_str()));
    // Subscribing again heals it.
    ssubscribe_again(&sub, &ch).await;
    barrier(&sub, &ch).await;
    let _: i64 = fc.spublish(ch.as_str(), "0").await.unwrap();
    assert_eq!(
        next_msg(&mut rx, Duration::from_secs(5)).await,
        Some((ch.clone(), "0".into()))
    );

    // 2. Slot migration to another master, which never saw the script.
    let owner = c.master_for_key(&name);
    let target = *c.masters().iter().find(|&&m| m != owner).unwrap();
    RedisCluster::cmd(target, &["SCRIPT", "FLUSH"]);
    let t = std::time::Instant::now();
    c.migrate_slot(slot, owner, target).await;
    eprintln!("migrate slot {slot} {owner} -> {target}: {:?}", t.elapsed());
    assert_eq!(c.master_for_key(&name), target);
    assert_eq!(
        RedisCluster::cmd(target, &["EXISTS", keys[0].as_str(), keys[1].as_str()]),
        Reply::Int(2)
    );
    let e = one
        .get::<Option<String>, _>(name.as_str())
        .await
        .unwrap_err();
    assert_eq!(e.details(), NO_ATTEMPT_LEFT);
    assert_eq!(
        one.get::<Option<String>, _>(name.as_str()).await.unwrap(),
        Some("2".into())
    );
    // EVALSHA follows the MOVED to the new owner, which answers NOSCRIPT; EVAL works there.
    let e = fc
        .evalsha::<Value, _, _, _>(&sha, keys.clone(), vec!["3"])
        .await
        .unwrap_err();
    assert!(e.details().starts_with("NOSCRIPT"), "{e:?}");
    let _: String = fc.eval(SCRIPT, keys.clone(), vec!["3"]).await.unwrap();
    // The subscription is dropped again, silently; the first SSUBSCRIBE meets the MOVED of the
    // old owner (fred's routing is stale) and fails, the second lands on the new owner.
    let n: i64 = fc.spublish(ch.as_str(), "0").await.unwrap();
    assert_eq!(n, 0);
    assert_eq!(next_msg(&mut rx, Duration::from_millis(300)).await, None);
    assert!(
        ssubscribe_again(&sub, &ch).await,
        "first SSUBSCRIBE after the migration"
    );
    assert!(
        sub_changes.try_recv().is_ok(),
        "the MOVED re-read the slots"
    );
    barrier(&sub, &ch).await;
    assert_eq!(shardnumsub(target, &ch), 1);
    let n: i64 = fc.spublish(ch.as_str(), "0").await.unwrap();
    assert_eq!(n, 1);
    assert_eq!(
        next_msg(&mut rx, Duration::from_secs(5)).await,
        Some((ch.clone(), "0".into()))
    );

    // 3. SIGKILL of the owner: the automatic failover. The broken connection makes fred
    // reconnect and announce the new master, so `manage_subscriptions` resubscribes by itself.
    let _manage = sub.manage_subscriptions();
    while sub_reconnects.try_recv().is_ok() {}
    let idx = c.masters().iter().position(|&m| m == target).unwrap();
    let t = std::time::Instant::now();
    let (killed, promoted) = c.kill_master(idx).await;
    eprintln!("kill {killed}, {promoted} promoted: {:?}", t.elapsed());
    assert_eq!(c.master_for_key(&name), promoted);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let _: Result<i64, _> = fc.spublish(ch.as_str(), "0").await;
        if next_msg(&mut rx, Duration::from_millis(100))
            .await
            .is_some()
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not resubscribed after the kill"
        );
    }
    eprintln!("resubscribed {:?} after the kill", t.elapsed());
    assert!(
        sub_reconnects.try_recv().is_ok(),
        "reconnect_rx after the kill"
    );
    assert_eq!(
        fc.get::<Option<String>, _>(name.as_str()).await.unwrap(),
        Some("3".into())
    );

    // The killed node comes back as a replica of the node that took its slots.
    c.restart_node(killed).await;
    assert_eq!(c.master_of(killed), promoted);
    assert_eq!(c.masters().len(), 3);
}
