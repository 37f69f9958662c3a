//! The blocking facade covers every public primitive (issue 41): every type the crate root
//! exports (`src/lib.rs`'s `pub use`) is either twinned under the same name in
//! `redisson_lock::blocking` (`src/blocking/mod.rs`'s `pub use`) or named below, with the reason
//! it needs no twin. A new async primitive without a blocking twin fails here; so does an
//! allow-list entry that is no longer exported or that got a twin (the list must stay true),
//! and a blocking export that twins nothing.

use std::{collections::BTreeSet, fs, path::Path};

/// Root exports that are not primitives with a blocking twin, and why.
const NOT_TWINNED: &[(&str, &str)] = &[
    // Configuration and options: plain values, shared by both APIs.
    ("Config", "configuration"),
    ("Credentials", "configuration"),
    ("Secret", "configuration"),
    ("LocalHandOff", "configuration"),
    ("NameMapper", "configuration"),
    ("PrefixNameMapper", "configuration"),
    ("ShardedSubscriptionMode", "configuration"),
    ("TlsSettings", "configuration"),
    ("BackOff", "a spin lock's option"),
    (
        "RedLockOptions",
        "a RedLock's options (blocking::RedLock::with_options takes them)",
    ),
    ("fred", "the fred crate, re-exported (feature fred-10)"),
    (
        "Holders",
        "a plain value (blocking::Lock::holders returns it)",
    ),
    ("Holder", "a plain value"),
    (
        "ShutdownReport",
        "a plain value (blocking::Client::shutdown returns it)",
    ),
    ("DEFAULT_OBSERVE_POLL", "a constant"),
    ("MAX_MILLIS", "a constant"),
    // Errors.
    ("Error", "an error"),
    ("ErrorKind", "an error"),
    ("Failure", "an error"),
    ("Result", "an error"),
    ("ParsePermitIdError", "an error"),
    // Kind markers: type parameters of Lock<K> / Guard<K>, shared by both APIs.
    ("Kind", "a kind marker"),
    ("AnyKind", "a kind marker"),
    ("Reentrant", "a kind marker"),
    ("Fair", "a kind marker"),
    ("Read", "a kind marker"),
    ("Write", "a kind marker"),
    ("Fenced", "a kind marker"),
    ("Spin", "a kind marker"),
    ("NonReentrant", "a kind marker"),
    ("NonReentrantFair", "a kind marker"),
    ("Group", "a kind marker"),
    // States, outcomes and values the blocking API returns as they are.
    ("HoldState", "a state"),
    ("UnlockOutcome", "an outcome"),
    (
        "RunOnce",
        "an outcome (blocking::Client::run_once returns it)",
    ),
    ("LockEvent", "a value"),
    ("Leader", "a value (blocking::Election::leader returns it)"),
    ("Owner", "a value"),
    ("PermitId", "a value"),
    ("Stats", "a value"),
    ("Ttl", "a value"),
    (
        "HoldWatch",
        "a synchronous view of a hold, returned by the blocking guards' watch() too",
    ),
    (
        "AnyGuard",
        "a type-erased guard: blocking::MultiGuard::parts() gives these (read-only)",
    ),
    // Functions and attribute macros.
    (
        "assert_locked",
        "a function; answers on a blocking job's thread too",
    ),
    ("locked", "an attribute for async fns"),
    (
        "run_once",
        "an attribute for async fns (blocking::Client::run_once is the method)",
    ),
];

fn read(rel: &str) -> String {
    fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)).unwrap()
}

/// The names a file's top-level `pub use` items export (the last segment of each path, or its
/// `as` alias), from the text between `pub use` and its `;`.
fn exports(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("\npub use ") {
        let item = &rest[at + "\npub use ".len()..];
        let end = item.find(';').expect("a pub use ends with ;");
        out.extend(names_of(&item[..end]));
        rest = &item[end..];
    }
    out
}

fn names_of(item: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut chars = item.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_alphanumeric() || c == '_' {
            let mut ident = String::new();
            while let Some(&c) = chars.peek().filter(|c| c.is_alphanumeric() || **c == '_') {
                ident.push(c);
                chars.next();
            }
            tokens.push(ident);
        } else if c == ':' {
            chars.next();
            if chars.peek() == Some(&':') {
                chars.next();
                tokens.push("::".into());
            }
        } else {
            if !c.is_whitespace() {
                tokens.push(c.to_string());
            }
            chars.next();
        }
    }
    let mut names = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let t = &tokens[i];
        let next = tokens.get(i + 1).map(String::as_str);
        let is_ident = t
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_');
        if is_ident && next == Some("as") {
            names.push(tokens[i + 2].clone());
            i += 3;
            continue;
        }
        if is_ident && next != Some("::") {
            names.push(t.clone());
        }
        i += 1;
    }
    names
}

#[test]
fn the_export_parser_reads_nested_lists_and_aliases() {
    let text = "\npub use a::{b::{C, D}, E as F};\npub use g::H;\nmod x;\n";
    let got: Vec<String> = exports(text).into_iter().collect();
    assert_eq!(got, ["C", "D", "F", "H"]);
}

#[test]
fn every_async_primitive_has_its_blocking_twin() {
    let root = exports(&read("src/lib.rs"));
    let blocking = exports(&read("src/blocking/mod.rs"));
    // The parse found the real lists (a broken parser must not pass vacuously).
    for name in [
        "Lock",
        "Guard",
        "MultiLock",
        "Semaphore",
        "PermitGuard",
        "Election",
    ] {
        assert!(root.contains(name), "src/lib.rs exports {name}: {root:?}");
    }
    for name in ["Client", "Lock", "Guard", "Election"] {
        assert!(
            blocking.contains(name),
            "blocking exports {name}: {blocking:?}"
        );
    }
    let allowed: BTreeSet<&str> = NOT_TWINNED.iter().map(|(n, _)| *n).collect();
    let missing: Vec<&String> = root
        .iter()
        .filter(|n| !allowed.contains(n.as_str()) && !blocking.contains(*n))
        .collect();
    assert!(
        missing.is_empty(),
        "public async primitives without a blocking twin in src/blocking/mod.rs \
         (add the twin, or list the type in NOT_TWINNED with the reason): {missing:?}"
    );
    let stale: Vec<&&str> = allowed
        .iter()
        .filter(|n| !root.contains(**n) || blocking.contains(**n))
        .collect();
    assert!(
        stale.is_empty(),
        "NOT_TWINNED entries no longer exported at the root, or twinned now: {stale:?}"
    );
    let orphans: Vec<&String> = blocking.iter().filter(|n| !root.contains(*n)).collect();
    assert!(
        orphans.is_empty(),
        "blocking exports that twin no root export: {orphans:?}"
    );
}
