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
}

impl ScriptId {
    const ALL: [ScriptId; 4] = [
        ScriptId::Acquire,
        ScriptId::Release,
        ScriptId::ForceUnlock,
        ScriptId::Renew,
    ];

    fn source(self) -> &'static str {
        match self {
            ScriptId::Acquire => include_str!("../lua/lock_acquire.lua"),
            ScriptId::Release => include_str!("../lua/lock_release.lua"),
            ScriptId::ForceUnlock => include_str!("../lua/lock_force_unlock.lua"),
            ScriptId::Renew => include_str!("../lua/lock_renew.lua"),
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
        // Four entries: a scan beats hashing.
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
