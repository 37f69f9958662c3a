//! Cluster facts every layer above may need and that need nothing themselves: how unlock
//! messages travel ([`Messaging`], resolved at connect) and the hash slot of a key.

use fred::types::Key;

/// How unlock messages travel, resolved at connect: classic `PUBLISH`/`SUBSCRIBE`, sharded
/// `SPUBLISH`/`SSUBSCRIBE` (cluster only), or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Messaging {
    pub(crate) classic: bool,
    pub(crate) sharded: bool,
}

impl Messaging {
    /// The publish command passed to the release scripts (`both` publishes twice).
    pub(crate) fn publish_command(self) -> &'static str {
        match (self.classic, self.sharded) {
            (true, true) => "both",
            (false, true) => "spublish",
            _ => "publish",
        }
    }
}

/// The hash slot of a key (CRC16 of its hash tag, as Redis Cluster computes it).
pub(crate) fn slot_of(key: &Key) -> u16 {
    fred::util::redis_keyslot(key.as_bytes())
}

/// `true` when every key hashes to the same cluster slot.
pub(crate) fn one_slot(keys: &[Key]) -> bool {
    let mut slots = keys.iter().map(slot_of);
    match slots.next() {
        Some(first) => slots.all(|s| s == first),
        None => true,
    }
}
