//! What a lock kind is: a description of its keys, scripts and channel ([`Protocol`]), and the
//! typed replies the engine gets back. A kind builds [`ScriptCall`]s and never runs them; the
//! engine runs every call and decodes the reply with the pure functions here.

use std::time::Duration;

use fred::types::Value;

use crate::{
    conn::{core::unexpected, scripts::ScriptCall},
    engine::AnySchedule,
    error::{Error, Result},
    service::watchdog::RenewalShape,
    types::line::WaitLine,
};

/// The kinds of lock: a type parameter of [`Lock`](crate::Lock) and [`Guard`](crate::Guard).
///
/// Sealed: the kinds are [`Reentrant`](crate::Reentrant), [`Fair`](crate::Fair),
/// [`Read`](crate::Read), [`Write`](crate::Write), [`Fenced`](crate::Fenced),
/// [`Spin`](crate::Spin), and [`AnyKind`] for guards of mixed kinds.
///
/// ```
/// use redisson_lock::{Fair, Kind, Lock};
/// fn describe<K: Kind>(lock: &Lock<K>) -> String {
///     format!("{} lock {}", K::NAME, lock.name())
/// }
/// assert_eq!(Fair::NAME, "fair");
/// ```
pub trait Kind: sealed::Sealed + Send + Sync + 'static {
    /// The kind's name in logs and `Debug` output (`"reentrant"`, `"fair"`, ...).
    const NAME: &'static str;
}

pub(crate) mod sealed {
    /// Keeps [`Kind`](super::Kind) closed to this crate.
    pub trait Sealed {}
}

/// A guard or lock part of any kind (type-erased), e.g. the parts of a
/// [`MultiLock`](crate::MultiLock).
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// use redisson_lock::{AnyKind, Guard};
/// let guard: Guard<AnyKind> = client.get_spin_lock("s").lock().await?.erase();
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AnyKind {}

impl sealed::Sealed for AnyKind {}
impl Kind for AnyKind {
    const NAME: &'static str = "any";
}

/// What kind of attempt a script is asked for, as the kinds that care see it: the single try
/// of a caller that does not wait (`Wait::Once`), or one of the attempts of a waiter, which may
/// queue (the fair lock enqueues for `queue_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Attempt {
    /// One attempt; never join a queue.
    Once,
    /// A waiting caller; a queueing kind keeps its place for `queue_ms` between attempts.
    Queued {
        /// The per-waiter queue timeout (Redisson's `threadWaitTime`).
        queue_ms: u64,
    },
}

/// What an acquisition attempt needs to know.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AcquireRequest<'a> {
    pub(crate) field: &'a str,
    pub(crate) lease_ms: u64,
    pub(crate) attempt: Attempt,
}

/// What a release needs to know.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReleaseRequest<'a> {
    pub(crate) field: &'a str,
    /// The lease re-armed on a partial release.
    pub(crate) lease_ms: u64,
    /// This request's unlock receipt key (Redisson's unlock latch), shared by its retries.
    pub(crate) receipt: &'a fred::types::Key,
    pub(crate) receipt_px_ms: u64,
    /// The publish command passed to the script (`publish` or `spublish`).
    pub(crate) publish: &'static str,
}

/// How the reply of an acquire script reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// nil = acquired, integer = the `PTTL` of the lock.
    NilOrPttl,
    /// nil = acquired, 1 = not acquired (F-TRY: no TTL is reported).
    NilOrBusy,
    /// `{1, token}` = acquired, `{0, pttl}` = busy (the fenced lock).
    FlagAndValue,
}

/// The outcome of one acquisition attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acquire {
    /// Acquired (fresh or re-entry); the fencing token for a fenced lock.
    Acquired { token: Option<u64> },
    /// Held by someone else; `frees_in` is how long until it expires by itself, when known
    /// (`None`: no TTL, or the script does not say).
    Busy { frees_in: Option<Duration> },
}

/// The outcome of one release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    /// The caller holds no hold of the lock.
    NotHeld,
    /// One hold released; the owner still holds the lock.
    StillHeld,
    /// The last hold released; the lock is free and waiters were told.
    Released,
}

impl Release {
    /// What the caller of an unlock is told (both unlock paths, with and without a guard):
    /// releasing nothing is [`Error::NotHeld`], naming the lock and the owner field.
    pub(crate) fn outcome(self, lock: &str, owner: &str) -> Result<UnlockOutcome> {
        match self {
            Release::NotHeld => Err(Error::NotHeld {
                lock: lock.to_owned(),
                owner: owner.to_owned(),
            }),
            Release::StillHeld => Ok(UnlockOutcome::StillHeld),
            Release::Released => Ok(UnlockOutcome::Released),
        }
    }
}

/// Result of one unlock.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// use redisson_lock::UnlockOutcome;
/// let lock = client.get_lock("orders");
/// let outer = lock.lock().await?;
/// let inner = lock.lock().await?;
/// assert_eq!(inner.unlock().await?, UnlockOutcome::StillHeld);
/// assert_eq!(outer.unlock().await?, UnlockOutcome::Released);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnlockOutcome {
    /// One hold was released; the owner still holds the lock (re-entrant count > 0).
    StillHeld,
    /// The last hold was released; the lock is free and waiters were woken.
    Released,
}

/// Where a kind's waiters sleep between their attempts: the rule, stated once by the kind.
#[derive(Debug, Clone)]
pub(crate) enum SleepRule {
    /// Every waiter sleeps on this channel's wake-ups, woken by unlock messages.
    Channel(String),
    /// Each waiter has a channel of its own, `<prefix><owner field>`, on which the release
    /// that makes it the next in line wakes it (the fair lock).
    OwnChannel {
        /// The channel of the waiter with owner field `f` is `prefix + f`.
        prefix: String,
    },
    /// Sleep the steps of a back-off schedule (no pub/sub at all).
    BackOff(AnySchedule),
}

impl SleepRule {
    /// The channel the waiter with owner field `field` sleeps on (`None`: it polls).
    pub(crate) fn channel_for(&self, field: &str) -> Option<String> {
        match self {
            SleepRule::Channel(channel) => Some(channel.clone()),
            SleepRule::OwnChannel { prefix } => Some(Self::own_channel(prefix, field)),
            SleepRule::BackOff(_) => None,
        }
    }

    /// The own channel of the waiter with owner field `field` under [`SleepRule::OwnChannel`].
    pub(crate) fn own_channel(prefix: &str, field: &str) -> String {
        format!("{prefix}{field}")
    }
}

/// How "is it locked?" is answered.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Query {
    /// The key exists.
    Exists(String),
    /// A script answering 1 for yes.
    Script(ScriptCall),
}

/// A lock kind's protocol: its raw name, how waiters wait, and the script calls of each
/// operation. Pure: nothing here talks to Redis.
pub(crate) trait Protocol: Send + Sync + 'static {
    /// The raw lock name in Redis (after the name mapper).
    fn name(&self) -> &str;
    /// The raw name as the handle's hold key keeps it: a kind that keeps its name shared hands
    /// out its own (no copy per handle).
    fn shared_name(&self) -> std::sync::Arc<str> {
        self.name().into()
    }
    /// The hash field of an owner whose base field is `<uuid>:<id>` (the write lock appends
    /// `:write`).
    fn owner_field(&self, base: String) -> String {
        base
    }
    /// Where this kind's waiters sleep between attempts (one channel for all, one per waiter,
    /// or back-off steps).
    fn sleep(&self) -> SleepRule;
    /// One acquisition attempt, and how its reply reads.
    fn acquire_call(&self, req: AcquireRequest<'_>) -> (ScriptCall, AcquireReply);
    /// Releases one hold; the reply is nil (not held), 0 (still held) or 1 (released).
    fn release(&self, req: ReleaseRequest<'_>) -> ScriptCall;
    /// Clean-up after a queued waiter gave up (only the fair lock has one).
    fn give_up(&self, _field: &str, _queue_ms: u64) -> Option<ScriptCall> {
        None
    }
    /// The local wait line this kind's waiters join (see `acquisitions::line`), for kinds
    /// whose waiters may queue locally: one holder at a time, every waiter on one shared
    /// channel. `None` (the default): each local waiter contends on Redis itself.
    fn wait_line(&self) -> Option<WaitLine> {
        None
    }
    /// `true` (the default) when a partial release sets the lock's TTL to the lease it is given
    /// (what the owner's remaining parts need); `false` when the TTL follows the holds that
    /// remain by itself (a read hold's timeout keys, a group's values).
    fn partial_release_sets_ttl(&self) -> bool {
        true
    }
    /// How the watchdog (and an explicit renewal) re-arms a hold.
    fn renewal(&self) -> RenewalShape;
    /// The renewal's set of values (a group multi-lock's; empty for the other kinds), which
    /// names a hold: read by every handle, so a kind that makes its shape on demand answers
    /// this without making one.
    fn renewal_values(&self) -> std::sync::Arc<[String]> {
        self.renewal().values
    }
    /// Deletes the lock whoever holds it; the reply is 1 if there was one.
    fn force_unlock(&self, publish: &str) -> ScriptCall;
    /// How "is it locked?" is answered (default: the key exists).
    fn is_locked(&self) -> Query {
        Query::Exists(self.name().to_owned())
    }
    /// How an owner's hold count is read: `None` (the default) for `HGET <name> <field>`,
    /// or a script answering the count (the group multi-lock, whose counts are per value).
    fn hold_count(&self, _field: &str) -> Option<ScriptCall> {
        None
    }
    /// Why this protocol can take no call at all (refused before anything is sent), e.g. a
    /// group multi-lock without values. `None` (the default): it can.
    fn invalid(&self) -> Option<String> {
        None
    }
}

/// Every key a lock can touch for `field`: the keys of each of its calls and its channel. On a
/// cluster they must all hash to one slot (checked once, when a handle is made).
pub(crate) fn every_key(proto: &dyn Protocol, field: &str) -> Vec<fred::types::Key> {
    let receipt = fred::types::Key::from(crate::types::names::unlock_receipt(proto.name(), "0"));
    let acquire = |attempt| {
        proto
            .acquire_call(AcquireRequest {
                field,
                lease_ms: 1,
                attempt,
            })
            .0
    };
    let mut calls = vec![
        acquire(Attempt::Once),
        acquire(Attempt::Queued { queue_ms: 1 }),
        proto.release(ReleaseRequest {
            field,
            lease_ms: 1,
            receipt: &receipt,
            receipt_px_ms: 1,
            publish: "publish",
        }),
        proto.force_unlock("publish"),
        crate::service::watchdog::renewal_call(&[(&proto.renewal(), vec![field])], 1),
    ];
    calls.extend(proto.give_up(field, 1));
    calls.extend(proto.hold_count(field));
    if let Query::Script(call) = proto.is_locked() {
        calls.push(call);
    }
    let mut keys: Vec<fred::types::Key> = calls.into_iter().flat_map(|c| c.keys).collect();
    if let Some(channel) = proto.sleep().channel_for(field) {
        keys.push(channel.into());
    }
    keys
}

/// Decodes an acquire script's reply.
pub(crate) fn decode_acquire(shape: AcquireReply, v: Value, lock: &str) -> Result<Acquire> {
    let frees_in = |pttl: i64| u64::try_from(pttl).ok().map(Duration::from_millis);
    match (shape, v) {
        (AcquireReply::NilOrPttl | AcquireReply::NilOrBusy, Value::Null) => {
            Ok(Acquire::Acquired { token: None })
        }
        (AcquireReply::NilOrPttl, v) => match v.as_i64() {
            Some(pttl) => Ok(Acquire::Busy {
                frees_in: frees_in(pttl),
            }),
            None => Err(unexpected(lock, format!("{v:?}"))),
        },
        (AcquireReply::NilOrBusy, v) => match v.as_i64() {
            Some(1) => Ok(Acquire::Busy { frees_in: None }),
            _ => Err(unexpected(lock, format!("{v:?}"))),
        },
        (AcquireReply::FlagAndValue, v) => {
            let pair: Vec<i64> = v
                .convert()
                .map_err(|e| unexpected(lock, format!("a pair expected: {e}")))?;
            match pair.as_slice() {
                [1, token] => Ok(Acquire::Acquired {
                    token: Some((*token).max(0) as u64),
                }),
                [0, pttl] => Ok(Acquire::Busy {
                    frees_in: frees_in(*pttl),
                }),
                other => Err(unexpected(lock, format!("{other:?}"))),
            }
        }
    }
}

/// Decodes a release script's reply.
pub(crate) fn decode_release(v: Value, lock: &str) -> Result<Release> {
    match v {
        Value::Null => Ok(Release::NotHeld),
        v => match v.as_i64() {
            Some(0) => Ok(Release::StillHeld),
            Some(1) => Ok(Release::Released),
            _ => Err(unexpected(lock, format!("{v:?}"))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acquire_replies_decode_to_typed_outcomes() {
        use AcquireReply::*;
        let d = |s, v| decode_acquire(s, v, "k").unwrap();
        assert_eq!(d(NilOrPttl, Value::Null), Acquire::Acquired { token: None });
        assert_eq!(
            d(NilOrPttl, Value::Integer(1500)),
            Acquire::Busy {
                frees_in: Some(Duration::from_millis(1500))
            }
        );
        assert_eq!(
            d(NilOrPttl, Value::Integer(-1)),
            Acquire::Busy { frees_in: None }
        );
        assert_eq!(
            d(NilOrBusy, Value::Integer(1)),
            Acquire::Busy { frees_in: None }
        );
        let pair = |a: i64, b: i64| Value::Array(vec![a.into(), b.into()]);
        assert_eq!(
            d(FlagAndValue, pair(1, 7)),
            Acquire::Acquired { token: Some(7) }
        );
        assert_eq!(
            d(FlagAndValue, pair(0, -1)),
            Acquire::Busy { frees_in: None }
        );
        assert!(decode_acquire(NilOrBusy, Value::Integer(5), "k").is_err());
        assert!(decode_acquire(FlagAndValue, pair(2, 0), "k").is_err());
        assert!(decode_acquire(NilOrPttl, Value::from("x"), "k").is_err());
    }

    #[test]
    fn release_and_flag_replies_decode() {
        assert_eq!(decode_release(Value::Null, "k").unwrap(), Release::NotHeld);
        assert_eq!(
            decode_release(Value::Integer(0), "k").unwrap(),
            Release::StillHeld
        );
        assert_eq!(
            decode_release(Value::Integer(1), "k").unwrap(),
            Release::Released
        );
        assert!(decode_release(Value::Integer(2), "k").is_err());
    }
}
