//! The non-reentrant fair lock (Redisson 4.4+ `getNonReentrantFairLock`, sync protocol §5.2):
//! the fair lock's keys, queue, per-waiter channels, release, give-up and watchdog, with
//! acquisitions that refuse the holder's second acquisition before any queue handling.

use fred::types::Value;

use crate::lock::{
    front::Lock,
    kinds::fair,
    protocol::{AcquireReply, AcquireRequest, Attempt, Protocol},
};
use crate::{
    client::Client,
    conn::scripts::{ScriptCall, ScriptId},
    error::REENTRY_MARKER,
    types::{clock::epoch_ms, owner::Owner},
};

kind! {
    /// The non-reentrant fair lock kind (Redisson 4.4+ `RedissonNonReentrantFairLock`).
    ///
    /// The same lock on the wire as a [`FairLock`](crate::FairLock) of the same name (hash, queue
    /// `redisson_lock_queue:{N}`, deadlines `redisson_lock_timeout:{N}`, per-waiter channels), but
    /// the holder's second acquisition fails at once with [`Error::Reentry`](crate::Error::Reentry)
    /// and leaves the queue and every waiter's deadline untouched.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// use redisson_lock::{Lock, NonReentrantFair};
    /// let lock: Lock<NonReentrantFair> = client.get_non_reentrant_fair_lock("jobs");
    /// # Ok(()) }
    /// ```
    NonReentrantFair = "non_reentrant_fair";

    /// A non-reentrant fair lock handle; see [`Lock`] for the methods.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let lock: redisson_lock::NonReentrantFairLock = client.get_non_reentrant_fair_lock("jobs");
    /// let guard = lock.lock().await?; // waiters are served in the order they came
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    type NonReentrantFairLock;

    /// A hold of a [`NonReentrantFairLock`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let guard: redisson_lock::NonReentrantFairGuard =
    ///     client.get_non_reentrant_fair_lock("jobs").lock().await?;
    /// # Ok(()) }
    /// ```
    type NonReentrantFairGuard;
}

/// The fair lock's protocol with NRF-TRY / NRF-ACQ as its acquisitions.
struct NonReentrantFairProtocol {
    base: fair::FairProtocol,
}

impl Protocol for NonReentrantFairProtocol {
    pass_on!(name, sleep, release, give_up, renewal, force_unlock);

    /// F-TRY / F-ACQ's arguments plus the marker as `ARGV[5]`.
    fn acquire_call(&self, req: AcquireRequest<'_>) -> (ScriptCall, AcquireReply) {
        let lease = Value::from(req.lease_ms as i64);
        let field = Value::from(req.field);
        let now = Value::from(epoch_ms());
        let marker = Value::from(REENTRY_MARKER);
        match req.attempt {
            // NRF-TRY: ARGV = [lease, field, now, wait, marker]; busy is 1.
            Attempt::Once => (
                ScriptCall::new(
                    ScriptId::NonReentrantFairTry,
                    self.base.lock_keys(),
                    vec![
                        lease,
                        field,
                        now,
                        Value::from(self.base.try_wait_ms as i64),
                        marker,
                    ],
                ),
                AcquireReply::NilOrBusy,
            ),
            // NRF-ACQ: ARGV = [lease, field, wait, now, marker].
            Attempt::Queued { queue_ms } => (
                ScriptCall::new(
                    ScriptId::NonReentrantFairAcquire,
                    self.base.lock_keys(),
                    vec![lease, field, Value::from(queue_ms as i64), now, marker],
                ),
                AcquireReply::NilOrPttl,
            ),
        }
    }
}

impl Client {
    /// A non-reentrant fair lock handle for `name`, acting for its caller (see [`Client::get_lock`]) (Redisson 4.4+
    /// `getNonReentrantFairLock`).
    pub fn get_non_reentrant_fair_lock(&self, name: &str) -> NonReentrantFairLock {
        self.non_reentrant_fair_lock(name, None)
    }

    /// A non-reentrant fair lock handle acting as `owner`.
    pub fn get_non_reentrant_fair_lock_with_owner(
        &self,
        name: &str,
        owner: Owner,
    ) -> NonReentrantFairLock {
        self.non_reentrant_fair_lock(name, Some(owner))
    }

    fn non_reentrant_fair_lock(&self, name: &str, owner: Option<Owner>) -> NonReentrantFairLock {
        let try_wait_ms = self.config().fair_wait_ms();
        Lock::new(self, name, owner, |raw| NonReentrantFairProtocol {
            base: fair::FairProtocol::new(raw, try_wait_ms),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::scripts::tests::assert_matches_header;

    #[test]
    fn both_acquisitions_carry_the_marker_last_and_keep_the_fair_argument_orders() {
        let d = NonReentrantFairProtocol {
            base: fair::FairProtocol::new("n".into(), 300_000),
        };
        let once = AcquireRequest {
            field: "u:1",
            lease_ms: 10,
            attempt: Attempt::Once,
        };
        let (try_call, reply) = d.acquire_call(once);
        assert_eq!(
            (try_call.script, reply),
            (ScriptId::NonReentrantFairTry, AcquireReply::NilOrBusy)
        );
        assert_matches_header(&try_call);
        assert_eq!(try_call.args[3], Value::from(300_000i64), "now before wait");
        assert_eq!(try_call.args[4], Value::from("NON_REENTRANT_REACQUIRE"));
        let (acq, reply) = d.acquire_call(AcquireRequest {
            attempt: Attempt::Queued { queue_ms: 2_000 },
            ..once
        });
        assert_eq!(
            (acq.script, reply),
            (ScriptId::NonReentrantFairAcquire, AcquireReply::NilOrPttl)
        );
        assert_matches_header(&acq);
        assert_eq!(acq.args[2], Value::from(2_000i64), "wait before now");
        assert_eq!(acq.args[4], Value::from("NON_REENTRANT_REACQUIRE"));
        assert!(d.give_up("u:1", 5).is_some(), "F-CANCEL on give-up");
        assert_eq!(
            d.sleep().channel_for("u:1").as_deref(),
            Some("redisson_lock__channel:{n}:u:1")
        );
    }
}
