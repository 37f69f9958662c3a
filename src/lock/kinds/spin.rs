//! The spin lock (Redisson `RSpinLock`, protocol §10): the RLock layout without pub/sub; waiters
//! retry after a back-off sleep.

use fred::types::Value;

use crate::lock::{
    front::Lock,
    kinds::backoff::BackOff,
    kinds::reentrant,
    protocol::{AcquireReply, AcquireRequest, Protocol, ReleaseRequest, SleepRule},
};
use crate::{
    client::Client,
    conn::scripts::{ScriptCall, ScriptId},
    types::owner::Owner,
};

kind! {
    /// The spin lock kind (Redisson `RSpinLock`): the same hash, field and TTL as
    /// [`RLock`](crate::RLock), but it never publishes and never subscribes; a waiter sleeps a
    /// [`BackOff`] step between attempts (default: exponential 1 ms → 128 ms, ×2, with jitter).
    /// Useful where pub/sub is unavailable; the number of Redis calls per wait is bounded by the
    /// back-off schedule.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// use redisson_lock::{Lock, Spin};
    /// let lock: Lock<Spin> = client.get_spin_lock("import");
    /// # Ok(()) }
    /// ```
    Spin = "spin";

    /// A spin lock handle; see [`Lock`] for the methods and [`Spin`] for the waiting.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let lock: redisson_lock::SpinLock = client.get_spin_lock("import"); // no pub/sub: polls
    /// let maybe = lock.try_lock_for(std::time::Duration::from_secs(1)).await?;
    /// # Ok(()) }
    /// ```
    type SpinLock;

    /// A hold of a [`SpinLock`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let guard: redisson_lock::SpinGuard = client.get_spin_lock("import").lock().await?;
    /// # Ok(()) }
    /// ```
    type SpinGuard;
}

struct SpinProtocol {
    base: reentrant::ReentrantProtocol,
    backoff: BackOff,
}

impl Protocol for SpinProtocol {
    pass_on!(name, renewal);

    fn sleep(&self) -> SleepRule {
        SleepRule::BackOff(Box::new(self.backoff.clone()))
    }

    fn acquire_call(&self, req: AcquireRequest<'_>) -> (ScriptCall, AcquireReply) {
        (self.base.acquire_call(req), AcquireReply::NilOrPttl)
    }

    /// `KEYS = [N, receipt]`, `ARGV = [lease, field, receipt PX]` (no message).
    fn release(&self, req: ReleaseRequest<'_>) -> ScriptCall {
        ScriptCall::new(
            ScriptId::SpinRelease,
            vec![self.base.key(), req.receipt.clone()],
            vec![
                Value::from(req.lease_ms as i64),
                Value::from(req.field),
                Value::from(req.receipt_px_ms as i64),
            ],
        )
    }

    /// `KEYS = [N]` (no message).
    fn force_unlock(&self, _publish: &str) -> ScriptCall {
        ScriptCall::new(ScriptId::SpinForceUnlock, vec![self.base.key()], vec![])
    }
}

impl Client {
    /// A spin lock handle for `name` acting for its caller (see [`Client::get_lock`]), with
    /// Redisson's default back-off.
    pub fn get_spin_lock(&self, name: &str) -> SpinLock {
        self.spin_lock(name, None, BackOff::default())
    }

    /// A spin lock handle bound to `owner`, with the given back-off.
    pub fn get_spin_lock_with(&self, name: &str, owner: Owner, backoff: BackOff) -> SpinLock {
        self.spin_lock(name, Some(owner), backoff)
    }

    /// A spin lock handle for `name` that acts for its caller, with the given back-off.
    pub fn get_spin_lock_with_backoff(&self, name: &str, backoff: BackOff) -> SpinLock {
        self.spin_lock(name, None, backoff)
    }

    fn spin_lock(&self, name: &str, owner: Option<Owner>, backoff: BackOff) -> SpinLock {
        Lock::new(self, name, owner, |raw| SpinProtocol {
            base: reentrant::ReentrantProtocol::new(raw),
            backoff,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        conn::scripts::tests::assert_matches_header, lock::kinds::reentrant::tests::release_req,
    };

    #[test]
    fn spin_calls_never_publish_and_match_their_headers() {
        let d = SpinProtocol {
            base: reentrant::ReentrantProtocol::new("n".into()),
            backoff: BackOff::default(),
        };
        let rel = d.release(release_req("u:1"));
        assert_matches_header(&rel);
        assert!(!rel.args.contains(&Value::from("publish")));
        assert_matches_header(&d.force_unlock("publish"));
        assert!(matches!(d.sleep(), SleepRule::BackOff(_)));
    }
}
