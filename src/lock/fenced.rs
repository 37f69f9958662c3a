//! The fenced lock (Redisson `RFencedLock`, protocol §9): an RLock whose every acquisition,
//! re-entries included, increments `redisson_lock_token:{name}` and returns the new token.

use std::sync::Arc;

use fred::{
    interfaces::KeysInterface,
    types::{Key, Value},
};
use futures::future::BoxFuture;

use super::{
    engine::{run_script, LockKind, Reply, Waiting},
    handle::{lock_type, LockHandle},
    reentrant::Reentrant,
};
use crate::{
    client::{Client, Core},
    error::{Error, Result},
    names,
    owner::Owner,
    scripts::ScriptId,
};

pub(crate) struct Fenced {
    base: Reentrant,
    token_key: Key,
}

impl LockKind for Fenced {
    fn raw_name(&self) -> &str {
        &self.base.name
    }

    fn waiting(&self, field: &str) -> Waiting {
        self.base.waiting(field)
    }

    fn attempt(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        lease_ms: u64,
        _queue_ms: Option<u64>,
    ) -> BoxFuture<'static, Result<Reply>> {
        let keys = vec![self.base.key.clone(), self.token_key.clone()];
        let args = vec![Value::from(lease_ms as i64), Value::from(&*field)];
        let name = self.base.name.clone();
        Box::pin(async move {
            let v = run_script(&core, ScriptId::FencedAcquire, &name, keys, args).await?;
            let pair: Vec<i64> = v
                .convert()
                .map_err(|e| Error::Redis(format!("bad fenced reply for {name}: {e}")))?;
            match pair.as_slice() {
                [1, token] => Ok(Reply::Acquired {
                    token: Some(*token),
                }),
                [0, ttl] => Ok(Reply::Busy { ttl: *ttl }),
                other => Err(Error::Redis(format!(
                    "bad fenced reply {other:?} for {name}"
                ))),
            }
        })
    }

    fn release(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        lease_ms: u64,
        request_id: Arc<str>,
    ) -> BoxFuture<'static, Result<Option<i64>>> {
        self.base.release(core, field, lease_ms, request_id)
    }

    fn force_unlock(&self, core: Arc<Core>) -> BoxFuture<'static, Result<bool>> {
        self.base.force_unlock(core)
    }
}

lock_type! {
    /// A fenced lock (Redisson `RFencedLock`): the reentrant lock plus a fencing token.
    ///
    /// Every successful acquisition (re-entries included, with or without lease) increments
    /// the counter `redisson_lock_token:{name}`, and the guard carries the new value
    /// ([`LockGuard::token`](crate::LockGuard::token)). A fenced lock and an [`RLock`](crate::RLock)
    /// of the same name are the same lock.
    ///
    /// # Fencing writes
    /// A lease-based lock can be lost while its holder still runs (a pause longer than the
    /// lease). Pass the token with every write to the protected resource and have the resource
    /// reject a token lower than the highest it has accepted; a holder that lost the lock then
    /// cannot overwrite the work of the next one, whose token is larger.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let lock = client.get_fenced_lock("ledger");
    /// let guard = lock.lock().await?;
    /// let token = guard.token().expect("fenced locks return a token");
    /// // storage.write_if_token_at_least(token, data)?;
    /// # let _ = token;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    FencedLock
}

impl FencedLock {
    pub(crate) fn new(client: Client, name: &str, owner: Owner) -> Self {
        FencedLock {
            handle: LockHandle::new(client, name, owner, |raw| {
                Arc::new(Fenced {
                    token_key: Key::from(names::prefix_name("redisson_lock_token", &raw)),
                    base: Reentrant::new(raw),
                })
            }),
        }
    }

    /// The current token (0 if the lock was never acquired).
    pub async fn token(&self) -> Result<u64> {
        self.handle.check()?;
        let key = names::prefix_name("redisson_lock_token", self.handle.raw_name());
        let v: Option<i64> = self
            .handle
            .client
            .inner
            .core
            .redis
            .get(key)
            .await
            .map_err(|e| self.handle.err(e))?;
        Ok(v.unwrap_or(0).max(0) as u64)
    }
}
