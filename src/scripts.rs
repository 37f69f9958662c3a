//! The script registry: every `lua/*.lua` file compiled in, called by `EVALSHA`, reloaded on
//! `NOSCRIPT` (after a Redis restart, a failover or `SCRIPT FLUSH`). Lock kinds name a script;
//! only this module sends it.

use fred::{
    interfaces::LuaInterface,
    types::{FromValue, Key, Value},
};

/// The scripts of the lock family, one file each in `lua/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ScriptId {
    /// L-ACQ (§4.2).
    Acquire,
    /// L-REL (§4.3).
    Release,
    /// L-FORCE (§4.4).
    ForceUnlock,
    /// L-RENEW (§5.2).
    Renew,
    /// R-RENEW (§5.2).
    ReadRenew,
    /// Fenced acquisition with token (§9).
    FencedAcquire,
    /// Spin release, no publish (§10).
    SpinRelease,
    /// Spin forced unlock, no publish (§10).
    SpinForceUnlock,
    /// F-TRY (§7.2).
    FairTry,
    /// F-ACQ (§7.3).
    FairAcquire,
    /// F-REL (§7.4).
    FairRelease,
    /// F-FORCE (§7.5).
    FairForceUnlock,
    /// F-CANCEL (§7.6).
    FairCancel,
    /// R-ACQ (§8.2).
    ReadAcquire,
    /// R-REL (§8.3).
    ReadRelease,
    /// W-ACQ (§8.4).
    WriteAcquire,
    /// W-REL (§8.5).
    WriteRelease,
    /// Read/write forced unlock (§8.6).
    RwForceUnlock,
    /// Read/write isLocked (§8.6).
    RwIsLocked,
}

/// Prepends the fair-lock helpers to a fair script.
macro_rules! fair {
    ($file:literal) => {
        concat!(
            include_str!("../lua/fair_common.lua"),
            "\n",
            include_str!(concat!("../lua/", $file))
        )
    };
}

impl ScriptId {
    const ALL: [ScriptId; 19] = [
        ScriptId::Acquire,
        ScriptId::Release,
        ScriptId::ForceUnlock,
        ScriptId::Renew,
        ScriptId::ReadRenew,
        ScriptId::FencedAcquire,
        ScriptId::SpinRelease,
        ScriptId::SpinForceUnlock,
        ScriptId::FairTry,
        ScriptId::FairAcquire,
        ScriptId::FairRelease,
        ScriptId::FairForceUnlock,
        ScriptId::FairCancel,
        ScriptId::ReadAcquire,
        ScriptId::ReadRelease,
        ScriptId::WriteAcquire,
        ScriptId::WriteRelease,
        ScriptId::RwForceUnlock,
        ScriptId::RwIsLocked,
    ];

    fn source(self) -> &'static str {
        match self {
            ScriptId::Acquire => include_str!("../lua/lock_acquire.lua"),
            ScriptId::Release => include_str!("../lua/lock_release.lua"),
            ScriptId::ForceUnlock => include_str!("../lua/lock_force_unlock.lua"),
            ScriptId::Renew => include_str!("../lua/lock_renew.lua"),
            ScriptId::ReadRenew => include_str!("../lua/read_renew.lua"),
            ScriptId::FencedAcquire => include_str!("../lua/fenced_acquire.lua"),
            ScriptId::SpinRelease => include_str!("../lua/spin_release.lua"),
            ScriptId::SpinForceUnlock => include_str!("../lua/spin_force_unlock.lua"),
            ScriptId::FairTry => fair!("fair_try.lua"),
            ScriptId::FairAcquire => fair!("fair_acquire.lua"),
            ScriptId::FairRelease => fair!("fair_release.lua"),
            ScriptId::FairForceUnlock => fair!("fair_force_unlock.lua"),
            ScriptId::FairCancel => include_str!("../lua/fair_cancel.lua"),
            ScriptId::ReadAcquire => include_str!("../lua/read_acquire.lua"),
            ScriptId::ReadRelease => include_str!("../lua/read_release.lua"),
            ScriptId::WriteAcquire => include_str!("../lua/write_acquire.lua"),
            ScriptId::WriteRelease => include_str!("../lua/write_release.lua"),
            ScriptId::RwForceUnlock => include_str!("../lua/rw_force_unlock.lua"),
            ScriptId::RwIsLocked => include_str!("../lua/rw_is_locked.lua"),
        }
    }
}

struct Loaded {
    source: &'static str,
    sha1: String,
}

/// SHA1s computed once; every script is loaded at connect, and again after a `NOSCRIPT`.
pub(crate) struct Scripts {
    loaded: Vec<(ScriptId, Loaded)>,
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
                (id, Loaded { source, sha1 })
            })
            .collect();
        Self { loaded }
    }

    fn get(&self, id: ScriptId) -> &Loaded {
        // A handful of entries: a scan beats hashing.
        &self
            .loaded
            .iter()
            .find(|(i, _)| *i == id)
            .expect("every ScriptId is registered")
            .1
    }

    /// SHA1 of a script (for tests and diagnostics).
    #[allow(dead_code)]
    pub(crate) fn sha1(&self, id: ScriptId) -> &str {
        &self.get(id).sha1
    }

    /// Loads every script (`SCRIPT LOAD`), so the first calls need no `NOSCRIPT` round trip.
    pub(crate) async fn load_all(
        &self,
        redis: &fred::clients::Client,
    ) -> Result<(), fred::error::Error> {
        let loads = self
            .loaded
            .iter()
            .map(|(_, l)| redis.script_load::<String, _>(l.source));
        for sha in futures::future::try_join_all(loads).await? {
            debug_assert!(self.loaded.iter().any(|(_, l)| l.sha1 == sha));
        }
        Ok(())
    }

    /// Runs a script with `EVALSHA`; on `NOSCRIPT` sends it once with `EVAL`, which also caches it
    /// on the server for the next `EVALSHA`.
    pub(crate) async fn run<R: FromValue>(
        &self,
        redis: &fred::clients::Client,
        id: ScriptId,
        keys: Vec<Key>,
        args: Vec<Value>,
    ) -> Result<R, fred::error::Error> {
        let script = self.get(id);
        match redis
            .evalsha::<R, _, _, _>(script.sha1.as_str(), keys.clone(), args.clone())
            .await
        {
            Err(e) if e.details().starts_with("NOSCRIPT") => {
                log::debug!("script {id:?} missing on the server, sending it again");
                redis.eval(script.source, keys, args).await
            }
            other => other,
        }
    }
}
