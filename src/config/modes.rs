//! The two choices a client makes about the other clients of its locks: how unlock messages
//! travel on a cluster ([`ShardedSubscriptionMode`]) and how this client's owners hand a
//! contended lock to one another ([`LocalHandOff`]).

use std::time::Duration;

/// How unlock messages travel on a Redis Cluster (Redisson's `shardedSubscriptionMode`).
///
/// | Redisson | publishes with | listens with |
/// |---|---|---|
/// | < 3.22 on a cluster | `PUBLISH` | `SUBSCRIBE` |
/// | ≥ 3.22 on a Redis ≥ 7 cluster (`AUTO`) | `SPUBLISH` | `SSUBSCRIBE` |
///
/// Outside a cluster the setting is ignored: standalone and Sentinel deployments always use
/// `PUBLISH`/`SUBSCRIBE`, as Redisson does.
///
/// ```
/// use redisson_lock::{Config, ShardedSubscriptionMode};
/// // A fleet of old and new Redisson clients during a rolling upgrade.
/// let config = Config::default().sharded_subscription_mode(ShardedSubscriptionMode::Both);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ShardedSubscriptionMode {
    /// Sharded pub/sub if the cluster supports it (probed with `PUBSUB SHARDNUMSUB` at connect,
    /// as Redisson does); the default.
    #[default]
    Auto,
    /// Always `SPUBLISH`/`SSUBSCRIBE` (Redisson ≥ 3.22 peers).
    On,
    /// Always `PUBLISH`/`SUBSCRIBE` (Redisson < 3.22 peers).
    Off,
    /// Both at once: releases publish with `SPUBLISH` and `PUBLISH`, waiters listen on both, so
    /// this client wakes and is woken by old and new Redisson fleets alike during a rolling
    /// upgrade. Costs one extra cluster-wide message (the `PUBLISH`) per release.
    Both,
}

/// How the owners of one client hand a contended lock to one another (crate only: Redisson has
/// no local hand-off; every release there is announced and every waiter of every client races).
///
/// Owners of one client that wait for the same lock (reentrant, fenced or write lock) queue
/// locally; a local release hands the lock to the next of them at once, without the unlock
/// message's round trip. That is fast, and unfair to waiters of other clients (Java services,
/// other processes), whose only chance is the unlock message. This setting bounds it.
///
/// ```
/// use std::time::Duration;
/// use redisson_lock::{Config, LocalHandOff};
/// // The default: runs of local hand-overs last at most 10 ms while another client waits.
/// assert_eq!(Config::default().get_local_hand_off(), LocalHandOff::Bounded(Duration::from_millis(10)));
/// // A service alone on its locks keeps every hand-over local.
/// let alone = Config::default().local_hand_off(LocalHandOff::Unbounded);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LocalHandOff {
    /// No local hand-over: after every release the next local owner races for the lock with
    /// the waiters of every other client, as a Redisson client's releasing thread does
    /// (Redisson's behaviour; no local hand-over ever).
    Off,
    /// Local hand-overs while no other client waits; while one does (a subscriber on the lock's
    /// channel beyond this client, `PUBSUB NUMSUB`/`SHARDNUMSUB`, asked at most once per budget
    /// together with a release), a run of local hand-overs ends once it has lasted this long,
    /// or as long as one other client's last turn if that was longer (at most 2 s). The next
    /// local owner then stands back (attempts 50 ms after the release's unlock message) until
    /// every other client that listens has had the lock (the holder's client id is read when
    /// an attempt finds the lock busy), so that a fleet of several processes, Java ones among
    /// them, takes turns. The default, with 10 ms; the worst case in holds and the fleets
    /// measured beside real Redisson are in docs/performance.md.
    Bounded(Duration),
    /// Always hand over locally, never ask who else listens: for a service that knows it is
    /// alone on its locks. Waiters of other clients may then wait as long as this client's
    /// owners keep the lock busy.
    Unbounded,
}

impl Default for LocalHandOff {
    fn default() -> Self {
        LocalHandOff::Bounded(Duration::from_millis(10))
    }
}
