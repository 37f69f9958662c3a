//! Derived Redis names: the brace rule of protocol §2.3, applied literally.

/// The brace rule: `{name}`, or `name` itself when it already contains a `{` anywhere (only
/// the presence of `{` is tested, as Redisson does). Every derived name is built from this.
pub(crate) fn braced(name: &str) -> std::borrow::Cow<'_, str> {
    if name.contains('{') {
        std::borrow::Cow::Borrowed(name)
    } else {
        std::borrow::Cow::Owned(around(&[], name, &[]))
    }
}

/// The parts of `before`, the name under the brace rule, the parts of `after`: one string of
/// the exact length, written in one allocation (a release builds two of these per call).
fn around(before: &[&str], name: &str, after: &[&str]) -> String {
    let braces = !name.contains('{');
    let len = before.iter().chain(after).map(|p| p.len()).sum::<usize>()
        + name.len()
        + if braces { 2 } else { 0 };
    let mut out = String::with_capacity(len);
    before.iter().for_each(|p| out.push_str(p));
    if braces {
        out.push('{');
        out.push_str(name);
        out.push('}');
    } else {
        out.push_str(name);
    }
    after.iter().for_each(|p| out.push_str(p));
    out
}

/// `prefix:{name}`, or `prefix:name` when `name` already contains a `{` anywhere.
pub(crate) fn prefix_name(prefix: &str, name: &str) -> String {
    around(&[prefix, ":"], name, &[])
}

/// `{name}:suffix`, or `name:suffix` when `name` already contains a `{` anywhere.
pub(crate) fn suffix_name(name: &str, suffix: &str) -> String {
    around(&[], name, &[":", suffix])
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
    around(&["redisson_unlock_latch:"], name, &[":", request_id])
}

/// The receipt of a fresh unlock request ([`unlock_receipt`] with a new request id), as the
/// key the release's calls send: one allocation, which every retry's call shares.
pub(crate) fn fresh_unlock_receipt(name: &str) -> fred::types::Key {
    let mut id = [0u8; 32];
    request_id_into(&mut id);
    let id = std::str::from_utf8(&id).expect("hex digits");
    fred::types::Key::from(unlock_receipt(name, id))
}

/// Writes a fresh unlock request id: 16 bytes as 32 lowercase hex digits, unique to this
/// request.
///
/// The bytes are a random 128-bit value drawn once per process plus a counter, so ids never
/// repeat within a process and clash across processes only if two random draws do (2^-128);
/// that is as unique as a fresh v4 UUID per request, without a system call per release.
fn request_id_into(out: &mut [u8; 32]) {
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
    for (i, b) in value.to_be_bytes().into_iter().enumerate() {
        out[2 * i] = HEX[usize::from(b >> 4)];
        out[2 * i + 1] = HEX[usize::from(b & 0xf)];
    }
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
        let receipt = fresh_unlock_receipt("k");
        let receipt = receipt.as_str().expect("text");
        let id = receipt
            .strip_prefix("redisson_unlock_latch:{k}:")
            .expect("the receipt of k");
        assert_eq!(id.len(), 32);
        assert!(id
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(
            fresh_unlock_receipt("k"),
            fresh_unlock_receipt("k"),
            "a request id per receipt"
        );
        assert_eq!(
            unlock_receipt("k", "ab"),
            "redisson_unlock_latch:{k}:ab".to_string()
        );
        assert_eq!(
            unlock_receipt("{t}k", "ab"),
            "redisson_unlock_latch:{t}k:ab".to_string()
        );
    }
}
