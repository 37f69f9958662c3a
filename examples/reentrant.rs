//! The reentrant lock (Redisson `RLock`): re-entry by the same task, exclusion of another
//! task sharing the handle. `REDIS_URL` (default `redis://127.0.0.1:6379`).
//!
//! `cargo run --example reentrant`

use std::time::Duration;

use redisson_lock::{Client, Config};

#[tokio::main]
async fn main() -> redisson_lock::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = Client::connect(&url, Config::default()).await?;

    let lock = client.get_lock("example:reentrant");
    let outer = lock.lock().await?; // the watchdog keeps it alive
    let inner = lock.lock().await?; // same owner: re-entry
    println!("hold count: {}", lock.hold_count().await?);

    // Another task is another owner: it cannot get in while we hold it. (The acquisition is
    // made inside the task: `tokio::spawn(lock.lock())` would act for this one, and re-enter.)
    let waiter = tokio::spawn({
        let lock = lock.clone();
        async move { lock.try_lock_for(Duration::from_secs(5)).await }
    });
    inner.unlock().await?;
    outer.unlock().await?; // the unlock message wakes the waiter at once
    if let Some(guard) = waiter.await.expect("task")? {
        println!("the other owner got it after the release");
        guard.unlock().await?;
    }
    client.shutdown().await;
    Ok(())
}
