//! The reentrant lock (Redisson `RLock`, protocol §4).

use std::sync::Arc;

use fred::types::{Key, Value};

use crate::lock::{
    front::Lock,
    protocol::{AcquireReply, AcquireRequest, Protocol, ReleaseRequest, SleepRule},
};
use crate::{
    client::Client,
    conn::scripts::{ScriptCall, ScriptId},
    service::watchdog::RenewalShape,
    types::line::WaitLine,
    types::names,
    types::owner::Owner,
};

kind! {
    /// The reentrant lock kind (Redisson `RLock`).
    ///
    /// Data layout (wire-compatible with Redisson): a hash at the lock name with one field
    /// `<client uuid>:<owner id>` holding the hold count; the key's TTL is the lease or the watchdog
    /// timeout; a full release publishes `0` on `redisson_lock__channel:{name}`.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// use redisson_lock::{Lock, Reentrant};
    /// let lock: Lock<Reentrant> = client.get_lock("orders");
    /// # Ok(()) }
    /// ```
    Reentrant = "reentrant";

    /// A reentrant distributed lock (Redisson `RLock`); see [`Lock`] for the methods.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let lock: redisson_lock::RLock = client.get_lock("orders");
    /// let guard = lock.lock().await?;
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    type RLock;

    /// A hold of an [`RLock`].
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let guard: redisson_lock::LockGuard = client.get_lock("orders").lock().await?;
    /// drop(guard); // released in the background
    /// # Ok(()) }
    /// ```
    type LockGuard;
}

/// The reentrant lock's protocol: the hash `N` and the channel `redisson_lock__channel:{N}`.
/// The fenced and spin locks share it.
pub(crate) struct ReentrantProtocol {
    /// Shared with the calls' keys and with every hold key of the lock's handle: the one copy
    /// of the name a handle keeps (a key is made over it per call: [`key`](Self::key)).
    pub(crate) name: Arc<str>,
}

impl ReentrantProtocol {
    pub(crate) fn new(raw_name: String) -> Self {
        let name: Arc<str> = raw_name.into();
        Self { name }
    }

    /// The lock's key, over the shared name (a call's: made per call, kept by none).
    pub(crate) fn key(&self) -> Key {
        names::shared_key(&self.name)
    }

    /// The unlock channel's name, made when a call needs it (a release, a forced unlock, a
    /// waiter's sleep), not kept by every handle: a hundred thousand holds, a hundred thousand
    /// channel names nobody uses until the release.
    pub(crate) fn channel_name(&self) -> String {
        names::lock_channel(&self.name)
    }

    /// The unlock channel as the key a release and a forced unlock send.
    fn channel(&self) -> Key {
        Key::from(self.channel_name())
    }

    /// L-ACQ: `KEYS = [N]`, `ARGV = [lease, field]`.
    pub(crate) fn acquire_call(&self, req: AcquireRequest<'_>) -> ScriptCall {
        ScriptCall::new(
            ScriptId::Acquire,
            vec![self.key()],
            vec![Value::from(req.lease_ms as i64), Value::from(req.field)],
        )
    }
}

/// The release call shared by L-REL and W-REL: `KEYS = [N, channel, receipt]`,
/// `ARGV = [message, lease, field, publish, receipt PX]`.
pub(crate) fn release_call(
    script: ScriptId,
    message: &'static str,
    key: &Key,
    channel: Key,
    req: ReleaseRequest<'_>,
) -> ScriptCall {
    ScriptCall::new(
        script,
        vec![key.clone(), channel, req.receipt.clone()],
        vec![
            Value::from_static_str(message),
            Value::from(req.lease_ms as i64),
            Value::from(req.field),
            Value::from_static_str(req.publish),
            Value::from(req.receipt_px_ms as i64),
        ],
    )
}

impl Protocol for ReentrantProtocol {
    fn name(&self) -> &str {
        &self.name
    }

    fn shared_name(&self) -> Arc<str> {
        self.name.clone()
    }

    fn sleep(&self) -> SleepRule {
        SleepRule::Channel(self.channel_name())
    }

    fn wait_line(&self) -> Option<WaitLine> {
        Some(WaitLine::Lock)
    }

    fn acquire_call(&self, req: AcquireRequest<'_>) -> (ScriptCall, AcquireReply) {
        (self.acquire_call(req), AcquireReply::NilOrPttl)
    }

    /// L-REL: `KEYS = [N, channel, receipt]`, `ARGV = ["0", lease, field, publish, receipt PX]`.
    fn release(&self, req: ReleaseRequest<'_>) -> ScriptCall {
        release_call(ScriptId::Release, "0", &self.key(), self.channel(), req)
    }

    /// Made for each hold (its watchdog registration keeps it), not kept by the protocol: a
    /// handle that only waits, or never holds, has none.
    fn renewal(&self) -> RenewalShape {
        RenewalShape::per_hold_of(self.name.clone())
    }

    fn renewal_values(&self) -> std::sync::Arc<[String]> {
        crate::service::watchdog::no_values()
    }

    /// L-FORCE: `KEYS = [N, channel]`, `ARGV = ["0", publish]`.
    fn force_unlock(&self, publish: &str) -> ScriptCall {
        ScriptCall::new(
            ScriptId::ForceUnlock,
            vec![self.key(), self.channel()],
            vec![Value::from("0"), Value::from(publish)],
        )
    }
}

impl Client {
    /// A reentrant lock handle for `name` that acts for its caller: each acquisition is made
    /// by the calling task ([`Owner::current`]), as Redisson's by the calling thread.
    ///
    /// Tasks sharing the handle (a clone, an `Arc`) exclude each other; a task that locks
    /// again re-enters, through this handle or any other of the client for the same name.
    /// Branches of one task (`join!`) are one owner: give each its own owner
    /// ([`get_lock_with_owner`](Self::get_lock_with_owner)) to exclude them.
    pub fn get_lock(&self, name: &str) -> RLock {
        Lock::new(self, name, None, ReentrantProtocol::new)
    }

    /// A reentrant lock handle for `name` bound to `owner` (Redisson's explicit `threadId`):
    /// every call through it acts as `owner`, whichever task makes it.
    pub fn get_lock_with_owner(&self, name: &str, owner: Owner) -> RLock {
        Lock::new(self, name, Some(owner), ReentrantProtocol::new)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::{conn::scripts::tests::assert_matches_header, lock::protocol::Attempt};

    static RECEIPT: Key = Key::from_static_str("redisson_unlock_latch:{n}:ab");

    pub(crate) fn release_req(field: &str) -> ReleaseRequest<'_> {
        ReleaseRequest {
            field,
            lease_ms: 30_000,
            receipt: &RECEIPT,
            receipt_px_ms: 16_000,
            publish: "publish",
        }
    }

    #[test]
    fn calls_match_the_script_headers_and_the_spec_layout() {
        let d = ReentrantProtocol::new("n".into());
        let req = AcquireRequest {
            field: "u:1",
            lease_ms: 30_000,
            attempt: Attempt::Once,
        };
        let (acq, reply) = Protocol::acquire_call(&d, req);
        assert_eq!(reply, AcquireReply::NilOrPttl);
        assert_matches_header(&acq);
        assert_eq!(acq.args, vec![Value::from(30_000i64), Value::from("u:1")]);
        let rel = d.release(release_req("u:1"));
        assert_matches_header(&rel);
        assert_eq!(rel.keys[1], Key::from("redisson_lock__channel:{n}"));
        assert_eq!(rel.args[3], Value::from("publish"));
        assert_matches_header(&d.force_unlock("publish"));
        assert_eq!(d.renewal(), RenewalShape::per_hold("n"));
        assert!(d.give_up("u:1", 5).is_none());
    }

    #[test]
    fn every_derived_key_shares_the_names_slot_unless_a_brace_is_left_open() {
        use crate::{conn::cluster::one_slot, lock::protocol::every_key};
        for name in ["orders", "a{b}c", "x}y{z}", "{t}:n"] {
            let keys = every_key(&ReentrantProtocol::new(name.into()), "u:1");
            assert!(one_slot(&keys), "{name}: {keys:?}");
        }
        for name in ["{abc", "a{b", "}{"] {
            let keys = every_key(&ReentrantProtocol::new(name.into()), "u:1");
            assert!(!one_slot(&keys), "{name} must be refused on a cluster");
        }
    }
}
