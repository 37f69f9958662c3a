//! The read-write lock (Redisson `RReadWriteLock`, protocol §8): one hash with a `mode` field,
//! reader fields with per-hold timeout keys, a writer field `<uuid>:<id>:write`, and the channel
//! `redisson_rwlock:{N}` (`0` after a read release wakes one waiter, `1` after a write release
//! wakes all).

use std::sync::{Arc, OnceLock};

use fred::types::{Key, Value};

use crate::lock::{
    front::Lock,
    kinds::reentrant,
    protocol::{AcquireReply, AcquireRequest, Protocol, Query, ReleaseRequest, SleepRule},
};
use crate::{
    client::Client,
    conn::scripts::{ScriptCall, ScriptId},
    service::watchdog::{Layout, RenewalShape},
    types::line::WaitLine,
    types::names,
    types::owner::Owner,
};

kind! {
    /// The read half of a read-write lock: shared with other readers, excluded by a writer (except
    /// the writer's own owner, which may also read). Each read hold has its own timeout key
    /// `{N}:<uuid>:<id>:rwlock_timeout:<k>`, named exactly as Redisson names them so a Java reader's
    /// release sees Rust readers as alive; the watchdog renews them.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// use redisson_lock::{Lock, Read};
    /// let read: Lock<Read> = client.get_read_write_lock("catalog").into_read_lock();
    /// # Ok(()) }
    /// ```
    Read = "read";

    /// The read half of a [`ReadWriteLock`]; see [`Lock`] for the methods.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let rw = client.get_read_write_lock("catalog");
    /// let read: &redisson_lock::ReadLock = rw.read_lock();
    /// let a = read.lock().await?;
    /// let b = client.get_read_write_lock("catalog").read_lock().lock().await?; // readers share
    /// # Ok(()) }
    /// ```
    type ReadLock;

    /// A hold of a [`ReadLock`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let guard: redisson_lock::ReadGuard = client.get_read_write_lock("catalog").read_lock().lock().await?;
    /// # Ok(()) }
    /// ```
    type ReadGuard;
}

kind! {
    /// The write half of a read-write lock: exclusive. Its owner field is `<uuid>:<id>:write`.
    /// Re-entry adds the lease to the remaining TTL; releasing the last write hold while still
    /// reading downgrades the lock to read mode.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// use redisson_lock::{Lock, Write};
    /// let write: Lock<Write> = client.get_read_write_lock("catalog").into_write_lock();
    /// # Ok(()) }
    /// ```
    Write = "write";

    /// The write half of a [`ReadWriteLock`]; see [`Lock`] for the methods.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let rw = client.get_read_write_lock("catalog");
    /// let write: &redisson_lock::WriteLock = rw.write_lock();
    /// let guard = write.lock().await?; // alone: no reader, no other writer
    /// # Ok(()) }
    /// ```
    type WriteLock;

    /// A hold of a [`WriteLock`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let guard: redisson_lock::WriteGuard = client.get_read_write_lock("catalog").write_lock().lock().await?;
    /// # Ok(()) }
    /// ```
    type WriteGuard;
}

/// Names shared by both halves.
struct Names {
    name: String,
    key: Key,
    channel: String,
}

impl Names {
    fn new(raw: String) -> Self {
        Self {
            key: Key::from(raw.as_str()),
            channel: names::prefix_name("redisson_rwlock", &raw),
            name: raw,
        }
    }

    /// `TP(F)` = `{N}:F:rwlock_timeout`.
    fn timeout_base(&self, field: &str) -> Key {
        Key::from(names::suffix_name(
            &self.name,
            &format!("{field}:rwlock_timeout"),
        ))
    }

    fn force_unlock(&self, message: &'static str, mode: &'static str, publish: &str) -> ScriptCall {
        ScriptCall::new(
            ScriptId::RwForceUnlock,
            vec![self.key.clone(), Key::from(self.channel.as_str())],
            vec![
                Value::from(message),
                Value::from(publish),
                Value::from(mode),
            ],
        )
    }

    fn is_locked(&self, mode: &'static str) -> Query {
        Query::Script(ScriptCall::new(
            ScriptId::RwIsLocked,
            vec![self.key.clone()],
            vec![Value::from(mode)],
        ))
    }
}

struct ReadProtocol(Names);

impl Protocol for ReadProtocol {
    fn name(&self) -> &str {
        &self.0.name
    }

    fn sleep(&self) -> SleepRule {
        SleepRule::Channel(self.0.channel.clone())
    }

    /// R-ACQ: `KEYS = [N, TP(F)]`, `ARGV = [lease, F, F:write]`.
    fn acquire_call(&self, req: AcquireRequest<'_>) -> (ScriptCall, AcquireReply) {
        let call = ScriptCall::new(
            ScriptId::ReadAcquire,
            vec![self.0.key.clone(), self.0.timeout_base(req.field)],
            vec![
                Value::from(req.lease_ms as i64),
                Value::from(req.field),
                Value::from(format!("{}:write", req.field)),
            ],
        );
        (call, AcquireReply::NilOrPttl)
    }

    /// R-REL: `KEYS = [N, channel, TP(F), P, receipt]`, `ARGV = ["0", F, publish, receipt PX]`.
    fn release(&self, req: ReleaseRequest<'_>) -> ScriptCall {
        ScriptCall::new(
            ScriptId::ReadRelease,
            vec![
                self.0.key.clone(),
                Key::from(self.0.channel.as_str()),
                self.0.timeout_base(req.field),
                Key::from(names::braced(&self.0.name).as_ref()),
                req.receipt.clone(),
            ],
            vec![
                Value::from_static_str("0"),
                Value::from(req.field),
                Value::from_static_str(req.publish),
                Value::from(req.receipt_px_ms as i64),
            ],
        )
    }

    /// A read hold lives by its own timeout key: a partial release sets the hash's TTL to the
    /// longest hold left.
    fn partial_release_sets_ttl(&self) -> bool {
        false
    }

    /// R-RENEW: `KEYS += [N, P]`, `ARGV += [count, F…]`; the watchdog lists each reader as an
    /// entry of its own (count 1), so each reply flag is one reader's.
    fn renewal(&self) -> RenewalShape {
        RenewalShape {
            script: ScriptId::ReadRenew,
            keys: crate::service::watchdog::ShapeKeys::from([
                self.0.key.clone(),
                Key::from(names::braced(&self.0.name).as_ref()),
            ]),
            layout: Layout::PerLock,
            values: Arc::from([]),
        }
    }

    fn force_unlock(&self, publish: &str) -> ScriptCall {
        self.0.force_unlock("0", "read", publish)
    }

    fn is_locked(&self) -> Query {
        self.0.is_locked("read")
    }
}

struct WriteProtocol(Names);

impl Protocol for WriteProtocol {
    fn name(&self) -> &str {
        &self.0.name
    }

    fn owner_field(&self, base: String) -> String {
        base + ":write"
    }

    fn sleep(&self) -> SleepRule {
        SleepRule::Channel(self.0.channel.clone())
    }

    fn wait_line(&self) -> Option<WaitLine> {
        Some(WaitLine::Write)
    }

    /// W-ACQ: `KEYS = [N]`, `ARGV = [lease, F:write]`.
    fn acquire_call(&self, req: AcquireRequest<'_>) -> (ScriptCall, AcquireReply) {
        let call = ScriptCall::new(
            ScriptId::WriteAcquire,
            vec![self.0.key.clone()],
            vec![Value::from(req.lease_ms as i64), Value::from(req.field)],
        );
        (call, AcquireReply::NilOrPttl)
    }

    /// W-REL: `KEYS = [N, channel, receipt]`, `ARGV = ["1", lease, F:write, publish, receipt PX]`.
    fn release(&self, req: ReleaseRequest<'_>) -> ScriptCall {
        reentrant::release_call(
            ScriptId::WriteRelease,
            "1",
            &self.0.key,
            Key::from(self.0.channel.as_str()),
            req,
        )
    }

    fn renewal(&self) -> RenewalShape {
        RenewalShape::per_hold(&self.0.name)
    }

    fn force_unlock(&self, publish: &str) -> ScriptCall {
        self.0.force_unlock("1", "write", publish)
    }

    fn is_locked(&self) -> Query {
        self.0.is_locked("write")
    }
}

/// A read-write lock (Redisson `RReadWriteLock`). Both halves act as the same owner, so an
/// owner holding the write lock may take the read lock and then release the write lock
/// (downgrade). A reader cannot upgrade: its write attempt waits like anyone else's.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// let rw = client.get_read_write_lock("catalog");
/// let r = rw.read_lock().lock().await?; // many readers at once
/// drop(r);
/// let w = rw.write_lock().lock().await?; // exclusive
/// w.unlock().await?;
/// # Ok(()) }
/// ```
///
/// Each half is made the first time it is asked for (a handle that only ever waits for the
/// write lock carries no read half).
pub struct ReadWriteLock {
    client: Client,
    name: Box<str>,
    /// `None`: both halves act for their callers.
    owner: Option<Owner>,
    read: OnceLock<ReadLock>,
    write: OnceLock<WriteLock>,
}

impl std::fmt::Debug for ReadWriteLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadWriteLock")
            .field("name", &self.name)
            .field("owner", &self.owner)
            .finish()
    }
}

impl ReadWriteLock {
    /// A new read half (what `read_lock` keeps; the blocking facade's halves too).
    pub(crate) fn new_read(&self) -> ReadLock {
        Lock::new(&self.client, &self.name, self.owner, |raw| {
            ReadProtocol(Names::new(raw))
        })
    }

    /// A new write half (what `write_lock` keeps; the blocking facade's halves too).
    pub(crate) fn new_write(&self) -> WriteLock {
        Lock::new(&self.client, &self.name, self.owner, |raw| {
            WriteProtocol(Names::new(raw))
        })
    }
}

/// The accessors of a read-write lock's halves, written once for this lock and the blocking
/// facade's: each half is kept in a `OnceLock` field (`read`, `write`) and made by `new_read`
/// / `new_write` the first time it is asked for.
macro_rules! halves {
    ($read:ty, $write:ty) => {
        /// The read half.
        pub fn read_lock(&self) -> &$read {
            self.read.get_or_init(|| self.new_read())
        }

        /// The write half.
        pub fn write_lock(&self) -> &$write {
            self.write.get_or_init(|| self.new_write())
        }

        /// Both halves, owned (e.g. to make them parts of a multi-lock).
        pub fn into_parts(mut self) -> ($read, $write) {
            (self.take_read(), self.take_write())
        }

        /// The read half, owned.
        pub fn into_read_lock(mut self) -> $read {
            self.take_read()
        }

        /// The write half, owned.
        pub fn into_write_lock(mut self) -> $write {
            self.take_write()
        }

        fn take_read(&mut self) -> $read {
            self.read.take().unwrap_or_else(|| self.new_read())
        }

        fn take_write(&mut self) -> $write {
            self.write.take().unwrap_or_else(|| self.new_write())
        }
    };
}
#[cfg(feature = "blocking")]
pub(crate) use halves;

impl ReadWriteLock {
    halves!(ReadLock, WriteLock);
}

impl Client {
    /// A read-write lock for `name` whose halves act for their caller: each acquisition is made
    /// by the calling task ([`Owner::current`]), so a task that holds the write half takes the
    /// read half as the same owner (a downgrade).
    pub fn get_read_write_lock(&self, name: &str) -> ReadWriteLock {
        self.read_write_lock(name, None)
    }

    /// A read-write lock whose halves act as `owner`.
    pub fn get_read_write_lock_with_owner(&self, name: &str, owner: Owner) -> ReadWriteLock {
        self.read_write_lock(name, Some(owner))
    }

    fn read_write_lock(&self, name: &str, owner: Option<Owner>) -> ReadWriteLock {
        ReadWriteLock {
            client: self.clone(),
            name: name.into(),
            owner,
            read: OnceLock::new(),
            write: OnceLock::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        conn::scripts::tests::assert_matches_header,
        lock::{kinds::reentrant::tests::release_req, protocol::Attempt},
    };

    #[test]
    fn read_and_write_calls_match_their_headers_and_the_suffix_rule() {
        let read = ReadProtocol(Names::new("n".into()));
        let req = AcquireRequest {
            field: "u:1",
            lease_ms: 10,
            attempt: Attempt::Once,
        };
        let (acq, _) = read.acquire_call(req);
        assert_matches_header(&acq);
        assert_eq!(acq.keys[1], Key::from("{n}:u:1:rwlock_timeout"));
        assert_eq!(acq.args[2], Value::from("u:1:write"));
        let rel = read.release(release_req("u:1"));
        assert_matches_header(&rel);
        assert_eq!(rel.keys[3], Key::from("{n}"));
        assert_eq!(
            read.renewal().keys.to_vec(),
            vec![Key::from("n"), Key::from("{n}")]
        );
        assert_matches_header(&read.force_unlock("publish"));

        let braced = ReadProtocol(Names::new("{t}:n".into()));
        assert_eq!(braced.renewal().keys.to_vec()[1], Key::from("{t}:n"));

        let write = WriteProtocol(Names::new("n".into()));
        assert_eq!(write.owner_field("u:1".into()), "u:1:write");
        let (acq, _) = write.acquire_call(req);
        assert_matches_header(&acq);
        let rel = write.release(release_req("u:1:write"));
        assert_matches_header(&rel);
        assert_eq!(rel.args[0], Value::from("1"));
        assert_eq!(rel.keys[1], Key::from("redisson_rwlock:{n}"));
        match write.is_locked() {
            Query::Script(call) => assert_matches_header(&call),
            other => panic!("{other:?}"),
        }
    }
}
