//! Derived Redis names: the brace rule of protocol §2.3, applied literally.

/// The brace rule: `{name}`, or `name` itself when it already contains a `{` anywhere (only
/// the presence of `{` is tested, as Redisson does). Every derived name is built from this.
pub(crate) fn braced(name: &str) -> std::borrow::Cow<'_, str> {
    if name.contains('{') {
        std::borrow::Cow::Borrowed(name)
    } else {
        std::borrow::Cow::Owned(format!("{{{name}}}"))
    }
}

/// `prefix:{name}`, or `prefix:name` when `name` already contains a `{` anywhere.
pub(crate) fn prefix_name(prefix: &str, name: &str) -> String {
    format!("{prefix}:{}", braced(name))
}

/// `{name}:suffix`, or `name:suffix` when `name` already contains a `{` anywhere.
pub(crate) fn suffix_name(name: &str, suffix: &str) -> String {
    format!("{}:{suffix}", braced(name))
}

/// The unlock channel of an RLock / fenced lock: `redisson_lock__channel:{N}`.
pub(crate) fn lock_channel(name: &str) -> String {
    prefix_name("redisson_lock__channel", name)
}

/// The channel of a semaphore (both kinds): `redisson_sc:{N}` (sync protocol §2.1).
pub(crate) fn semaphore_channel(name: &str) -> String {
    prefix_name("redisson_sc", name)
}

/// The sorted set of a permit-expirable semaphore's acquired permits: `{N}:timeout` (§3.1).
pub(crate) fn permit_timeouts(name: &str) -> String {
    suffix_name(name, "timeout")
}

/// The channel of a count-down latch: `redisson_countdownlatch__channel__{N}`, always with
/// braces around `N` (the brace rule does not apply, sync protocol §4.1).
pub(crate) fn latch_channel(name: &str) -> String {
    format!("redisson_countdownlatch__channel__{{{name}}}")
}

/// The unlock receipt of one unlock request (Redisson's "unlock latch": the key an unlock
/// leaves so that a repeated unlock is answered from it): `redisson_unlock_latch:{N}:<request
/// id>`.
pub(crate) fn unlock_receipt(name: &str, request_id: &str) -> String {
    const PREFIX: &str = "redisson_unlock_latch:";
    let mut receipt = String::with_capacity(PREFIX.len() + name.len() + 3 + request_id.len());
    receipt.push_str(PREFIX);
    if name.contains('{') {
        receipt.push_str(name);
    } else {
        receipt.push('{');
        receipt.push_str(name);
        receipt.push('}');
    }
    receipt.push(':');
    receipt.push_str(request_id);
    receipt
}

/// A fresh unlock request id: 16 bytes as 32 lowercase hex characters, unique to this request.
///
/// The bytes are a random 128-bit value drawn once per process plus a counter, so ids never
/// repeat within a process and clash across processes only if two random draws do (2^-128);
/// that is as unique as a fresh v4 UUID per request, without a system call per release.
pub(crate) fn request_id() -> String {
    use std::sync::{
        atomic::{AtomicU64, Ordering},
        OnceLock,
    };
    static BASE: OnceLock<u128> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = *BASE.get_or_init(|| uuid::Uuid::new_v4().as_u128());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let value = base.wrapping_add(u128::from(n));
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(32);
    for b in value.to_be_bytes() {
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 0xf)] as char);
    }
    out
}

/// A key over a shared name: its bytes are the name's own (a clone of the key, made for every
/// call, counts a reference; it copies nothing and allocates nothing).
pub(crate) fn shared_key(name: &std::sync::Arc<str>) -> fred::types::Key {
    /// The name's bytes, as a key's owner.
    struct NameBytes(std::sync::Arc<str>);
    impl AsRef<[u8]> for NameBytes {
        fn as_ref(&self) -> &[u8] {
            self.0.as_bytes()
        }
    }
    fred::types::Key::from(fred::bytes::Bytes::from_owner(NameBytes(name.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synchronizer_names_follow_their_rules() {
        assert_eq!(semaphore_channel("s"), "redisson_sc:{s}");
        assert_eq!(semaphore_channel("{t}s"), "redisson_sc:{t}s");
        assert_eq!(permit_timeouts("p"), "{p}:timeout");
        assert_eq!(permit_timeouts("{t}p"), "{t}p:timeout");
        assert_eq!(latch_channel("l"), "redisson_countdownlatch__channel__{l}");
        assert_eq!(
            latch_channel("{t}l"),
            "redisson_countdownlatch__channel__{{t}l}"
        );
    }

    #[test]
    fn brace_rule_adds_braces_only_without_an_opening_brace() {
        assert_eq!(lock_channel("orders"), "redisson_lock__channel:{orders}");
        assert_eq!(
            lock_channel("{test}:abc:key"),
            "redisson_lock__channel:{test}:abc:key"
        );
        // Only the presence of '{' is tested, as Redisson does.
        assert_eq!(lock_channel("a{b"), "redisson_lock__channel:a{b");
        assert_eq!(lock_channel("}{"), "redisson_lock__channel:}{");
        assert_eq!(suffix_name("n", "x:1"), "{n}:x:1");
        assert_eq!(suffix_name("{t}:n", "x"), "{t}:n:x");
        assert_eq!(braced("n"), "{n}");
        assert_eq!(braced("a{b}c"), "a{b}c");
    }

    #[test]
    fn receipt_names_and_request_ids() {
        let id = request_id();
        assert_eq!(id.len(), 32);
        assert!(id
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(id, request_id());
        assert_eq!(
            unlock_receipt("k", "ab"),
            "redisson_unlock_latch:{k}:ab".to_string()
        );
    }
}
