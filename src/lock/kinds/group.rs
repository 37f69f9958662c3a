//! The group multi-lock (Redisson 3.38+ `getMultiLock(group, values)`, sync protocol §6): a set
//! of values of one group taken atomically, all or none, in one hash per group.

use std::sync::Arc;

use fred::types::{Key, Value};

use crate::lock::{
    front::Lock,
    protocol::{AcquireReply, AcquireRequest, Protocol, Query, ReleaseRequest, SleepRule},
};
use crate::{
    client::Client,
    conn::scripts::{ScriptCall, ScriptId},
    service::watchdog::{Layout, RenewalShape},
    types::{clock::epoch_ms, group_fields, names, owner::Owner},
};

kind! {
    /// The group multi-lock kind (Redisson `RedissonFasterMultiLock`, from
    /// `getMultiLock(group, values)`).
    ///
    /// Locks a set of values of one group at once: every value or none. Several owners may hold
    /// disjoint sets of one group at the same time. Data layout (wire-compatible with Redisson
    /// 3.38+ using `StringCodec`): one hash at the group name `G`; for each held value `v`, with
    /// `H(v)` its [field name](Lock::<Group>::value_field):
    ///
    /// | field | value |
    /// |---|---|
    /// | `H(v)` | the owner field `<uuid>:<id>` |
    /// | `H(v):<owner>:expire_time` | the hold's deadline, epoch ms, **this machine's clock** |
    /// | `H(v):<owner>:lock_count` | the owner's hold count on `v` (re-entrant) |
    ///
    /// The hash's TTL is only ever raised (to the longest lease). A release publishes `0` on
    /// `redisson_lock__channel:{G}` (the channel of an [`RLock`](crate::RLock) named `G`), and
    /// waiters sleep on that channel, bounded by the time the conflicting hold ends. Deadlines are
    /// wall-clock times of the acquiring machine: keep clocks in sync (as with Redisson).
    ///
    /// Values are strings or bytes, written as they are (Redisson's `StringCodec` writes a
    /// string as its UTF-8 bytes; Redisson's default codec adds framing, so Java peers must use
    /// `StringCodec` to share a group). Duplicate values count once.
    ///
    /// One owner may hold several sets of one group (through handles made with
    /// [`Client::get_group_lock_with_owner`]): each set is a hold of its own, whatever the order
    /// the sets were granted in: the watchdog renews each, each guard's
    /// [`state`](crate::Guard::state) is its own set's, and each unlock releases its own set
    /// (overlapping sets share the counts of the values they share, as on the wire). Redisson
    /// renews one set per owner and group.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// use redisson_lock::{Group, Lock};
    /// let seats: Lock<Group> = client.get_group_lock("flight:42", ["12A", "12B"]);
    /// let guard = seats.lock().await?; // both seats, or wait
    /// guard.unlock().await?;
    /// # Ok(()) }
    /// ```
    Group = "group";

    /// A group multi-lock handle; see [`Lock`] for the methods and [`Group`] for the layout.
    ///
    /// [`hold_count`](Lock::hold_count) is the owner's lowest count over the values (0 unless it
    /// holds every one), [`is_locked`](Lock::is_locked) is true when any of the values is held by
    /// anyone, [`remaining_ttl`](Lock::remaining_ttl) is the group hash's TTL and
    /// [`force_unlock`](Lock::force_unlock) frees these values only.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let lock: redisson_lock::GroupLock = client.get_group_lock("stock", ["sku-1", "sku-7"]);
    /// if let Some(guard) = lock.try_lock_for(std::time::Duration::from_secs(1)).await? {
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    type GroupLock;

    /// A hold of a [`GroupLock`]: every value of its set.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let guard: redisson_lock::GroupGuard = client.get_group_lock("stock", ["a"]).lock().await?;
    /// # Ok(()) }
    /// ```
    type GroupGuard;
}

struct GroupProtocol {
    name: String,
    key: Key,
    channel: String,
    /// `H(v)` of each distinct value, sorted.
    fields: Arc<[String]>,
}

impl GroupProtocol {
    fn new(raw: String, values: Vec<Vec<u8>>) -> Self {
        let mut fields: Vec<String> = Vec::with_capacity(values.len());
        for v in values {
            fields.push(group_fields::group_field(&v));
        }
        // One order for one set (the order has no meaning on the wire): handles of the same
        // values in any order are the same hold to the watchdog.
        fields.sort_unstable();
        fields.dedup();
        Self {
            key: Key::from(raw.as_str()),
            channel: names::lock_channel(&raw),
            name: raw,
            fields: fields.into(),
        }
    }

    fn values(&self) -> impl Iterator<Item = Value> + '_ {
        self.fields.iter().map(|f| Value::from(f.as_str()))
    }
}

impl Protocol for GroupProtocol {
    fn name(&self) -> &str {
        &self.name
    }

    fn sleep(&self) -> SleepRule {
        SleepRule::Channel(self.channel.clone())
    }

    /// A partial release only raises deadlines and the TTL.
    fn partial_release_sets_ttl(&self) -> bool {
        false
    }

    /// G-ACQ: `KEYS = [G]`, `ARGV = [lease, now, F, H1..Hn]`; nil or the ms until the latest
    /// conflicting hold ends (every attempt, single tries included).
    fn acquire_call(&self, req: AcquireRequest<'_>) -> (ScriptCall, AcquireReply) {
        let mut args = vec![
            Value::from(req.lease_ms as i64),
            Value::from(epoch_ms()),
            Value::from(req.field),
        ];
        args.extend(self.values());
        (
            ScriptCall::new(ScriptId::GroupAcquire, vec![self.key.clone()], args),
            AcquireReply::NilOrPttl,
        )
    }

    /// G-REL: `KEYS = [G, channel, receipt]`,
    /// `ARGV = [F, "0", lease, publish, receipt PX, now, H1..Hn]`.
    fn release(&self, req: ReleaseRequest<'_>) -> ScriptCall {
        let mut args = vec![
            Value::from(req.field),
            Value::from_static_str("0"),
            Value::from(req.lease_ms as i64),
            Value::from_static_str(req.publish),
            Value::from(req.receipt_px_ms as i64),
            Value::from(epoch_ms()),
        ];
        args.extend(self.values());
        ScriptCall::new(
            ScriptId::GroupRelease,
            vec![
                self.key.clone(),
                Key::from(self.channel.as_str()),
                req.receipt.clone(),
            ],
            args,
        )
    }

    /// G-RENEW, one entry per hold: `KEYS += [G]`, `ARGV += [F, now, n, H1..Hn]`.
    fn renewal(&self) -> RenewalShape {
        RenewalShape {
            script: ScriptId::GroupRenew,
            keys: crate::service::watchdog::ShapeKeys::from([self.key.clone()]),
            layout: Layout::WithValues,
            values: self.fields.clone(),
        }
    }

    /// G-FORCE: `KEYS = [G, channel]`, `ARGV = ["0", publish, H1..Hn]`.
    fn force_unlock(&self, publish: &str) -> ScriptCall {
        let mut args = vec![Value::from("0"), Value::from(publish)];
        args.extend(self.values());
        ScriptCall::new(
            ScriptId::GroupForceUnlock,
            vec![self.key.clone(), Key::from(self.channel.as_str())],
            args,
        )
    }

    /// G-ISLOCKED: `KEYS = [G]`, `ARGV = [now, H1..Hn]`.
    fn is_locked(&self) -> Query {
        let mut args = vec![Value::from(epoch_ms())];
        args.extend(self.values());
        Query::Script(ScriptCall::new(
            ScriptId::GroupIsLocked,
            vec![self.key.clone()],
            args,
        ))
    }

    /// `KEYS = [G]`, `ARGV = [now, F, H1..Hn]`: the lowest live count of F over the values.
    fn hold_count(&self, field: &str) -> Option<ScriptCall> {
        let mut args = vec![Value::from(epoch_ms()), Value::from(field)];
        args.extend(self.values());
        Some(ScriptCall::new(
            ScriptId::GroupHoldCount,
            vec![self.key.clone()],
            args,
        ))
    }

    fn invalid(&self) -> Option<String> {
        self.fields
            .is_empty()
            .then(|| format!("the group lock '{}' needs at least one value", self.name))
    }
}

impl Lock<Group> {
    /// The hash field a value is held under: Base64 of its 16-byte HighwayHash-128 (Redisson's
    /// key, words big-endian) without the trailing `==`. `value` is the value's bytes as
    /// written (a string's UTF-8 bytes).
    ///
    /// ```
    /// assert_eq!(redisson_lock::GroupLock::value_field("a"), "qwvAS12pR0CgRitaypEjUw");
    /// ```
    pub fn value_field(value: impl AsRef<[u8]>) -> String {
        group_fields::group_field(value.as_ref())
    }
}

impl Client {
    /// A group multi-lock handle for `values` of the group `group`, acting for its caller (see
    /// [`Client::get_lock`]) (Redisson's `getMultiLock(group, values)`). An empty set of values makes every
    /// operation fail with [`InvalidArgument`](crate::Error::InvalidArgument).
    pub fn get_group_lock<I>(&self, group: &str, values: I) -> GroupLock
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        self.group_lock(group, values, None)
    }

    /// A group multi-lock handle acting as `owner`.
    pub fn get_group_lock_with_owner<I>(&self, group: &str, values: I, owner: Owner) -> GroupLock
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        self.group_lock(group, values, Some(owner))
    }

    fn group_lock<I>(&self, group: &str, values: I, owner: Option<Owner>) -> GroupLock
    where
        I: IntoIterator,
        I::Item: AsRef<[u8]>,
    {
        let values: Vec<Vec<u8>> = values.into_iter().map(|v| v.as_ref().to_vec()).collect();
        Lock::new(self, group, owner, |raw| GroupProtocol::new(raw, values))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        conn::scripts::tests::assert_matches_header,
        lock::{kinds::reentrant::tests::release_req, protocol::Attempt},
        service::watchdog::renewal_call,
    };

    fn protocol() -> GroupProtocol {
        GroupProtocol::new(
            "g".into(),
            vec![b"a".to_vec(), b"b".to_vec(), b"a".to_vec()],
        )
    }

    #[test]
    fn values_are_hashed_once_each_and_every_call_lists_them_last() {
        let d = protocol();
        assert_eq!(
            &*d.fields,
            ["Q5CdP+xmkHdTGWYr64Lw6A", "qwvAS12pR0CgRitaypEjUw"]
        );
        let reversed = GroupProtocol::new("g".into(), vec![b"b".to_vec(), b"a".to_vec()]);
        assert_eq!(reversed.renewal(), d.renewal(), "one set, one shape");
        let (acq, reply) = d.acquire_call(AcquireRequest {
            field: "u:1",
            lease_ms: 30_000,
            attempt: Attempt::Once,
        });
        assert_eq!(reply, AcquireReply::NilOrPttl);
        assert_matches_header(&acq);
        assert_eq!(acq.keys, vec![Key::from("g")]);
        assert_eq!(acq.args[0], Value::from(30_000i64));
        assert_eq!(acq.args[2], Value::from("u:1"));
        assert_eq!(
            acq.args[3..],
            [
                Value::from("Q5CdP+xmkHdTGWYr64Lw6A"),
                Value::from("qwvAS12pR0CgRitaypEjUw")
            ]
        );
        let rel = d.release(release_req("u:1"));
        assert_matches_header(&rel);
        assert_eq!(rel.keys[1], Key::from("redisson_lock__channel:{g}"));
        assert_eq!(rel.args[0], Value::from("u:1"));
        assert_eq!(rel.args.len(), 8);
        assert_matches_header(&d.force_unlock("publish"));
        let renew = renewal_call(&[(&d.renewal(), vec!["u:1"])], 30_000);
        assert_eq!(renew.keys, vec![Key::from("g")]);
        assert_eq!(renew.args[0], Value::from(30_000i64));
        assert_eq!(renew.args[1], Value::from("u:1"));
        assert_eq!(renew.args[3], Value::from(2i64));
        assert_eq!(renew.args.len(), 6);
        assert!(d.invalid().is_none());
        assert!(GroupProtocol::new("g".into(), vec![]).invalid().is_some());
    }

    #[test]
    fn every_key_shares_the_groups_slot() {
        use crate::{conn::cluster::one_slot, lock::protocol::every_key};
        for name in ["orders", "{t}:g"] {
            let d = GroupProtocol::new(name.into(), vec![b"x".to_vec()]);
            assert!(one_slot(&every_key(&d, "u:1")), "{name}");
        }
    }
}
