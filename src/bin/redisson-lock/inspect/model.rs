//! What an inspection finds (`Inspection` and its parts) and the shapes of a lock hash's
//! fields: an owner field, a group multi-lock's value and holder fields. Pure.

/// One holder field `<client uuid>:<thread id>` (plus `:write` for a write hold).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub client_id: String,
    pub thread_id: String,
    pub count: i64,
    /// `Some("read"|"write")` for a read-write lock.
    pub mode: Option<&'static str>,
    /// Remaining TTLs (ms) of a reader's per-hold timeout keys, hold 1 first.
    pub reader_ttls_ms: Vec<i64>,
    pub field: String,
}

/// Splits an owner field; `None` for a field that is not an owner (e.g. `mode`).
pub fn parse_field(field: &str) -> Option<(String, String, bool)> {
    let (base, write) = match field.strip_suffix(":write") {
        Some(base) => (base, true),
        None => (field, false),
    };
    let (client, thread) = base.rsplit_once(':')?;
    if client.is_empty() || thread.is_empty() {
        return None;
    }
    Some((client.to_owned(), thread.to_owned(), write))
}

/// A queued fair-lock waiter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter {
    pub client_id: String,
    pub thread_id: String,
    /// Epoch milliseconds after which the waiter loses its place.
    pub deadline_ms: Option<i64>,
}

/// An acquired permit of a permit-expirable semaphore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permit {
    /// The id as Redisson shows it: 32 lowercase hex characters of the 16 stored bytes.
    pub id: String,
    /// Epoch milliseconds at which it expires (`None`: acquired without a lease).
    pub expires_ms: Option<i64>,
}

/// The leader of an election (a fenced lock held through `Client::get_election`, or by a
/// Java `RFencedLock`): its owner field, its term (the token counter: the fencing token of the
/// latest acquisition, the holder's) and the value it proclaimed in
/// `redisson_lock_leader:{N}` (this crate's key; absent for a Java leader).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    pub holder: String,
    pub client_id: String,
    pub thread_id: String,
    pub term: Option<i64>,
    pub value: Option<String>,
}

/// One value of a group multi-lock (Redisson `getMultiLock(group, values)`): its hash field
/// (the value's HighwayHash in Base64; values themselves are not stored) and its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupValue {
    pub field: String,
    pub client_id: String,
    pub thread_id: String,
    pub count: i64,
    /// Epoch ms (the holder's clock) when the hold ends unless renewed.
    pub deadline_ms: Option<i64>,
}

/// `true` for a group multi-lock's field: a value field (22 Base64 characters, no `:`) or a
/// holder's `<value>:<owner>:expire_time` / `:lock_count`.
pub fn is_group_field(field: &str) -> bool {
    let value_field = |f: &str| {
        f.len() == 22
            && f.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
    };
    if value_field(field) {
        return true;
    }
    let Some(rest) = field
        .strip_suffix(":expire_time")
        .or_else(|| field.strip_suffix(":lock_count"))
    else {
        return false;
    };
    rest.split_once(':')
        .is_some_and(|(v, owner)| value_field(v) && parse_field(owner).is_some())
}

/// What a lock (or a synchronizer) looks like in Redis right now.
#[derive(Debug, Clone, Default)]
pub struct Inspection {
    pub name: String,
    pub kind: &'static str,
    pub exists: bool,
    pub ttl_ms: Option<i64>,
    pub mode: Option<String>,
    pub holders: Vec<Holder>,
    pub queue: Vec<Waiter>,
    pub token: Option<i64>,
    /// (channel, subscribers) for the lock's unlock channel(s).
    pub channels: Vec<(String, i64)>,
    /// A semaphore's available permits or a latch's count (the string key's value).
    pub value: Option<i64>,
    /// A permit-expirable semaphore's acquired permits, earliest expiry first.
    pub permits: Vec<Permit>,
    /// The held values of a group multi-lock (kind `group`).
    pub values: Vec<GroupValue>,
    /// Who leads, for a held fenced lock (an election's wire).
    pub leader: Option<Leader>,
    /// This machine's clock (epoch ms) when the inspection read the permits' leases.
    pub now_ms: i64,
}

impl Inspection {
    /// `true` when nothing of the lock exists (no hash, queue or token).
    pub fn is_missing(&self) -> bool {
        !self.exists && self.queue.is_empty() && self.token.is_none() && self.permits.is_empty()
    }

    /// `true` for a semaphore or a count-down latch (a counter, not a lock hash).
    pub fn is_synchronizer(&self) -> bool {
        matches!(
            self.kind,
            "semaphore" | "permit-expirable-semaphore" | "count-down-latch" | "semaphore-or-latch"
        )
    }

    pub fn subscribers(&self) -> i64 {
        self.channels.iter().map(|(_, n)| n).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_fields_split_at_the_last_colon_and_drop_write() {
        let id = "0b4f4d6e-2a62-4b5e-9d1c-3f0e5c1a2b3c";
        assert_eq!(
            parse_field(&format!("{id}:42")),
            Some((id.into(), "42".into(), false))
        );
        assert_eq!(
            parse_field(&format!("{id}:7:write")),
            Some((id.into(), "7".into(), true))
        );
        assert_eq!(parse_field("mode"), None);
    }

    #[test]
    fn value_and_holder_fields_are_group_fields() {
        let id = "0b4f4d6e-2a62-4b5e-9d1c-3f0e5c1a2b3c";
        let v = "qwvAS12pR0CgRitaypEjUw";
        assert!(is_group_field(v));
        assert!(is_group_field(&format!("{v}:{id}:57:expire_time")));
        assert!(is_group_field(&format!("{v}:{id}:57:lock_count")));
        assert!(!is_group_field(&format!("{id}:57")));
        assert!(!is_group_field("mode"));
        assert!(!is_group_field(&format!("{v}:{id}:57:other")));
    }
}
