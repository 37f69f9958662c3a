//! The read-write lock (Redisson `RReadWriteLock`, protocol §8): one hash with a `mode` field,
//! reader fields with per-hold timeout keys, a writer field `<uuid>:<id>:write`, and the channel
//! `redisson_rwlock:{N}` (`0` after a read release wakes one waiter, `1` after a write release
//! wakes all).

use std::sync::Arc;

use fred::types::{Key, Value};
use futures::future::BoxFuture;

use super::{
    engine::{flag_script, int_script, ttl_script, LockKind, Reply, Waiting},
    handle::{lock_type, LockHandle},
    reentrant::PUBLISH,
};
use crate::{
    client::{Client, Core},
    error::Result,
    names,
    owner::Owner,
    scripts::ScriptId,
    watchdog::Renewal,
};

/// Names shared by both halves.
struct RwNames {
    name: String,
    key: Key,
    channel: String,
}

impl RwNames {
    fn new(raw: String) -> Self {
        Self {
            key: Key::from(raw.as_str()),
            channel: names::prefix_name("redisson_rwlock", &raw),
            name: raw,
        }
    }

    /// `{N}` (or `N` when it contains `{`): the base of the read timeout keys.
    fn prefix(&self) -> String {
        if self.name.contains('{') {
            self.name.clone()
        } else {
            format!("{{{}}}", self.name)
        }
    }

    /// `TP(F)` = `{N}:F:rwlock_timeout`.
    fn timeout_base(&self, field: &str) -> String {
        names::suffix_name(&self.name, &format!("{field}:rwlock_timeout"))
    }

    fn force_unlock(
        &self,
        core: Arc<Core>,
        message: &'static str,
        mode: &'static str,
    ) -> BoxFuture<'static, Result<bool>> {
        let keys = vec![self.key.clone(), Key::from(self.channel.as_str())];
        let args = vec![
            Value::from(message),
            Value::from(PUBLISH),
            Value::from(mode),
        ];
        flag_script(core, ScriptId::RwForceUnlock, &self.name, keys, args)
    }

    fn is_locked(&self, core: Arc<Core>, mode: &'static str) -> BoxFuture<'static, Result<bool>> {
        let keys = vec![self.key.clone()];
        flag_script(
            core,
            ScriptId::RwIsLocked,
            &self.name,
            keys,
            vec![mode.into()],
        )
    }
}

pub(crate) struct Read(RwNames);

impl LockKind for Read {
    fn raw_name(&self) -> &str {
        &self.0.name
    }

    fn waiting(&self, _field: &str) -> Waiting {
        Waiting::Channel(self.0.channel.clone())
    }

    fn attempt(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        lease_ms: u64,
        _queue_ms: Option<u64>,
    ) -> BoxFuture<'static, Result<Reply>> {
        let keys = vec![self.0.key.clone(), Key::from(self.0.timeout_base(&field))];
        let args = vec![
            Value::from(lease_ms as i64),
            Value::from(&*field),
            Value::from(format!("{field}:write")),
        ];
        ttl_script(core, ScriptId::ReadAcquire, &self.0.name, keys, args)
    }

    fn release(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        _lease_ms: u64,
        request_id: Arc<str>,
    ) -> BoxFuture<'static, Result<Option<i64>>> {
        let keys = vec![
            self.0.key.clone(),
            Key::from(self.0.channel.as_str()),
            Key::from(self.0.timeout_base(&field)),
            Key::from(self.0.prefix()),
            Key::from(names::unlock_latch(&self.0.name, &request_id)),
        ];
        let args = vec![
            Value::from("0"),
            Value::from(&*field),
            Value::from(PUBLISH),
            Value::from(core.config.latch_px_ms() as i64),
        ];
        int_script(core, ScriptId::ReadRelease, &self.0.name, keys, args)
    }

    fn renewal(&self) -> Renewal {
        Renewal::Read {
            prefix: self.0.prefix(),
        }
    }

    fn force_unlock(&self, core: Arc<Core>) -> BoxFuture<'static, Result<bool>> {
        self.0.force_unlock(core, "0", "read")
    }

    fn is_locked(&self, core: Arc<Core>) -> BoxFuture<'static, Result<bool>> {
        self.0.is_locked(core, "read")
    }
}

pub(crate) struct Write(RwNames);

impl LockKind for Write {
    fn raw_name(&self) -> &str {
        &self.0.name
    }

    fn field(&self, base: &str) -> String {
        format!("{base}:write")
    }

    fn waiting(&self, _field: &str) -> Waiting {
        Waiting::Channel(self.0.channel.clone())
    }

    fn attempt(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        lease_ms: u64,
        _queue_ms: Option<u64>,
    ) -> BoxFuture<'static, Result<Reply>> {
        let keys = vec![self.0.key.clone()];
        let args = vec![Value::from(lease_ms as i64), Value::from(&*field)];
        ttl_script(core, ScriptId::WriteAcquire, &self.0.name, keys, args)
    }

    fn release(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        lease_ms: u64,
        request_id: Arc<str>,
    ) -> BoxFuture<'static, Result<Option<i64>>> {
        let keys = vec![
            self.0.key.clone(),
            Key::from(self.0.channel.as_str()),
            Key::from(names::unlock_latch(&self.0.name, &request_id)),
        ];
        let args = vec![
            Value::from("1"),
            Value::from(lease_ms as i64),
            Value::from(&*field),
            Value::from(PUBLISH),
            Value::from(core.config.latch_px_ms() as i64),
        ];
        int_script(core, ScriptId::WriteRelease, &self.0.name, keys, args)
    }

    fn force_unlock(&self, core: Arc<Core>) -> BoxFuture<'static, Result<bool>> {
        self.0.force_unlock(core, "1", "write")
    }

    fn is_locked(&self, core: Arc<Core>) -> BoxFuture<'static, Result<bool>> {
        self.0.is_locked(core, "write")
    }
}

lock_type! {
    /// The read half of a [`ReadWriteLock`]: shared with other readers, excluded by a writer
    /// (except the writer's own owner, which may also read). Each read hold has its own
    /// timeout key `{N}:<uuid>:<id>:rwlock_timeout:<k>`, named exactly as Redisson names them so
    /// a Java reader's release sees Rust readers as alive; the watchdog renews them.
    ReadLock
}

lock_type! {
    /// The write half of a [`ReadWriteLock`]: exclusive. Its owner field is
    /// `<uuid>:<id>:write`. Re-entry adds the lease to the remaining TTL; releasing the last
    /// write hold while still reading downgrades the lock to read mode.
    WriteLock
}

/// A read-write lock (Redisson `RReadWriteLock`). Both halves act as the same owner, so an
/// owner holding the write lock may take the read lock and then release the write lock
/// (downgrade). A reader cannot upgrade: its write attempt waits like anyone else's.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// let rw = client.get_read_write_lock("catalog");
/// let r = rw.read_lock().lock().await?;     // many readers at once
/// drop(r);
/// let w = rw.write_lock().lock().await?;    // exclusive
/// w.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ReadWriteLock {
    read: ReadLock,
    write: WriteLock,
}

impl ReadWriteLock {
    pub(crate) fn new(client: Client, name: &str, owner: Owner) -> Self {
        ReadWriteLock {
            read: ReadLock {
                handle: LockHandle::new(client.clone(), name, owner, |raw| {
                    Arc::new(Read(RwNames::new(raw)))
                }),
            },
            write: WriteLock {
                handle: LockHandle::new(client, name, owner, |raw| {
                    Arc::new(Write(RwNames::new(raw)))
                }),
            },
        }
    }

    /// The read half.
    pub fn read_lock(&self) -> &ReadLock {
        &self.read
    }

    /// The write half.
    pub fn write_lock(&self) -> &WriteLock {
        &self.write
    }
}
