//! The fenced lock (Redisson `RFencedLock`, protocol §9): an RLock whose every acquisition,
//! re-entries included, increments `redisson_lock_token:{name}` and returns the new token.

use fred::types::{Key, Value};

use crate::lock::{
    front::Lock,
    guard::Guard,
    kinds::reentrant,
    protocol::{AcquireReply, AcquireRequest, Protocol},
};
use crate::{
    client::Client,
    conn::scripts::{ScriptCall, ScriptId},
    error::Result,
    types::line::WaitLine,
    types::names,
    types::owner::Owner,
};

kind! {
    /// The fenced lock kind (Redisson `RFencedLock`): the reentrant lock plus a fencing token.
    ///
    /// Every successful acquisition (re-entries included, with or without lease) increments the
    /// counter `redisson_lock_token:{name}`, and the guard carries the new value
    /// ([`FencedGuard::token`](Guard::<Fenced>::token)). A fenced lock and an
    /// [`RLock`](crate::RLock) of the same name are the same lock.
    ///
    /// # Fencing writes
    /// A lease-based lock can be lost while its holder still runs (a pause longer than the lease).
    /// Pass the token with every write to the protected resource and have the resource reject a
    /// token lower than the highest it has accepted; a holder that lost the lock then cannot
    /// overwrite the work of the next one, whose token is larger.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// use redisson_lock::{Fenced, Lock};
    /// let lock: Lock<Fenced> = client.get_fenced_lock("ledger");
    /// # Ok(()) }
    /// ```
    Fenced = "fenced";

    /// A fenced lock handle; see [`Lock`] for the methods and [`Fenced`] for the token.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let lock = client.get_fenced_lock("ledger");
    /// let guard = lock.lock().await?;
    /// let token: u64 = guard.token();
    /// // storage.write_if_token_at_least(token, data)?;
    /// # let _ = token;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    type FencedLock;

    /// A hold of a [`FencedLock`], with its token.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let guard: redisson_lock::FencedGuard = client.get_fenced_lock("ledger").lock().await?;
    /// let token: u64 = guard.token();
    /// # Ok(()) }
    /// ```
    type FencedGuard;
}

struct FencedProtocol {
    base: reentrant::ReentrantProtocol,
    token_key: Key,
}

impl Protocol for FencedProtocol {
    pass_on!(name, sleep, release, renewal, force_unlock);

    fn wait_line(&self) -> Option<WaitLine> {
        Some(WaitLine::Fenced)
    }

    /// `KEYS = [N, token key]`, `ARGV = [lease, field]`; reply `{1, token}` or `{0, pttl}`.
    fn acquire_call(&self, req: AcquireRequest<'_>) -> (ScriptCall, AcquireReply) {
        let call = ScriptCall::new(
            ScriptId::FencedAcquire,
            vec![self.base.key(), self.token_key.clone()],
            vec![Value::from(req.lease_ms as i64), Value::from(req.field)],
        );
        (call, AcquireReply::FlagAndValue)
    }
}

fn token_key(raw_name: &str) -> String {
    names::prefix_name("redisson_lock_token", raw_name)
}

impl Lock<Fenced> {
    /// The current token (0 if the lock was never acquired).
    ///
    /// # Errors
    /// A Redis or connection error.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn token(&self) -> Result<u64> {
        self.handle.check()?;
        let raw = self.raw_name();
        self.handle
            .client()
            .core()
            .counter(&token_key(raw), raw)
            .await
    }
}

impl Guard<Fenced> {
    /// The fencing token of this acquisition: strictly larger than the token of every earlier
    /// acquisition of the lock, as long as the token counter in Redis survives. A loss of
    /// writes (a restart without persistence, `FLUSHALL`, a failover to a replica that had not
    /// received the last increments) restarts it lower, so a resource checking tokens should
    /// refuse a token lower than the highest it accepted *and* an equal one from another
    /// writer (docs/faults.md).
    pub fn token(&self) -> u64 {
        self.token_value()
            .expect("the fenced acquire script always returns a token")
    }
}

impl Client {
    /// A fenced lock handle for `name` acting for its caller (see [`Client::get_lock`]).
    pub fn get_fenced_lock(&self, name: &str) -> FencedLock {
        self.fenced_lock(name, None)
    }

    /// A fenced lock handle acting as `owner`.
    pub fn get_fenced_lock_with_owner(&self, name: &str, owner: Owner) -> FencedLock {
        self.fenced_lock(name, Some(owner))
    }

    fn fenced_lock(&self, name: &str, owner: Option<Owner>) -> FencedLock {
        Lock::new(self, name, owner, |raw| FencedProtocol {
            token_key: Key::from(token_key(&raw)),
            base: reentrant::ReentrantProtocol::new(raw),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{conn::scripts::tests::assert_matches_header, lock::protocol::Attempt};

    #[test]
    fn the_acquire_call_carries_the_token_key() {
        let d = FencedProtocol {
            token_key: Key::from(token_key("n")),
            base: reentrant::ReentrantProtocol::new("n".into()),
        };
        let (call, reply) = d.acquire_call(AcquireRequest {
            field: "u:1",
            lease_ms: 5,
            attempt: Attempt::Once,
        });
        assert_eq!(reply, AcquireReply::FlagAndValue);
        assert_matches_header(&call);
        assert_eq!(call.keys[1], Key::from("redisson_lock_token:{n}"));
    }
}
