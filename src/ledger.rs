//! The owner ledger: what this client knows of each owner's hold count on each lock, and the
//! gate that serialises every call that changes that count.
//!
//! An owner field (`<client uuid>:<owner id>`) belongs to one client, so only this client's
//! acquisitions and releases change its count in Redis (expiry and force-unlock only ever remove
//! the field). Each call that may change the count — an acquisition attempt, a release, the
//! reconciliation of an ambiguous attempt — holds the entry's gate while it runs, so the count
//! before an attempt is known exactly and an ambiguous attempt can be undone by comparing the
//! count with it (see `Hold::attempt`). Nothing of this is stored in Redis.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use tokio::sync::{Mutex as Gate, OwnedMutexGuard};

/// What the client knows of one owner's hold count on one lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Known {
    /// The count in Redis is this (or lower: a hold may have expired unseen).
    Count(u64),
    /// The count must be read from Redis before it is relied on.
    Unknown,
}

/// The lock's raw name and the owner's field, shared with the hold (no copy per entry).
type Key = (Arc<str>, Arc<str>);

/// Every owner's entry, created on first use and dropped when back to a count of zero.
#[derive(Clone, Default)]
pub(crate) struct Ledgers {
    map: Arc<Mutex<HashMap<Key, Arc<Gate<Known>>>>>,
}

impl Ledgers {
    /// Waits for the entry of `field` on `lock` and holds its gate until the returned value is
    /// dropped.
    pub(crate) async fn enter(&self, lock: &Arc<str>, field: &Arc<str>) -> Entry {
        let key = (lock.clone(), field.clone());
        let gate = {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            map.entry(key.clone())
                .or_insert_with(|| Arc::new(Gate::new(Known::Count(0))))
                .clone()
        };
        Entry {
            guard: Some(gate.lock_owned().await),
            key,
            ledgers: self.clone(),
        }
    }

    /// `true` when this client may know of a hold of `field` on `lock`: an entry exists (a
    /// count above zero, an unknown count, or a call in flight).
    pub(crate) fn may_hold(&self, lock: &Arc<str>, field: &Arc<str>) -> bool {
        let key = (lock.clone(), field.clone());
        self.map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(&key)
    }

    /// Number of entries kept (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.lock().unwrap().len()
    }
}

/// One owner's entry, gate held.
pub(crate) struct Entry {
    guard: Option<OwnedMutexGuard<Known>>,
    key: Key,
    ledgers: Ledgers,
}

impl Entry {
    pub(crate) fn known(&self) -> Known {
        **self.guard.as_ref().expect("held until drop")
    }

    pub(crate) fn set(&mut self, known: Known) {
        **self.guard.as_mut().expect("held until drop") = known;
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let idle = self.known() == Known::Count(0);
        drop(self.guard.take());
        if !idle {
            return;
        }
        let mut map = self.ledgers.map.lock().unwrap_or_else(|p| p.into_inner());
        // Nobody else waits for or holds this entry (the map's reference is the only one).
        let unused = map.get(&self.key).is_some_and(|g| {
            Arc::strong_count(g) == 1 && g.try_lock().is_ok_and(|k| *k == Known::Count(0))
        });
        if unused {
            map.remove(&self.key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn entries_serialise_and_are_dropped_when_back_to_zero() {
        let ledgers = Ledgers::default();
        let mut e = ledgers.enter(&"k".into(), &"f".into()).await;
        assert_eq!(e.known(), Known::Count(0));
        e.set(Known::Count(2));
        let waiter = {
            let ledgers = ledgers.clone();
            tokio::spawn(async move { ledgers.enter(&"k".into(), &"f".into()).await.known() })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "the gate is held");
        drop(e);
        assert_eq!(waiter.await.unwrap(), Known::Count(2));
        assert_eq!(ledgers.len(), 1, "a non-zero count is kept");
        ledgers
            .enter(&"k".into(), &"f".into())
            .await
            .set(Known::Count(0));
        assert_eq!(ledgers.len(), 0, "a zero count is forgotten");
    }
}
