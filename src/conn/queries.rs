//! The plain queries on the command connection (no script): a hold count, a field's or a
//! key's presence, a TTL, a counter, a delete, who else listens on a channel, the
//! `notify-keyspace-events` setting. Sent through the core's one `send`, so they get its
//! cluster routing, failover wait and stall detection, and their failures map to `Error` like
//! every call's.

use fred::{
    interfaces::{ClientLike, PubsubInterface},
    types::{config::Server, ClusterHash, CustomCommand, Key, Value},
};

use crate::{
    conn::{cluster::slot_of, core::Core},
    error::{Error, Failure, Result},
    types::ttl::Ttl,
};

impl Core {
    /// A plain keyed query on the command connection, its reply converted.
    async fn query<R: fred::types::FromValue>(
        &self,
        name: &'static str,
        keys: &[&str],
        lock: &str,
    ) -> Result<R> {
        let slot = keys.first().map_or(0, |k| slot_of(&Key::from(*k)));
        let args = keys.iter().map(|k| Value::from(*k)).collect();
        // Boxed, as `run_on` is (type-layout depth of the callers' futures).
        let sent: futures::future::BoxFuture<'_, _> =
            Box::pin(self.send(self.redis(), name, slot, args));
        sent.await
            .and_then(|(v, _)| v.convert::<R>())
            .map_err(|e| Error::from_redis(e, lock))
    }

    /// The hold count of `field` in the lock hash `name` (0 when absent).
    pub(crate) async fn hold_count(&self, name: &str, field: &str) -> Result<u64> {
        let n: Option<i64> = self.query("HGET", &[name, field], name).await?;
        Ok(n.unwrap_or(0).max(0) as u64)
    }

    /// Every field of the hash `name` with its value (`HGETALL`; empty when absent).
    pub(crate) async fn hash_fields(&self, name: &str) -> Result<Vec<(String, String)>> {
        let all: std::collections::HashMap<String, String> =
            self.query("HGETALL", &[name], name).await?;
        Ok(all.into_iter().collect())
    }

    /// `true` if the lock hash `name` has the field `field`.
    pub(crate) async fn has_field(&self, name: &str, field: &str) -> Result<bool> {
        self.query("HEXISTS", &[name, field], name).await
    }

    /// How many connections other than this client's subscriber listen on `channel` (`PUBSUB
    /// NUMSUB` / `SHARDNUMSUB`, whichever this client listens with; this client counts once
    /// per way it listens; with both, the larger count of the others). When the server
    /// cannot tell — classic pub/sub on a cluster counts one node only, or the command is
    /// refused — the answer is 1: the caller then gives others their chance rather than risk
    /// starving them.
    pub(crate) async fn others_listening(&self, channel: &str) -> u32 {
        if self.is_clustered() && self.messaging().classic {
            return 1;
        }
        let count = |reply: std::result::Result<Vec<Value>, fred::error::Error>| {
            reply.ok().and_then(|v| v.get(1).and_then(Value::as_i64))
        };
        // This client is one of the listeners of each way it listens with.
        let mut others = 0;
        if self.messaging().classic {
            match count(self.redis().pubsub_numsub(channel).await) {
                Some(n) => others = others.max(n - 1),
                None => return 1,
            }
        }
        if self.messaging().sharded {
            match count(self.redis().pubsub_shardnumsub(channel).await) {
                Some(n) => others = others.max(n - 1),
                None => return 1,
            }
        }
        u32::try_from(others.max(0)).unwrap_or(u32::MAX)
    }

    /// The client id of a holder of the lock hash `name` (`HKEYS`: the first field of the
    /// form `<client id>:<thread id>...`), `None` when nobody holds it.
    pub(crate) async fn holder_of(&self, name: &str) -> Result<Option<String>> {
        let fields: Vec<String> = self.query("HKEYS", &[name], name).await?;
        Ok(fields
            .iter()
            .find_map(|f| f.split_once(':').map(|(id, _)| id.to_owned())))
    }

    /// The first of `channels` that no connection listens on, as the server counts them
    /// (`PUBSUB NUMSUB` / `SHARDNUMSUB`, whichever this client listens with): a check, after
    /// this client subscribed them, that the server registered its subscriptions. Not on a
    /// cluster (`Ok(None)`): a classic count covers one node, a sharded one is asked per shard.
    pub(crate) async fn unlistened(&self, channels: &[String]) -> Result<Option<String>> {
        if self.is_clustered() || channels.is_empty() {
            return Ok(None);
        }
        let names: Vec<&str> = channels.iter().map(String::as_str).collect();
        let replies = if self.messaging().sharded {
            self.redis()
                .pubsub_shardnumsub::<Vec<Value>, _>(names)
                .await
        } else {
            self.redis().pubsub_numsub::<Vec<Value>, _>(names).await
        };
        let reply = replies.map_err(|e| crate::error::Error::from_redis(e, ""))?;
        Ok(reply
            .chunks(2)
            .find(|pair| pair.get(1).and_then(Value::as_i64) == Some(0))
            .and_then(|pair| pair.first().and_then(Value::as_string)))
    }

    /// `true` if the key exists.
    pub(crate) async fn exists(&self, key: &str, lock: &str) -> Result<bool> {
        let n: i64 = self.query("EXISTS", &[key], lock).await?;
        Ok(n > 0)
    }

    /// The remaining time to live of a key.
    pub(crate) async fn ttl(&self, key: &str) -> Result<Ttl> {
        let ms: i64 = self.query("PTTL", &[key], key).await?;
        Ok(Ttl::from_pttl(ms))
    }

    /// An integer value (0 when absent), e.g. the fenced lock's token counter.
    pub(crate) async fn counter(&self, key: &str, lock: &str) -> Result<u64> {
        let v: Option<i64> = self.query("GET", &[key], lock).await?;
        Ok(v.unwrap_or(0).max(0) as u64)
    }

    /// A signed integer value (0 when absent): a semaphore's permits, a latch's count.
    pub(crate) async fn integer(&self, key: &str, lock: &str) -> Result<i64> {
        let v: Option<i64> = self.query("GET", &[key], lock).await?;
        Ok(v.unwrap_or(0))
    }

    /// `DEL` of an object's keys (one slot); how many existed. Publishes nothing.
    pub(crate) async fn delete(&self, keys: &[&str], lock: &str) -> Result<i64> {
        self.query("DEL", keys, lock).await
    }

    /// The `notify-keyspace-events` setting of every node that publishes this client's keyspace
    /// notifications: the one server (`None`: the server this connection reaches), or each
    /// master of a cluster (`CONFIG GET` sent to each, all at once), in address order.
    pub(crate) async fn keyspace_events_settings(
        &self,
        lock: &str,
    ) -> Result<Vec<(Option<Server>, String)>> {
        if !self.is_clustered() {
            let reply = self
                .send(
                    self.redis(),
                    "CONFIG",
                    0,
                    vec!["GET".into(), "notify-keyspace-events".into()],
                )
                .await
                .map_err(|e| Error::from_redis(e, lock))?
                .0;
            return Ok(vec![(None, config_value(reply))]);
        }
        let masters = fred::interfaces::ClusterInterface::cached_cluster_state(self.redis())
            .map(|state| state.unique_primary_nodes())
            .unwrap_or_default();
        if masters.is_empty() {
            return Err(Error::Connection(
                "the cluster's masters are not known yet (no slot table)".into(),
            ));
        }
        let settings = futures::future::try_join_all(masters.into_iter().map(|m| async move {
            let setting = self.keyspace_events_setting_on(&m, lock).await?;
            Ok::<_, Error>((Some(m), setting))
        }))
        .await?;
        Ok(settings)
    }

    /// The `notify-keyspace-events` setting of one node of a cluster (`CONFIG GET` sent to it).
    pub(crate) async fn keyspace_events_setting_on(
        &self,
        node: &Server,
        lock: &str,
    ) -> Result<String> {
        let options = fred::types::config::Options {
            cluster_node: Some(node.clone()),
            ..Default::default()
        };
        let reply: Value = self
            .redis()
            .with_options(&options)
            .custom(
                CustomCommand::new_static("CONFIG", ClusterHash::Random, false),
                vec!["GET", "notify-keyspace-events"],
            )
            .await
            .map_err(|e| {
                // The node's address in the message: which master did not answer.
                let what = format!("CONFIG GET notify-keyspace-events on {node}");
                match Error::from_redis(e.clone(), lock) {
                    Error::Connection(_) => Error::Connection(Failure::with_source(what, e)),
                    Error::Timeout(_) => Error::Timeout(Failure::with_source(what, e)),
                    other => other,
                }
            })?;
        Ok(config_value(reply))
    }
}

/// The value of a one-parameter `CONFIG GET` reply (RESP2 answers `[name, value]`, RESP3 a
/// map); empty when the server has no such parameter.
fn config_value(reply: Value) -> String {
    let pairs: Vec<String> = match reply {
        Value::Map(m) => m
            .inner()
            .into_iter()
            .flat_map(|(k, v)| [k.as_str().map(|s| s.to_string()), v.as_string()])
            .flatten()
            .collect(),
        other => other
            .into_array()
            .into_iter()
            .filter_map(|v| v.as_string())
            .collect(),
    };
    pairs.get(1).cloned().unwrap_or_default()
}
