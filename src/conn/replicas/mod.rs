//! Replica-synced acquisition (protocol §6, Redisson's `checkLockSyncedSlaves` and
//! `slavesSyncTimeout`): the replica count of the master, and the connections an acquisition
//! runs on so that its `WAIT` follows the script on the same connection.
//!
//! Why separate connections: `WAIT` blocks the connection it was sent on, server-side, until
//! the replicas acknowledge or the timeout passes. The command connection is multiplexed (every
//! task's releases, renewals and queries share it), so a `WAIT` there would hold all of them up
//! for as long as a lagging replica takes, up to the sync timeout. A `WAIT` sent on another
//! connection proves nothing (it waits for that connection's own writes). So an acquisition
//! that may have to sync checks out one connection of a small pool for itself: the script, and
//! then (only if the script acquired) the `WAIT`, run on it, and nobody else's command does.
//! The pool is made lazily, only once the master is known to have replicas, and holds at most
//! [`POOL_SIZE`](pool::POOL_SIZE) connections; a synced acquisition beyond that waits for a free one (at most one
//! command timeout). Acquisitions where no `WAIT` is needed use the command connection.
//!
//! The `WAIT` is sent after the script's reply, not pipelined with it: a busy attempt (a waiter
//! polling a held lock) wrote nothing and needs no `WAIT`, and a pipelined one would still block
//! while the connection's last write is unacknowledged. The cost is one round trip per
//! successful synced acquisition (the `WAIT` itself needs a replica round trip anyway).
//!
//! Rooms, lowest first: [`memory`] (what a count means, pure), [`count`] (what the servers
//! say: `INFO replication`, the sentinels' replicas), [`pool`] (the pool and the `WAIT`). This
//! file is the face.
//!
//! The replica count: read from `INFO replication` (the `slave<i>` lines with `state=online`;
//! `connected_slaves` also counts replicas in their full sync) when unknown, cached per master
//! (Sentinel: read again when the sentinels name another master), and forgotten when a `WAIT`
//! answers another number or fails. A count of 0 is read again at most every
//! [`ZERO_RECHECK`](memory::ZERO_RECHECK), so replicas that attach later are noticed. It means a lone server (no
//! `WAIT`) only if that master showed no replica online in the last `REPLICAS_REMEMBERED`:
//! replicas that lost their link can still be promoted, so until then one acknowledgement is
//! still wanted. A master is judged by its own replicas: after a Sentinel failover, those the
//! sentinels list for the promoted master that are still alive (see [`Memory`](memory::Memory)), so a promoted
//! master whose old master is gone for good and that has no other replica locks at once, as
//! Redisson does. Before the first `WAIT`, `WAIT 0 0` probes whether the server knows (and
//! lets this user run) `WAIT`; if not, the client never syncs (as Redisson does for managed
//! services without `WAIT`).
//!
//! On a Redis Cluster a pooled "connection" is a cluster client of its own (one connection per
//! node, all private to the acquisition that checked it out): the script is routed by its key,
//! and the `WAIT` is sent to the node that owns the key's slot once the script answered (the
//! node that ran it, also after a `MOVED`). The replica count is cached per master.

mod count;
mod memory;
mod pool;

pub(crate) use pool::{Barrier, ReplicaSync, Synced};
