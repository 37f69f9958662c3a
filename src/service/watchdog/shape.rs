//! How a lock kind's holds are renewed on the wire: a kind hands the watchdog a
//! [`RenewalShape`] (the renewal script, the lock's keys for one entry, the [`Layout`] of an
//! entry), and [`renewal_call`] lays out one call over entries of one script. Every entry of a
//! call speaks for exactly one hold, so each reply flag is that hold's own.

use std::sync::Arc;

use fred::types::{Key, Value};

use crate::{
    conn::scripts::{ScriptCall, ScriptId},
    types::permit::PermitId,
};

/// How entries of a renewal call are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Layout {
    /// One entry per hold: `KEYS += keys`, `ARGV += field` (L-RENEW).
    PerHold,
    /// R-RENEW's entry: `KEYS += keys`, `ARGV += count, field…`. The script answers one flag
    /// per entry ("some listed reader is present"), so each entry lists one reader
    /// (`count` = 1): a lock with several readers of this client is listed once per reader,
    /// and a reader whose field is gone is told so even while another reader keeps the hash.
    PerLock,
    /// One entry per hold, with the hold's own values and this machine's clock:
    /// `KEYS += keys`, `ARGV += field, now (epoch ms), count, value…` (G-RENEW: a group
    /// multi-lock's deadlines are client-clock times).
    WithValues,
    /// One entry per permit of a permit-expirable semaphore (PS-LEASE batched, Java's
    /// `updateLeaseTime`): `KEYS += N, {N}:timeout, channel`, `ARGV += id (16 raw bytes, from
    /// the hold's hex field), now + lease (epoch ms), now, publish command (the shape's one
    /// value)`.
    PermitLease,
}

/// The lock's keys of one renewal entry. Every hold has a shape (the watchdog keeps it with
/// the hold), so the common cases allocate nothing of their own: a reentrant lock's one key is
/// its name, shared with the handle ([`Name`](Self::Name), made a key per call); another kind's
/// one key is kept inline ([`One`](Self::One)).
#[derive(Debug, Clone)]
pub(crate) enum ShapeKeys {
    /// One key: the lock's name, shared.
    Name(Arc<str>),
    One(Key),
    Many(Arc<[Key]>),
}

impl ShapeKeys {
    /// The keys, in order (a call's: a [`Name`](Self::Name) becomes a key over the name).
    pub(crate) fn to_vec(&self) -> Vec<Key> {
        match self {
            ShapeKeys::Name(name) => vec![crate::types::names::shared_key(name)],
            ShapeKeys::One(key) => vec![key.clone()],
            ShapeKeys::Many(keys) => keys.to_vec(),
        }
    }

    /// The first key's bytes (its hash slot is the call's).
    pub(crate) fn first_bytes(&self) -> Option<&[u8]> {
        match self {
            ShapeKeys::Name(name) => Some(name.as_bytes()),
            ShapeKeys::One(key) => Some(key.as_bytes()),
            ShapeKeys::Many(keys) => keys.first().map(|k| k.as_bytes()),
        }
    }

    fn bytes(&self) -> Vec<&[u8]> {
        match self {
            ShapeKeys::Name(name) => vec![name.as_bytes()],
            ShapeKeys::One(key) => vec![key.as_bytes()],
            ShapeKeys::Many(keys) => keys.iter().map(|k| k.as_bytes()).collect(),
        }
    }
}

impl<const N: usize> From<[Key; N]> for ShapeKeys {
    fn from(keys: [Key; N]) -> Self {
        match <[Key; 1]>::try_from(keys.to_vec()) {
            Ok([key]) => ShapeKeys::One(key),
            Err(keys) => ShapeKeys::Many(keys.into()),
        }
    }
}

/// The same keys, however kept.
impl PartialEq for ShapeKeys {
    fn eq(&self, other: &Self) -> bool {
        self.bytes() == other.bytes()
    }
}

impl Eq for ShapeKeys {}

impl std::hash::Hash for ShapeKeys {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.bytes().hash(state);
    }
}

/// How a lock kind's holds are renewed: the script, the lock's keys for one entry, the layout.
/// The reply of such a call is one flag per entry: 1 renewed, 0 gone.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RenewalShape {
    pub(crate) script: ScriptId,
    pub(crate) keys: ShapeKeys,
    pub(crate) layout: Layout,
    /// The hold's values ([`Layout::WithValues`]; empty otherwise).
    pub(crate) values: Arc<[String]>,
}

impl RenewalShape {
    /// The same entry for an explicit, owner-checked set of an exact TTL: L-SET for L-RENEW's,
    /// R-SET for R-RENEW's (the periodic renewal only ever raises a TTL). A group's and a
    /// permit's entries are their holds' own deadlines: their shape is its own exact form.
    pub(crate) fn exact(&self) -> Self {
        let script = match self.script {
            ScriptId::Renew => ScriptId::SetTtl,
            ScriptId::ReadRenew => ScriptId::ReadSetTtl,
            other => other,
        };
        Self {
            script,
            ..self.clone()
        }
    }

    /// One entry per hold with the lock's hash as its only key (L-RENEW). `key`: the lock's
    /// name, or its key (shared, not copied: every lock handle keeps a shape).
    /// [`per_hold`](Self::per_hold) over the lock's shared name (no key kept).
    pub(crate) fn per_hold_of(name: Arc<str>) -> Self {
        Self {
            script: ScriptId::Renew,
            keys: ShapeKeys::Name(name),
            layout: Layout::PerHold,
            values: no_values(),
        }
    }

    pub(crate) fn per_hold(key: impl Into<Key>) -> Self {
        Self {
            script: ScriptId::Renew,
            keys: ShapeKeys::One(key.into()),
            layout: Layout::PerHold,
            values: no_values(),
        }
    }
}

/// The empty set of values most shapes have, shared (an empty `Arc<[String]>` allocates).
pub(crate) fn no_values() -> Arc<[String]> {
    static NONE: std::sync::OnceLock<Arc<[String]>> = std::sync::OnceLock::new();
    NONE.get_or_init(|| Arc::from([])).clone()
}

/// A permit's hold field (its id as 32 hex characters) as the scripts take it: the 16 raw
/// bytes (a field that is not an id is sent as it is, and renews nothing).
fn permit_id_value(field: &str) -> Value {
    match field.parse::<PermitId>() {
        Ok(id) => Value::Bytes(fred::bytes::Bytes::copy_from_slice(id.as_bytes())),
        Err(_) => Value::from(field),
    }
}

/// Builds one renewal call over `entries` (all of one script and layout): each entry is a
/// shape and the fields renewed under it (exactly one for [`Layout::PerHold`]).
pub(crate) fn renewal_call(entries: &[(&RenewalShape, Vec<&str>)], lease_ms: u64) -> ScriptCall {
    let script = entries.first().map_or(ScriptId::Renew, |(s, _)| s.script);
    let mut keys = Vec::with_capacity(entries.len());
    let mut args = Vec::with_capacity(entries.len() + 1);
    args.push(Value::from(lease_ms as i64));
    for (shape, fields) in entries {
        debug_assert_eq!(shape.script, script, "one script per call");
        keys.extend(shape.keys.to_vec());
        match shape.layout {
            Layout::PerHold => {}
            Layout::PerLock => args.push(Value::from(fields.len() as i64)),
            Layout::WithValues => {
                debug_assert_eq!(fields.len(), 1, "one hold per entry");
                args.extend(fields.iter().map(|f| Value::from(*f)));
                args.push(Value::from(crate::types::clock::epoch_ms()));
                args.push(Value::from(shape.values.len() as i64));
                args.extend(shape.values.iter().map(|v| Value::from(v.as_str())));
                continue;
            }
            Layout::PermitLease => {
                debug_assert_eq!(fields.len(), 1, "one permit per entry");
                let now = crate::types::clock::epoch_ms();
                for field in fields {
                    args.push(permit_id_value(field));
                }
                args.push(Value::from(now.saturating_add(lease_ms as i64)));
                args.push(Value::from(now));
                args.extend(shape.values.iter().map(|v| Value::from(v.as_str())));
                continue;
            }
        }
        args.extend(fields.iter().map(|f| Value::from(*f)));
    }
    ScriptCall::new(script, keys, args)
}
