//! The script registry: every `lua/*.lua` file compiled in, called by `EVALSHA`, reloaded on
//! `NOSCRIPT` (after a Redis restart, a failover or `SCRIPT FLUSH`). Lock kinds describe a call
//! as a [`ScriptCall`]; only [`Core::run`](crate::conn::core::Core::run) sends it.
//!
//! Every script's second line is a machine-readable header, `--! keys=K argv=A` (`*` for the
//! batched renewal scripts), against which the unit tests check every call a lock kind builds.

use fred::types::{Key, Value};

/// Declares the scripts once: the enum, the list of all of them and their sources.
macro_rules! scripts {
    ($($(#[$doc:meta])* $id:ident => $source:expr,)*) => {
        /// The scripts of the lock family and the synchronizers, one file each in `lua/`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub(crate) enum ScriptId {
            $($(#[$doc])* $id,)*
        }

        impl ScriptId {
            /// Every script, in declaration order.
            pub(crate) const ALL: &'static [ScriptId] = &[$(ScriptId::$id,)*];

            /// The Lua source sent to Redis.
            pub(crate) fn source(self) -> &'static str {
                match self {
                    $(ScriptId::$id => $source,)*
                }
            }
        }
    };
}

/// Prepends `notify()` (the publish helper) to a script that publishes.
macro_rules! notifying {
    ($file:literal) => {
        concat!(
            include_str!("../../lua/notify.lua"),
            "\n",
            include_str!(concat!("../../lua/", $file))
        )
    };
}

/// Prepends the fair-lock helpers (and `notify()`) to a fair script.
macro_rules! fair {
    ($file:literal) => {
        concat!(
            include_str!("../../lua/notify.lua"),
            "\n",
            include_str!("../../lua/fair_common.lua"),
            "\n",
            include_str!(concat!("../../lua/", $file))
        )
    };
}

scripts! {
    /// L-ACQ (§4.2).
    Acquire => include_str!("../../lua/lock_acquire.lua"),
    /// L-REL (§4.3).
    Release => notifying!("lock_release.lua"),
    /// L-FORCE (§4.4).
    ForceUnlock => notifying!("lock_force_unlock.lua"),
    /// L-RENEW (§5.2), raising the TTL only.
    Renew => include_str!("../../lua/lock_renew.lua"),
    /// L-SET: L-RENEW's call setting an exact TTL (an explicit, owner-checked set).
    SetTtl => include_str!("../../lua/lock_set_ttl.lua"),
    /// R-RENEW (§5.2), raising TTLs only.
    ReadRenew => include_str!("../../lua/read_renew.lua"),
    /// R-SET: R-RENEW's call setting a reader's exact TTL (an explicit, owner-checked set).
    ReadSetTtl => include_str!("../../lua/read_set_ttl.lua"),
    /// Fenced acquisition with token (§9).
    FencedAcquire => include_str!("../../lua/fenced_acquire.lua"),
    /// Spin release, no publish (§10).
    SpinRelease => include_str!("../../lua/spin_release.lua"),
    /// Spin forced unlock, no publish (§10).
    SpinForceUnlock => include_str!("../../lua/spin_force_unlock.lua"),
    /// F-TRY (§7.2).
    FairTry => fair!("fair_try.lua"),
    /// F-ACQ (§7.3).
    FairAcquire => fair!("fair_acquire.lua"),
    /// F-REL (§7.4).
    FairRelease => fair!("fair_release.lua"),
    /// F-FORCE (§7.5).
    FairForceUnlock => fair!("fair_force_unlock.lua"),
    /// F-CANCEL (§7.6).
    FairCancel => include_str!("../../lua/fair_cancel.lua"),
    /// R-ACQ (§8.2).
    ReadAcquire => include_str!("../../lua/read_acquire.lua"),
    /// R-REL (§8.3).
    ReadRelease => notifying!("read_release.lua"),
    /// W-ACQ (§8.4).
    WriteAcquire => include_str!("../../lua/write_acquire.lua"),
    /// W-REL (§8.5).
    WriteRelease => notifying!("write_release.lua"),
    /// Read/write forced unlock (§8.6).
    RwForceUnlock => notifying!("rw_force_unlock.lua"),
    /// Read/write isLocked (§8.6).
    RwIsLocked => include_str!("../../lua/rw_is_locked.lua"),
    /// NR-ACQ (sync §5.1): the reentrant acquisition with the re-entry refused.
    NonReentrantAcquire => include_str!("../../lua/nonreentrant_acquire.lua"),
    /// NRF-TRY (sync §5.2).
    NonReentrantFairTry => fair!("nonreentrant_fair_try.lua"),
    /// NRF-ACQ (sync §5.2).
    NonReentrantFairAcquire => fair!("nonreentrant_fair_acquire.lua"),
    /// G-ACQ (sync §6.2).
    GroupAcquire => include_str!("../../lua/group_acquire.lua"),
    /// G-REL (sync §6.2).
    GroupRelease => notifying!("group_release.lua"),
    /// G-FORCE (sync §6.2).
    GroupForceUnlock => notifying!("group_force_unlock.lua"),
    /// G-ISLOCKED (sync §6.2).
    GroupIsLocked => include_str!("../../lua/group_is_locked.lua"),
    /// An owner's hold count on a set of values of a group.
    GroupHoldCount => include_str!("../../lua/group_hold_count.lua"),
    /// G-RENEW, batched (sync §6.2).
    GroupRenew => include_str!("../../lua/group_renew.lua"),
    /// Asks whether this user may listen on some channels (ACL check before subscribing).
    CanSubscribe => include_str!("../../lua/can_subscribe.lua"),
    /// SEM-ACQ (sync §2.2).
    SemAcquire => include_str!("../../lua/sem_acquire.lua"),
    /// SEM-REL (sync §2.2).
    SemRelease => notifying!("sem_release.lua"),
    /// SEM-SET, SEM-SET-TTL and PS-SET (sync §2.2, §3.2).
    SemSet => notifying!("sem_set.lua"),
    /// SEM-DRAIN (sync §2.2).
    SemDrain => include_str!("../../lua/sem_drain.lua"),
    /// SEM-ADD (sync §2.2).
    SemAdd => notifying!("sem_add.lua"),
    /// PS-ACQ (sync §3.2).
    PermitAcquire => notifying!("psem_acquire.lua"),
    /// PS-REL (sync §3.2).
    PermitRelease => notifying!("psem_release.lua"),
    /// PS-AVAIL (sync §3.2).
    PermitAvailable => notifying!("psem_available.lua"),
    /// PS-ADD (sync §3.2).
    PermitAdd => notifying!("psem_add.lua"),
    /// PS-LEASE batched: the watchdog's renewal of permits (sync §3.2, `updateLeaseTime`).
    PermitRenew => notifying!("psem_renew.lua"),
    /// PS-GETLEASE (sync §3.2, `getLeaseTime`): a leased permit's check after a reconnect.
    PermitLeaseLeft => notifying!("psem_lease_left.lua"),
    /// CDL-SET (sync §4.2).
    LatchSet => notifying!("cdl_set.lua"),
    /// CDL-DOWN (sync §4.2).
    LatchCountDown => notifying!("cdl_count_down.lua"),
    /// CDL-DEL (sync §4.2).
    LatchDelete => notifying!("cdl_delete.lua"),
    /// The election's view of its fenced lock: holder, term, proclamation (crate-only).
    ElectionView => include_str!("../../lua/election_view.lua"),
    /// A leader's proclamation beside its fenced lock, set or cleared (crate-only).
    ElectionProclaim => include_str!("../../lua/election_proclaim.lua"),
}

impl ScriptId {
    /// `true` for the scripts that publish (releases and forced unlocks, and every synchronizer
    /// script that announces): a user that may not publish is refused them before anything is
    /// written.
    pub(crate) fn announces(self) -> bool {
        matches!(
            self,
            ScriptId::Release
                | ScriptId::ForceUnlock
                | ScriptId::FairRelease
                | ScriptId::FairForceUnlock
                | ScriptId::ReadRelease
                | ScriptId::WriteRelease
                | ScriptId::RwForceUnlock
                | ScriptId::SemRelease
                | ScriptId::SemSet
                | ScriptId::SemAdd
                | ScriptId::PermitAcquire
                | ScriptId::PermitRelease
                | ScriptId::PermitAvailable
                | ScriptId::PermitAdd
                | ScriptId::PermitRenew
                | ScriptId::PermitLeaseLeft
                | ScriptId::LatchSet
                | ScriptId::LatchCountDown
                | ScriptId::LatchDelete
                | ScriptId::GroupRelease
                | ScriptId::GroupForceUnlock
        )
    }
}

/// One script invocation: which script, its `KEYS` and its `ARGV`. Lock kinds build these; the
/// core runs them. Every key the call touches is in `keys`, so one place sees them all (the
/// cluster slot check, logging).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ScriptCall {
    pub(crate) script: ScriptId,
    pub(crate) keys: Vec<Key>,
    pub(crate) args: Vec<Value>,
}

impl ScriptCall {
    pub(crate) fn new(script: ScriptId, keys: Vec<Key>, args: Vec<Value>) -> Self {
        Self { script, keys, args }
    }
}

/// A loaded script: its source and SHA1 (also as the value `EVALSHA` sends, shared: a clone
/// per call copies nothing).
struct Loaded {
    id: ScriptId,
    source: &'static str,
    sha1: String,
    sha1_value: Value,
}

/// SHA1s computed once; every script is loaded at connect, and again after a `NOSCRIPT`.
pub(crate) struct Scripts {
    loaded: Vec<Loaded>,
}

impl Scripts {
    pub(crate) fn new() -> Self {
        let loaded = ScriptId::ALL
            .iter()
            .map(|&id| {
                let source = id.source();
                let sha1 = fred::types::scripts::Script::from_lua(source)
                    .sha1()
                    .to_string();
                let sha1_value = Value::from(sha1.as_str());
                // Promoted to shared storage once, here, not by each call's first clone.
                drop(sha1_value.clone());
                Loaded {
                    id,
                    source,
                    sha1,
                    sha1_value,
                }
            })
            .collect();
        Self { loaded }
    }

    fn get(&self, id: ScriptId) -> &Loaded {
        // The list is in declaration order, so the discriminant is the index.
        let loaded = &self.loaded[id as usize];
        debug_assert_eq!(loaded.id, id);
        loaded
    }

    /// The SHA1 of a script.
    pub(crate) fn sha1(&self, id: ScriptId) -> &str {
        &self.get(id).sha1
    }

    /// The SHA1 of a script as the value `EVALSHA` sends (a clone shares it).
    pub(crate) fn sha1_value(&self, id: ScriptId) -> Value {
        self.get(id).sha1_value.clone()
    }

    /// The source of a script.
    pub(crate) fn source(&self, id: ScriptId) -> &'static str {
        self.get(id).source
    }

    /// Every script's source, for `SCRIPT LOAD` at connect.
    pub(crate) fn sources(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.loaded.iter().map(|l| l.source)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The `--! keys=K argv=A` header of a script: `None` for a variadic count (`*`).
    pub(crate) fn header(id: ScriptId) -> (Option<usize>, Option<usize>) {
        let line = id
            .source()
            .lines()
            .find(|l| l.starts_with("--! keys="))
            .unwrap_or_else(|| panic!("{id:?} has no --! header"));
        let mut keys = None;
        let mut argv = None;
        for part in line.trim_start_matches("--!").split_whitespace() {
            let (name, value) = part.split_once('=').expect("name=value");
            let n = if value == "*" {
                None
            } else {
                Some(value.parse().expect("a count"))
            };
            match name {
                "keys" => keys = n,
                "argv" => argv = n,
                other => panic!("unknown header field {other}"),
            }
        }
        (keys, argv)
    }

    /// Asserts that a call has as many KEYS and ARGV as its script's header declares.
    pub(crate) fn assert_matches_header(call: &ScriptCall) {
        let (keys, argv) = header(call.script);
        if let Some(k) = keys {
            assert_eq!(call.keys.len(), k, "KEYS of {:?}", call.script);
        }
        if let Some(a) = argv {
            assert_eq!(call.args.len(), a, "ARGV of {:?}", call.script);
        }
    }

    #[test]
    fn every_script_is_listed_once_with_a_header_and_a_distinct_sha1() {
        let scripts = Scripts::new();
        let mut shas: Vec<&str> = ScriptId::ALL.iter().map(|&id| scripts.sha1(id)).collect();
        for &id in ScriptId::ALL {
            header(id);
            assert_eq!(scripts.source(id), id.source());
        }
        for &id in ScriptId::ALL {
            // Exactly the scripts that call notify() check the permission first.
            assert_eq!(
                id.announces(),
                id.source().matches("check_notify(").count()
                    > include_str!("../../lua/notify.lua")
                        .matches("check_notify(")
                        .count(),
                "{id:?}"
            );
        }
        shas.sort_unstable();
        shas.dedup();
        assert_eq!(shas.len(), ScriptId::ALL.len());
        assert_eq!(scripts.sources().count(), ScriptId::ALL.len());
    }
}
