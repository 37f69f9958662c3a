//! A table of shared values found by their own keys ([`Table`]): each value kept once, behind
//! one pointer per slot, and looked up by a borrowed key (no key made per lookup). The client
//! keeps one entry per lock a task waits on (its wait line, its channel's subscription): ten
//! thousand waiters on distinct locks are ten thousand entries of each, and a map with the key
//! beside the value kept the key twice and a slot three times as wide.

use std::{
    hash::{BuildHasher, Hash, RandomState},
    sync::Arc,
};

/// A value that carries its own key.
pub(crate) trait Keyed {
    /// The key, borrowed from the value (or from a caller's lookup).
    type Key<'a>: Hash + Copy
    where
        Self: 'a;

    /// This value's key.
    fn key(&self) -> Self::Key<'_>;

    /// Whether this value's key is `key`.
    fn has_key(&self, key: Self::Key<'_>) -> bool;
}

/// Shared values by their keys, at most one per key.
pub(crate) struct Table<T> {
    entries: hashbrown::HashTable<Arc<T>>,
    hasher: RandomState,
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Self {
            entries: hashbrown::HashTable::new(),
            hasher: RandomState::new(),
        }
    }
}

impl<T: Keyed> Table<T> {
    /// The value of `key`.
    pub(crate) fn get(&self, key: T::Key<'_>) -> Option<&Arc<T>> {
        self.entries
            .find(self.hasher.hash_one(key), |e| e.has_key(key))
    }

    /// The value of `value`'s key, `value` itself (made) when there is none.
    pub(crate) fn get_or_insert_with(
        &mut self,
        key: T::Key<'_>,
        make: impl FnOnce() -> T,
    ) -> &Arc<T> {
        let hasher = &self.hasher;
        self.entries
            .entry(
                hasher.hash_one(key),
                |e| e.has_key(key),
                |e| hasher.hash_one(e.key()),
            )
            .or_insert_with(|| Arc::new(make()))
            .into_mut()
    }

    /// Puts `value` in place of its key's value, if any (returned).
    pub(crate) fn replace(&mut self, value: Arc<T>) -> Option<Arc<T>> {
        let hasher = &self.hasher;
        let hash = hasher.hash_one(value.key());
        match self.entries.entry(
            hash,
            |e| e.has_key(value.key()),
            |e| hasher.hash_one(e.key()),
        ) {
            hashbrown::hash_table::Entry::Occupied(mut found) => {
                Some(std::mem::replace(found.get_mut(), value))
            }
            hashbrown::hash_table::Entry::Vacant(slot) => {
                slot.insert(value);
                None
            }
        }
    }

    /// Removes `value` if it is its key's value (not another one of the same key); `true`
    /// when it was.
    pub(crate) fn remove(&mut self, value: &Arc<T>) -> bool {
        let hash = self.hasher.hash_one(value.key());
        match self.entries.find_entry(hash, |e| Arc::ptr_eq(e, value)) {
            Ok(found) => {
                found.remove();
                true
            }
            Err(_) => false,
        }
    }

    /// Whether `value` is its key's value.
    pub(crate) fn is_current(&self, value: &Arc<T>) -> bool {
        self.get(value.key()).is_some_and(|e| Arc::ptr_eq(e, value))
    }

    /// The number of values.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every value, in no particular order.
    pub(crate) fn values(&self) -> impl Iterator<Item = &Arc<T>> {
        self.entries.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Named {
        kind: u8,
        name: String,
    }

    impl Keyed for Named {
        type Key<'a> = (u8, &'a str);
        fn key(&self) -> (u8, &str) {
            (self.kind, &self.name)
        }
        fn has_key(&self, key: (u8, &str)) -> bool {
            self.key() == key
        }
    }

    fn named(kind: u8, name: &str) -> Named {
        Named {
            kind,
            name: name.into(),
        }
    }

    #[test]
    fn values_are_found_by_their_keys_made_once_and_removed_only_as_themselves() {
        let mut t = Table::default();
        let a = t.get_or_insert_with((1, "a"), || named(1, "a")).clone();
        let again = t
            .get_or_insert_with((1, "a"), || unreachable!("made once"))
            .clone();
        assert!(Arc::ptr_eq(&a, &again));
        let b = t.get_or_insert_with((2, "a"), || named(2, "a")).clone();
        assert!(!Arc::ptr_eq(&a, &b), "keys differ by every part");
        assert_eq!(t.len(), 2);
        assert!(t.get((1, "b")).is_none());

        let newer = Arc::new(named(1, "a"));
        let old = t.replace(newer.clone()).expect("replaced");
        assert!(Arc::ptr_eq(&old, &a));
        assert!(!t.is_current(&a) && t.is_current(&newer));
        assert!(!t.remove(&a), "an old value of the key removes nothing");
        assert!(t.get((1, "a")).is_some_and(|v| Arc::ptr_eq(v, &newer)));
        assert!(t.remove(&newer));
        assert!(t.replace(Arc::new(named(3, "c"))).is_none());
        let mut left: Vec<_> = t.values().map(|v| (v.kind, v.name.clone())).collect();
        left.sort();
        assert_eq!(left, vec![(2, "a".to_owned()), (3, "c".to_owned())]);
        // Many values: the table grows and still finds each.
        for i in 0..1000 {
            t.get_or_insert_with((9, &i.to_string()), || named(9, &i.to_string()));
        }
        assert!((0..1000).all(|i| t.get((9, &i.to_string())).is_some()));
        assert_eq!(t.len(), 1002);
    }
}
