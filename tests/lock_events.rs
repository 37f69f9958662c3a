//! Lock events (Redisson's lock listeners): deleted and expired events of a lock's key from
//! keyspace notifications; the server setting checked when asked for, a typed error when off.

mod common;

use std::time::Duration;

use common::RedisServer;
use redisson_lock::{Client, Config, ErrorKind, LockEvent};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_is_a_typed_error() {
    let b = common::Backend::cluster(redisson_lock::ShardedSubscriptionMode::Auto);
    let client = b.client().await;
    let err = client.get_lock(&b.name("ev")).events().await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::EventsUnavailable, "{err}");
}
