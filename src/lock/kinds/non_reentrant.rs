//! The non-reentrant lock (Redisson 4.4+ `getNonReentrantLock`, sync protocol §5.1): the
//! reentrant lock's keys, channel, release, watchdog and queries, with an acquisition that
//! refuses the holder's second acquisition.

use fred::types::Value;

use crate::lock::{
    front::Lock,
    kinds::reentrant,
    protocol::{AcquireReply, AcquireRequest, Protocol},
};
use crate::{
    client::Client,
    conn::scripts::{ScriptCall, ScriptId},
    error::REENTRY_MARKER,
    types::owner::Owner,
};

kind! {
    /// The non-reentrant lock kind (Redisson 4.4+ `RedissonNonReentrantLock`).
    ///
    /// The same lock on the wire as an [`RLock`](crate::RLock) of the same name (hash `N`, field
    /// `<uuid>:<id>` → `1`, channel `redisson_lock__channel:{N}`), but an acquisition by the owner
    /// that already holds it fails at once with [`Error::Reentry`](crate::Error::Reentry): never
    /// a wait, never a count of 2. An unlock therefore always frees the lock.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// use redisson_lock::{ErrorKind, Lock, NonReentrant};
    /// let lock: Lock<NonReentrant> = client.get_non_reentrant_lock("orders");
    /// let guard = lock.lock().await?;
    /// let again = lock.try_lock().await.unwrap_err();
    /// assert_eq!(again.kind(), ErrorKind::Reentry);
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    NonReentrant = "non_reentrant";

    /// A non-reentrant lock handle; see [`Lock`] for the methods and [`NonReentrant`] for the rule.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let lock: redisson_lock::NonReentrantLock = client.get_non_reentrant_lock("orders");
    /// let guard = lock.lock().await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    type NonReentrantLock;

    /// A hold of a [`NonReentrantLock`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let guard: redisson_lock::NonReentrantGuard =
    ///     client.get_non_reentrant_lock("orders").lock().await?;
    /// # Ok(()) }
    /// ```
    type NonReentrantGuard;
}

/// The reentrant lock's protocol with NR-ACQ as its acquisition.
pub(crate) struct NonReentrantProtocol {
    base: reentrant::ReentrantProtocol,
}

impl Protocol for NonReentrantProtocol {
    // The reentrant lock's wait line too: the same lock on the wire.
    pass_on!(name, sleep, wait_line, release, renewal, force_unlock);

    /// NR-ACQ: `KEYS = [N]`, `ARGV = [lease, field, "NON_REENTRANT_REACQUIRE"]`; nil, the
    /// PTTL, or the marker as an error reply.
    fn acquire_call(&self, req: AcquireRequest<'_>) -> (ScriptCall, AcquireReply) {
        let call = ScriptCall::new(
            ScriptId::NonReentrantAcquire,
            vec![self.base.key()],
            vec![
                Value::from(req.lease_ms as i64),
                Value::from(req.field),
                Value::from(REENTRY_MARKER),
            ],
        );
        (call, AcquireReply::NilOrPttl)
    }
}

impl Client {
    /// A non-reentrant lock handle for `name`, acting for its caller (see [`Client::get_lock`]) (Redisson 4.4+
    /// `getNonReentrantLock`).
    pub fn get_non_reentrant_lock(&self, name: &str) -> NonReentrantLock {
        self.non_reentrant_lock(name, None)
    }

    /// A non-reentrant lock handle acting as `owner`.
    pub fn get_non_reentrant_lock_with_owner(&self, name: &str, owner: Owner) -> NonReentrantLock {
        self.non_reentrant_lock(name, Some(owner))
    }

    fn non_reentrant_lock(&self, name: &str, owner: Option<Owner>) -> NonReentrantLock {
        Lock::new(self, name, owner, |raw| NonReentrantProtocol {
            base: reentrant::ReentrantProtocol::new(raw),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        conn::scripts::tests::assert_matches_header, lock::kinds::reentrant::tests::release_req,
        lock::protocol::Attempt,
    };
    use crate::{service::watchdog::RenewalShape, types::line::WaitLine};
    use fred::types::Key;

    #[test]
    fn acquires_with_the_marker_and_releases_as_the_reentrant_lock() {
        let d = NonReentrantProtocol {
            base: reentrant::ReentrantProtocol::new("n".into()),
        };
        for attempt in [Attempt::Once, Attempt::Queued { queue_ms: 5 }] {
            let (call, reply) = d.acquire_call(AcquireRequest {
                field: "u:1",
                lease_ms: 30_000,
                attempt,
            });
            assert_eq!(reply, AcquireReply::NilOrPttl);
            assert_matches_header(&call);
            assert_eq!(call.keys, vec![Key::from("n")]);
            assert_eq!(
                call.args,
                vec![
                    Value::from(30_000i64),
                    Value::from("u:1"),
                    Value::from("NON_REENTRANT_REACQUIRE")
                ]
            );
        }
        let rel = d.release(release_req("u:1"));
        assert_eq!(rel.script, ScriptId::Release);
        assert_eq!(d.renewal(), RenewalShape::per_hold("n"));
        assert_eq!(
            d.wait_line(),
            Some(WaitLine::Lock),
            "the reentrant lock's line"
        );
    }
}
