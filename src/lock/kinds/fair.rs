//! The fair lock (Redisson `RFairLock`, protocol §7): FIFO hand-over through a queue list, a
//! sorted set of waiter deadlines (epoch ms) and one wake-up channel per waiter.

use fred::types::{Key, Value};

use crate::lock::{
    front::Lock,
    protocol::{AcquireReply, AcquireRequest, Attempt, Protocol, ReleaseRequest, SleepRule},
};
use crate::{
    client::Client,
    conn::scripts::{ScriptCall, ScriptId},
    service::watchdog::RenewalShape,
    types::owner::Owner,
    types::{clock::epoch_ms, names},
};

kind! {
    /// The fair lock kind (Redisson `RFairLock`): reentrant, and waiters acquire in arrival order.
    ///
    /// Keys: the lock hash `N` (as [`RLock`](crate::RLock)), the queue `redisson_lock_queue:{N}` and
    /// the deadlines `redisson_lock_timeout:{N}` (epoch-ms scores from this machine's clock); each
    /// waiter is woken on its own channel `redisson_lock__channel:{N}:<uuid>:<id>`. A waiter keeps
    /// its place for `fair_lock_wait_timeout` (or its own `try_lock_for` wait) between polls; a dead
    /// waiter at the head is skipped once that passes.
    ///
    /// A waiter that gives up (its wait ends or its future is dropped) leaves the queue at once.
    /// Unlocking a fair lock that is no longer held succeeds, as in Redisson.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// use redisson_lock::{Fair, Lock};
    /// let lock: Lock<Fair> = client.get_fair_lock("jobs");
    /// # Ok(()) }
    /// ```
    Fair = "fair";

    /// A fair lock handle; see [`Lock`] for the methods and [`Fair`] for the layout.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let lock: redisson_lock::FairLock = client.get_fair_lock("jobs");
    /// let guard = lock.lock().await?; // waiters are served in the order they came
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    type FairLock;

    /// A hold of a [`FairLock`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let guard: redisson_lock::FairGuard = client.get_fair_lock("jobs").lock().await?;
    /// # Ok(()) }
    /// ```
    type FairGuard;
}

pub(crate) struct FairProtocol {
    pub(crate) name: String,
    pub(crate) key: Key,
    pub(crate) queue: Key,
    pub(crate) timeouts: Key,
    pub(crate) channel: String,
    /// `fair_lock_wait_timeout`, the queue time F-TRY charges (Redisson's `threadWaitTime`).
    pub(crate) try_wait_ms: u64,
}

impl FairProtocol {
    pub(crate) fn new(raw: String, try_wait_ms: u64) -> Self {
        Self {
            key: Key::from(raw.as_str()),
            queue: Key::from(names::prefix_name("redisson_lock_queue", &raw)),
            timeouts: Key::from(names::prefix_name("redisson_lock_timeout", &raw)),
            channel: names::lock_channel(&raw),
            name: raw,
            try_wait_ms,
        }
    }

    pub(crate) fn lock_keys(&self) -> Vec<Key> {
        vec![self.key.clone(), self.queue.clone(), self.timeouts.clone()]
    }
}

impl Protocol for FairProtocol {
    fn name(&self) -> &str {
        &self.name
    }

    fn sleep(&self) -> SleepRule {
        SleepRule::OwnChannel {
            prefix: format!("{}:", self.channel),
        }
    }

    fn acquire_call(&self, req: AcquireRequest<'_>) -> (ScriptCall, AcquireReply) {
        let lease = Value::from(req.lease_ms as i64);
        let field = Value::from(req.field);
        let now = Value::from(epoch_ms());
        match req.attempt {
            // F-TRY: ARGV = [lease, field, now, wait]; busy is 1, not a TTL.
            Attempt::Once => (
                ScriptCall::new(
                    ScriptId::FairTry,
                    self.lock_keys(),
                    vec![lease, field, now, Value::from(self.try_wait_ms as i64)],
                ),
                AcquireReply::NilOrBusy,
            ),
            // F-ACQ: ARGV = [lease, field, wait, now]; the reply bounds the next sleep.
            Attempt::Queued { queue_ms } => (
                ScriptCall::new(
                    ScriptId::FairAcquire,
                    self.lock_keys(),
                    vec![lease, field, Value::from(queue_ms as i64), now],
                ),
                AcquireReply::NilOrPttl,
            ),
        }
    }

    /// F-REL: `KEYS = [N, queue, timeouts, channel, receipt]`,
    /// `ARGV = ["0", lease, field, now, publish, receipt PX]`.
    fn release(&self, req: ReleaseRequest<'_>) -> ScriptCall {
        let mut keys = self.lock_keys();
        keys.push(Key::from(self.channel.as_str()));
        keys.push(req.receipt.clone());
        ScriptCall::new(
            ScriptId::FairRelease,
            keys,
            vec![
                Value::from_static_str("0"),
                Value::from(req.lease_ms as i64),
                Value::from(req.field),
                Value::from(epoch_ms()),
                Value::from_static_str(req.publish),
                Value::from(req.receipt_px_ms as i64),
            ],
        )
    }

    /// F-CANCEL: `KEYS = [queue, timeouts]`, `ARGV = [field, wait]`.
    fn give_up(&self, field: &str, queue_ms: u64) -> Option<ScriptCall> {
        Some(ScriptCall::new(
            ScriptId::FairCancel,
            vec![self.queue.clone(), self.timeouts.clone()],
            vec![Value::from(field), Value::from(queue_ms as i64)],
        ))
    }

    fn renewal(&self) -> RenewalShape {
        RenewalShape::per_hold(&self.name)
    }

    /// F-FORCE: `KEYS = [N, queue, timeouts, channel]`, `ARGV = ["0", now, publish]`.
    fn force_unlock(&self, publish: &str) -> ScriptCall {
        let mut keys = self.lock_keys();
        keys.push(Key::from(self.channel.as_str()));
        ScriptCall::new(
            ScriptId::FairForceUnlock,
            keys,
            vec![
                Value::from("0"),
                Value::from(epoch_ms()),
                Value::from(publish),
            ],
        )
    }
}

impl Client {
    /// A fair lock handle for `name` acting for its caller (see [`Client::get_lock`]).
    pub fn get_fair_lock(&self, name: &str) -> FairLock {
        self.fair_lock(name, None)
    }

    /// A fair lock handle acting as `owner`.
    pub fn get_fair_lock_with_owner(&self, name: &str, owner: Owner) -> FairLock {
        self.fair_lock(name, Some(owner))
    }

    fn fair_lock(&self, name: &str, owner: Option<Owner>) -> FairLock {
        let try_wait_ms = self.config().fair_wait_ms();
        Lock::new(self, name, owner, |raw| FairProtocol::new(raw, try_wait_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        conn::scripts::tests::assert_matches_header, lock::kinds::reentrant::tests::release_req,
    };

    #[test]
    fn only_a_queued_waiter_enqueues_and_every_call_matches_its_header() {
        let d = FairProtocol::new("n".into(), 300_000);
        let once = AcquireRequest {
            field: "u:1",
            lease_ms: 10,
            attempt: Attempt::Once,
        };
        let (try_call, reply) = d.acquire_call(once);
        assert_eq!(
            (try_call.script, reply),
            (ScriptId::FairTry, AcquireReply::NilOrBusy)
        );
        assert_eq!(try_call.args[3], Value::from(300_000i64));
        assert_matches_header(&try_call);
        let queued = AcquireRequest {
            attempt: Attempt::Queued { queue_ms: 2_000 },
            ..once
        };
        let (acq, reply) = d.acquire_call(queued);
        assert_eq!(
            (acq.script, reply),
            (ScriptId::FairAcquire, AcquireReply::NilOrPttl)
        );
        assert_eq!(acq.args[2], Value::from(2_000i64), "wait before now");
        assert_matches_header(&acq);
        assert_eq!(
            acq.keys,
            vec![
                Key::from("n"),
                Key::from("redisson_lock_queue:{n}"),
                Key::from("redisson_lock_timeout:{n}")
            ]
        );
        assert_matches_header(&d.release(release_req("u:1")));
        let cancel = d.give_up("u:1", 2_000).unwrap();
        assert_matches_header(&cancel);
        assert_matches_header(&d.force_unlock("publish"));
        match d.sleep().channel_for("u:1") {
            Some(c) => assert_eq!(c, "redisson_lock__channel:{n}:u:1"),
            other => panic!("{other:?}"),
        }
    }
}
