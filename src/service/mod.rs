//! The background services a client starts and every lock shares: the subscription registry
//! ([`pubsub`], with the keyspace notifications' subscriptions on every master of a cluster in
//! [`pubsub::keyspace`]), the renewal service and hold states ([`watchdog`]), the batched
//! deletion of spent unlock receipts ([`unlock_receipts`]), the servers' restarts
//! ([`restarts`]) and, on Sentinel, the sentinels' failover events ([`failover`]). They know no
//! lock kind: a kind hands them names, channels and renewal shapes. A service of more than one
//! idea is a folder whose `mod.rs` is its face (the handle the client keeps) over rooms that
//! import only rooms below them.

pub(crate) mod failover;
pub(crate) mod pubsub;
pub(crate) mod restarts;
pub(crate) mod unlock_receipts;
pub(crate) mod watchdog;
