//! Reading a lock's state from Redis in the layout Redisson (and this crate) writes, and
//! printing it. Everything here is read-only. The face: which family a key belongs to (a
//! synchronizer's integer string or timeout set, else a lock's hash and its companion keys),
//! over its rooms, lowest first: `redis` (the tool's failures and commands), `model` (what an
//! inspection finds), `lock` and `synchronizer` (the two readers), `render` (the reports).

mod lock;
mod model;
mod redis;
mod render;
mod synchronizer;

use fred::clients::Client as Redis;

pub use lock::looks_like_lock;
pub use model::Inspection;
pub use redis::{
    connect, CliError, Result, EXIT_ABORTED, EXIT_DENIED, EXIT_ERROR, EXIT_NOT_FOUND, EXIT_USAGE,
};
pub use render::{render, render_json};

use redis::{cmd, text};

/// Reads everything about the lock, semaphore or latch whose raw name is `name`.
pub async fn inspect(redis: &Redis, name: &str) -> Result<Inspection> {
    let key_type = text(&cmd(redis, "TYPE", vec![name.into()]).await?);
    if key_type == "string" || key_type == "none" {
        if let Some(found) = synchronizer::inspect(redis, name, &key_type).await? {
            return Ok(found);
        }
    }
    lock::inspect(redis, name, &key_type).await
}
