//! The fair lock (Redisson `RFairLock`, protocol §7): FIFO hand-over through a queue list, a
//! sorted set of waiter deadlines (epoch ms) and one wake-up channel per waiter.

use std::{
    sync::Arc,
    time::{SystemTime, UNIX_EPOCH},
};

use fred::types::{Key, Value};
use futures::future::BoxFuture;

use super::{
    engine::{flag_script, int_script, run_script, ttl_script, LockKind, Reply, Waiting},
    handle::{lock_type, LockHandle},
    reentrant::PUBLISH,
};
use crate::{
    client::{Client, Core},
    error::Result,
    names,
    owner::Owner,
    scripts::ScriptId,
};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub(crate) struct Fair {
    name: String,
    key: Key,
    queue: Key,
    timeouts: Key,
    channel: String,
}

impl LockKind for Fair {
    fn raw_name(&self) -> &str {
        &self.name
    }

    fn waiting(&self, field: &str) -> Waiting {
        Waiting::Channel(format!("{}:{field}", self.channel))
    }

    fn attempt(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        lease_ms: u64,
        queue_ms: Option<u64>,
    ) -> BoxFuture<'static, Result<Reply>> {
        let keys = vec![self.key.clone(), self.queue.clone(), self.timeouts.clone()];
        let lease = Value::from(lease_ms as i64);
        let field_v = Value::from(&*field);
        let now = Value::from(now_ms());
        match queue_ms {
            // F-TRY: ARGV = [lease, field, now, wait]; its busy reply 1 is not a TTL, but a
            // single try never sleeps on it.
            None => {
                let wait = Value::from(core.config.fair_lock_wait_timeout.as_millis() as i64);
                let args = vec![lease, field_v, now, wait];
                ttl_script(core, ScriptId::FairTry, &self.name, keys, args)
            }
            // F-ACQ: ARGV = [lease, field, wait, now]; the reply bounds the next sleep.
            Some(wait) => {
                let args = vec![lease, field_v, Value::from(wait as i64), now];
                ttl_script(core, ScriptId::FairAcquire, &self.name, keys, args)
            }
        }
    }

    fn release(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        lease_ms: u64,
        request_id: Arc<str>,
    ) -> BoxFuture<'static, Result<Option<i64>>> {
        let keys = vec![
            self.key.clone(),
            self.queue.clone(),
            self.timeouts.clone(),
            Key::from(self.channel.as_str()),
            Key::from(names::unlock_latch(&self.name, &request_id)),
        ];
        let args = vec![
            Value::from("0"),
            Value::from(lease_ms as i64),
            Value::from(&*field),
            Value::from(now_ms()),
            Value::from(PUBLISH),
            Value::from(core.config.latch_px_ms() as i64),
        ];
        int_script(core, ScriptId::FairRelease, &self.name, keys, args)
    }

    fn give_up(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        queue_ms: u64,
    ) -> Option<BoxFuture<'static, Result<()>>> {
        let keys = vec![self.queue.clone(), self.timeouts.clone()];
        let args = vec![Value::from(&*field), Value::from(queue_ms as i64)];
        let name = self.name.clone();
        Some(Box::pin(async move {
            run_script(&core, ScriptId::FairCancel, &name, keys, args).await?;
            Ok(())
        }))
    }

    fn force_unlock(&self, core: Arc<Core>) -> BoxFuture<'static, Result<bool>> {
        let keys = vec![
            self.key.clone(),
            self.queue.clone(),
            self.timeouts.clone(),
            Key::from(self.channel.as_str()),
        ];
        let args = vec![
            Value::from("0"),
            Value::from(now_ms()),
            Value::from(PUBLISH),
        ];
        flag_script(core, ScriptId::FairForceUnlock, &self.name, keys, args)
    }
}

lock_type! {
    /// A fair lock (Redisson `RFairLock`): reentrant, and waiters acquire in arrival order.
    ///
    /// Keys: the lock hash `N` (as [`RLock`](crate::RLock)), the queue
    /// `redisson_lock_queue:{N}` and the deadlines `redisson_lock_timeout:{N}` (epoch-ms
    /// scores from this machine's clock); each waiter is woken on its own channel
    /// `redisson_lock__channel:{N}:<uuid>:<id>`. A waiter keeps its place for
    /// `fair_lock_wait_timeout` (or its own `try_lock_for` wait) between polls; a dead waiter at
    /// the head is skipped once that passes.
    ///
    /// A waiter that gives up (its wait ends or its future is dropped) leaves the queue at once.
    /// Unlocking a fair lock that is no longer held succeeds, as in Redisson.
    FairLock
}

impl FairLock {
    pub(crate) fn new(client: Client, name: &str, owner: Owner) -> Self {
        FairLock {
            handle: LockHandle::new(client, name, owner, |raw| {
                Arc::new(Fair {
                    key: Key::from(raw.as_str()),
                    queue: Key::from(names::prefix_name("redisson_lock_queue", &raw)),
                    timeouts: Key::from(names::prefix_name("redisson_lock_timeout", &raw)),
                    channel: names::lock_channel(&raw),
                    name: raw,
                })
            }),
        }
    }
}
