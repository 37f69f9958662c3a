//! The spin lock (Redisson `RSpinLock`, protocol §10): the RLock layout without pub/sub; waiters
//! retry after a back-off sleep.

use std::sync::Arc;

use fred::types::{Key, Value};
use futures::future::BoxFuture;

use super::{
    backoff::BackOff,
    engine::{flag_script, int_script, LockKind, Reply, Waiting},
    handle::{lock_type, LockHandle},
    reentrant::Reentrant,
};
use crate::{
    client::{Client, Core},
    error::Result,
    names,
    owner::Owner,
    scripts::ScriptId,
};

pub(crate) struct Spin {
    base: Reentrant,
    backoff: BackOff,
}

impl LockKind for Spin {
    fn raw_name(&self) -> &str {
        &self.base.name
    }

    fn waiting(&self, _field: &str) -> Waiting {
        Waiting::BackOff(self.backoff.clone())
    }

    fn attempt(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        lease_ms: u64,
        _queue_ms: Option<u64>,
    ) -> BoxFuture<'static, Result<Reply>> {
        self.base.acquire_script(core, field, lease_ms)
    }

    fn release(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        lease_ms: u64,
        request_id: Arc<str>,
    ) -> BoxFuture<'static, Result<Option<i64>>> {
        let keys = vec![
            self.base.key.clone(),
            Key::from(names::unlock_latch(&self.base.name, &request_id)),
        ];
        let args = vec![
            Value::from(lease_ms as i64),
            Value::from(&*field),
            Value::from(core.config.latch_px_ms() as i64),
        ];
        int_script(core, ScriptId::SpinRelease, &self.base.name, keys, args)
    }

    fn force_unlock(&self, core: Arc<Core>) -> BoxFuture<'static, Result<bool>> {
        let keys = vec![self.base.key.clone()];
        flag_script(
            core,
            ScriptId::SpinForceUnlock,
            &self.base.name,
            keys,
            vec![],
        )
    }
}

lock_type! {
    /// A spin lock (Redisson `RSpinLock`): the same hash, field and TTL as [`RLock`](crate::RLock),
    /// but it never publishes and never subscribes; a waiter sleeps a [`BackOff`] step between
    /// attempts (default: exponential 1 ms → 128 ms, ×2, with jitter). Useful where pub/sub is
    /// unavailable; the number of Redis calls per wait is bounded by the back-off schedule.
    SpinLock
}

impl SpinLock {
    pub(crate) fn new(client: Client, name: &str, owner: Owner, backoff: BackOff) -> Self {
        SpinLock {
            handle: LockHandle::new(client, name, owner, |raw| {
                Arc::new(Spin {
                    base: Reentrant::new(raw),
                    backoff,
                })
            }),
        }
    }
}
