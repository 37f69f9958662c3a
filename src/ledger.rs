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
        // Cancelled while waiting for the gate: the entry's holder may have left meanwhile and
        // kept the entry for this waiter, so whoever is last out removes an idle one.
        let mut waiting = Waiting {
            key: Some(key),
            ledgers: self,
        };
        let guard = gate.lock_owned().await;
        Entry {
            guard: Some(guard),
            key: waiting.key.take().expect("taken once, here"),
            ledgers: self.clone(),
        }
    }

    /// Removes the entry of `key` if it is idle: a count of zero, and nobody else holds or
    /// waits for it (the map's reference is the only one).
    fn forget_if_idle(&self, key: &Key) {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let unused = map.get(key).is_some_and(|g| {
            Arc::strong_count(g) == 1 && g.try_lock().is_ok_and(|k| *k == Known::Count(0))
        });
        if unused {
            map.remove(key);
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
        if idle {
            self.ledgers.forget_if_idle(&self.key);
        }
    }
}

/// An `enter` waiting for its gate; dropped before it got it (cancelled), it removes the entry
/// if that left it idle.
struct Waiting<'a> {
    key: Option<Key>,
    ledgers: &'a Ledgers,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.ledgers.forget_if_idle(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `enter` cancelled while it waited for the gate leaves no entry behind, even when the
    /// holder it waited for left first (its clean-up then saw the waiter's reference).
    #[tokio::test(flavor = "current_thread")]
    async fn an_enter_cancelled_while_queued_leaves_no_entry() {
        let ledgers = Ledgers::default();
        let first = ledgers.enter(&"k".into(), &"f".into()).await;
        let queued = {
            let ledgers = ledgers.clone();
            tokio::spawn(async move {
                let _entry = ledgers.enter(&"k".into(), &"f".into()).await;
            })
        };
        tokio::task::yield_now().await;
        assert!(!queued.is_finished(), "waiting for the gate");
        // The holder leaves at a count of zero while the other waits, then the waiter is
        // cancelled before it runs again.
        drop(first);
        queued.abort();
        assert!(queued.await.unwrap_err().is_cancelled());
        assert_eq!(ledgers.len(), 0, "an idle entry nobody will remove");
        assert!(!ledgers.may_hold(&"k".into(), &"f".into()));
    }

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
