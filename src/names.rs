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

/// The private unlock latch of one unlock request: `redisson_unlock_latch:{N}:<request id>`.
pub(crate) fn unlock_latch(name: &str, request_id: &str) -> String {
    let mut latch = prefix_name("redisson_unlock_latch", name);
    latch.push(':');
    latch.push_str(request_id);
    latch
}

/// A fresh unlock request id: 16 random bytes as 32 lowercase hex characters.
pub(crate) fn request_id() -> String {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let mut out = String::with_capacity(32);
    for b in bytes {
        use std::fmt::Write;
        let _ = write!(out, "{b:02x}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn latch_names_and_request_ids() {
        let id = request_id();
        assert_eq!(id.len(), 32);
        assert!(id
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(id, request_id());
        assert_eq!(
            unlock_latch("k", "ab"),
            "redisson_unlock_latch:{k}:ab".to_string()
        );
    }
}
