//! The tool's side of Redis: its `CliError` (with the exit code each maps to), one raw command,
//! the brace rule of derived names, the subscriber counts of channels (classic and sharded, on
//! every primary of a cluster) and the bounded first connection.

use fred::{
    clients::Client as Redis,
    interfaces::{ClientLike, ClusterInterface},
    types::{ClusterHash, CustomCommand, Value},
};

/// A failure of the tool, with the exit code it maps to.
#[derive(Debug)]
pub struct CliError {
    pub code: i32,
    pub message: String,
}

/// Exit codes (documented in the README and `--help`).
pub const EXIT_ERROR: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_NOT_FOUND: i32 = 3;
pub const EXIT_DENIED: i32 = 4;
pub const EXIT_ABORTED: i32 = 5;

impl CliError {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// A Redis error: NOPERM (and authentication failures) get their own exit code.
    pub fn redis(err: fred::error::Error) -> Self {
        let details = err.details().to_owned();
        if details.contains("NOPERM") || matches!(err.kind(), fred::error::ErrorKind::Auth) {
            Self::new(EXIT_DENIED, format!("permission denied: {details}"))
        } else {
            Self::new(EXIT_ERROR, format!("redis error: {details}"))
        }
    }
}

pub type Result<T> = std::result::Result<T, CliError>;

/// Runs one command and returns its raw reply.
pub async fn cmd(redis: &Redis, name: &'static str, args: Vec<Value>) -> Result<Value> {
    let hash = match args.first() {
        Some(_) => ClusterHash::FirstKey,
        None => ClusterHash::Random,
    };
    redis
        .custom(CustomCommand::new_static(name, hash, false), args)
        .await
        .map_err(CliError::redis)
}

/// The time to live of key `name` in milliseconds; `None` when it has no expiry (or is gone).
pub async fn ttl_ms(redis: &Redis, name: &str) -> Result<Option<i64>> {
    let pttl = cmd(redis, "PTTL", vec![name.into()])
        .await?
        .as_i64()
        .unwrap_or(-2);
    Ok((pttl >= 0).then_some(pttl))
}

/// The brace rule of every derived name: `{N}`, or `N` itself when it contains a `{`.
pub fn braced(name: &str) -> String {
    if name.contains('{') {
        name.to_owned()
    } else {
        format!("{{{name}}}")
    }
}

pub fn text(v: &Value) -> String {
    v.as_string().unwrap_or_default()
}

/// Subscribers of each channel. On a cluster a channel's listeners may be sharded
/// (`SSUBSCRIBE`, counted by `PUBSUB SHARDNUMSUB` on the node that owns the channel's slot) or
/// classic (`SUBSCRIBE`, counted by `PUBSUB NUMSUB` on each node separately): both are added up,
/// over every primary.
pub async fn subscribers(redis: &Redis, channels: &[String]) -> Result<Vec<(String, i64)>> {
    if channels.is_empty() {
        return Ok(Vec::new());
    }
    let args = |sub: &'static str| {
        let mut args: Vec<Value> = vec![sub.into()];
        args.extend(channels.iter().map(|c| Value::from(c.as_str())));
        args
    };
    let counts = |reply: Value| -> Vec<i64> {
        reply
            .into_array()
            .chunks(2)
            .map(|pair| pair.get(1).and_then(Value::as_i64).unwrap_or(0))
            .collect()
    };
    let mut total = vec![0; channels.len()];
    let mut add = |n: Vec<i64>| {
        for (t, n) in total.iter_mut().zip(n) {
            *t += n;
        }
    };
    if redis.is_clustered() {
        // Every channel of one lock carries the lock's hash tag: one slot, one owner. (fred
        // routes a custom command by a `Custom` slot only; other hashers fall back to the
        // first argument, here the sub-command.)
        let slot = fred::util::redis_keyslot(channels[0].as_bytes());
        let sharded = CustomCommand::new_static("PUBSUB", ClusterHash::Custom(slot), false);
        let reply = redis
            .custom(sharded, args("SHARDNUMSUB"))
            .await
            .map_err(CliError::redis)?;
        add(counts(reply));
        let primaries = redis
            .cached_cluster_state()
            .map(|state| state.unique_primary_nodes())
            .unwrap_or_default();
        for node in primaries {
            let classic = CustomCommand::new_static("PUBSUB", ClusterHash::Random, false);
            let reply = redis
                .with_cluster_node(node)
                .custom(classic, args("NUMSUB"))
                .await
                .map_err(CliError::redis)?;
            add(counts(reply));
        }
    } else {
        add(counts(cmd(redis, "PUBSUB", args("NUMSUB")).await?));
    }
    Ok(channels.iter().cloned().zip(total).collect())
}

/// Waits for the client to be connected, bounded.
pub async fn connect(redis: &Redis) -> Result<()> {
    match tokio::time::timeout(std::time::Duration::from_secs(10), redis.init()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(match CliError::redis(e) {
            f if f.code == EXIT_DENIED => f,
            f => CliError::new(
                EXIT_ERROR,
                format!("cannot connect to Redis: {}", f.message),
            ),
        }),
        Err(_) => Err(CliError::new(
            EXIT_ERROR,
            "could not connect to Redis within 10 s",
        )),
    }
}
