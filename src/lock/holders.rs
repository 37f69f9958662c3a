//! Who holds a lock ([`Lock::holders`]): the owners in the lock's hash, their hold counts, the
//! key's TTL and whether each owner is of this client; the library's form of the CLI's
//! inspector, for code that decides or reports on a held lock.

use super::{front::Lock, protocol::Kind};
use crate::{error::Result, types::ttl::Ttl};

/// A lock's holders as Redis holds them now (one read; another client may change it next).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holders {
    /// The key's time to live ([`Ttl::NotLocked`]: nobody holds the lock).
    pub ttl: Ttl,
    /// A read-write lock's mode (`read` or `write`); `None` for every other kind.
    pub mode: Option<String>,
    /// Every owner in the hash, sorted by field.
    pub holders: Vec<Holder>,
}

/// One owner of a lock.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Holder {
    /// The owner's hash field, `<client uuid>:<owner id>` (`...:write` for a write hold; a
    /// Java holder's `<uuid>:<thread id>`).
    pub field: String,
    /// The client id part of the field.
    pub client_id: String,
    /// The owner id part (a Java holder's thread id).
    pub owner_id: String,
    /// Its hold count (a group lock's: the least over its values).
    pub count: u64,
    /// A write hold of a read-write lock.
    pub write: bool,
    /// The owner is of this client.
    pub this_client: bool,
}

/// `<client>:<owner>[:write]` split, `None` for a field that is no owner (`mode`).
fn parse(field: &str) -> Option<(&str, &str, bool)> {
    let (base, write) = match field.strip_suffix(":write") {
        Some(base) => (base, true),
        None => (field, false),
    };
    let (client, owner) = base.rsplit_once(':')?;
    (!client.is_empty() && !owner.is_empty()).then_some((client, owner, write))
}

/// The holders in a lock hash's fields (`fields`: pairs of field and value), as `client` sees
/// them; a group lock's layout (value fields naming their owner, `<value>:<owner>:lock_count`)
/// is told apart by its values.
fn holders(fields: &[(String, String)], client: &str) -> (Option<String>, Vec<Holder>) {
    let get = |f: &str| fields.iter().find(|(k, _)| k == f).map(|(_, v)| v.as_str());
    let mut mode = None;
    let mut out: Vec<Holder> = Vec::new();
    let mut add = |field: &str, count: u64| {
        let Some((client_id, owner_id, write)) = parse(field) else {
            return;
        };
        match out.iter_mut().find(|h| h.field == field) {
            Some(h) => h.count = h.count.min(count),
            None => out.push(Holder {
                field: field.to_owned(),
                client_id: client_id.to_owned(),
                owner_id: owner_id.to_owned(),
                count,
                write,
                this_client: client_id == client,
            }),
        }
    };
    for (field, value) in fields {
        if field == "mode" {
            mode = Some(value.clone());
        } else if let Ok(count) = value.parse::<u64>() {
            // A group lock's `<value>:<owner>:lock_count` and `:expire_time` are read through
            // its value field.
            if !field.ends_with(":lock_count") && !field.ends_with(":expire_time") {
                add(field, count);
            }
        } else if parse(value).is_some() && !field.contains(':') {
            // A group lock's value field, naming its owner.
            let count = get(&format!("{field}:{value}:lock_count"))
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            add(value, count);
        }
    }
    out.sort_by(|a, b| a.field.cmp(&b.field));
    (mode, out)
}

impl<K: Kind> Lock<K> {
    /// Who holds the lock now: every owner field in its hash with its hold count, whether it
    /// is of this client, the key's TTL and a read-write lock's mode (`HGETALL` and `PTTL`).
    /// Every kind's layout is read, a group lock's and a Java holder's included.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let view = client.get_lock("orders").holders().await?;
    /// for h in &view.holders {
    ///     println!("{} holds {} times (this client: {})", h.field, h.count, h.this_client);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// A Redis or connection error; [`WrongType`](crate::Error::WrongType) when the key is not
    /// a hash.
    ///
    /// # Cancel safety
    /// Cancel safe (reads).
    pub async fn holders(&self) -> Result<Holders> {
        let client = self.handle.client();
        let name = self.raw_name();
        let fields = client.core().hash_fields(name).await?;
        let ttl = client.core().ttl(name).await?;
        let (mode, holders) = holders(&fields, client.id());
        Ok(Holders { ttl, mode, holders })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn every_layout_names_its_owners() {
        let (mode, h) = holders(&pairs(&[("me:7", "2"), ("java:33", "1")]), "me");
        assert_eq!(mode, None);
        assert_eq!(h.len(), 2);
        assert_eq!(
            (h[1].client_id.as_str(), h[1].owner_id.as_str()),
            ("me", "7")
        );
        assert!(h[1].this_client && !h[0].this_client);
        assert_eq!(h[1].count, 2);
        let (mode, h) = holders(
            &pairs(&[("mode", "write"), ("me:7:write", "1"), ("me:7", "2")]),
            "me",
        );
        assert_eq!(mode.as_deref(), Some("write"));
        assert!(h.iter().any(|x| x.write && x.count == 1));
        assert!(h.iter().any(|x| !x.write && x.count == 2));
        let v = "AAAAAAAAAAAAAAAAAAAAAA";
        let w = "BBBBBBBBBBBBBBBBBBBBBB";
        let (_, h) = holders(
            &pairs(&[
                (v, "me:7"),
                (&format!("{v}:me:7:lock_count"), "2"),
                (&format!("{v}:me:7:expire_time"), "99"),
                (w, "me:7"),
                (&format!("{w}:me:7:lock_count"), "1"),
            ]),
            "me",
        );
        assert_eq!(h.len(), 1, "{h:?}");
        assert_eq!(h[0].count, 1, "the least over its values");
    }
}
