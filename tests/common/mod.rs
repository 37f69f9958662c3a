//! Shared helpers of the integration tests.
#![allow(dead_code)]

pub mod redis_server;

use std::{collections::HashMap, time::Duration};

use fred::{
    clients::{Client as FredClient, SubscriberClient},
    interfaces::{ClientLike, EventInterface, HashesInterface, KeysInterface, PubsubInterface},
    types::{config::Config as FredConfig, ClusterHash, CustomCommand, Value},
};
pub use redis_server::RedisServer;
use tokio::sync::mpsc;

/// Client config for tests: a short watchdog so expiry paths run in seconds.
pub fn config() -> redisson_lock::Config {
    redisson_lock::Config::default()
}

/// A raw Redis connection for inspecting and manipulating state as another (Java) client would.
pub struct Admin {
    pub redis: FredClient,
}

impl Admin {
    pub async fn connect(url: &str) -> Admin {
        let redis = FredClient::new(FredConfig::from_url(url).unwrap(), None, None, None);
        redis.init().await.expect("admin connection");
        Admin { redis }
    }

    pub async fn connect_url(url: String) -> Admin {
        Admin::connect(&url).await
    }

    pub async fn cmd(
        &self,
        name: &'static str,
        args: Vec<Value>,
    ) -> Result<Value, fred::error::Error> {
        self.redis
            .custom(
                CustomCommand::new_static(name, ClusterHash::FirstKey, false),
                args,
            )
            .await
    }

    pub async fn type_of(&self, key: &str) -> String {
        self.cmd("TYPE", vec![key.into()])
            .await
            .unwrap()
            .as_string()
            .unwrap()
    }

    pub async fn hgetall(&self, key: &str) -> HashMap<String, String> {
        self.redis.hgetall(key).await.unwrap()
    }

    pub async fn pttl(&self, key: &str) -> i64 {
        self.redis.pttl(key).await.unwrap()
    }

    pub async fn exists(&self, key: &str) -> bool {
        let n: i64 = self.redis.exists(key).await.unwrap();
        n == 1
    }

    pub async fn numsub(&self, channel: &str) -> i64 {
        let v: Vec<Value> = self.redis.pubsub_numsub(channel).await.unwrap();
        v.get(1).and_then(|v| v.as_i64()).unwrap_or(0)
    }

    /// `calls` of one command in `INFO commandstats` (e.g. "evalsha", "pexpire").
    pub async fn command_calls(&self, command: &str) -> u64 {
        let info = self
            .cmd("INFO", vec!["commandstats".into()])
            .await
            .unwrap()
            .as_string()
            .unwrap();
        let prefix = format!("cmdstat_{command}:calls=");
        info.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    pub async fn reset_stats(&self) {
        self.cmd("CONFIG", vec!["RESETSTAT".into()]).await.unwrap();
    }

    /// Simulates a Java Redisson holder: raw HSET + PEXPIRE of an owner field.
    pub async fn java_hold(&self, name: &str, field: &str, ttl_ms: i64) {
        let _: i64 = self.redis.hset(name, (field, "1")).await.unwrap();
        let _: i64 = self.redis.pexpire(name, ttl_ms, None).await.unwrap();
    }

    /// Simulates a Java Redisson release: DEL + PUBLISH 0 on the unlock channel.
    pub async fn java_release(&self, name: &str) {
        let _: i64 = self.redis.del(name).await.unwrap();
        let _: i64 = self
            .redis
            .publish(format!("redisson_lock__channel:{{{name}}}"), "0")
            .await
            .unwrap();
    }
}

/// A raw subscriber that records every message of some channels.
pub struct Recorder {
    _sub: SubscriberClient,
    rx: mpsc::UnboundedReceiver<(String, String)>,
}

impl Recorder {
    pub async fn subscribe(url: &str, channels: &[&str]) -> Recorder {
        let sub = SubscriberClient::new(FredConfig::from_url(url).unwrap(), None, None, None);
        sub.init().await.unwrap();
        let mut msgs = sub.message_rx();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(m) = msgs.recv().await {
                let v = m.value.as_string().unwrap_or_default();
                if tx.send((m.channel.to_string(), v)).is_err() {
                    break;
                }
            }
        });
        let chans: Vec<String> = channels.iter().map(|c| c.to_string()).collect();
        sub.subscribe(chans).await.unwrap();
        let _: Value = sub.ping(None).await.unwrap();
        Recorder { _sub: sub, rx }
    }

    /// Every message received within `quiet` of silence.
    pub async fn drain(&mut self, quiet: Duration) -> Vec<(String, String)> {
        let mut out = Vec::new();
        while let Ok(Some(m)) = tokio::time::timeout(quiet, self.rx.recv()).await {
            out.push(m);
        }
        out
    }
}

/// Polls `f` until it is true or `within` passes.
pub async fn eventually<F, Fut>(within: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if f().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
