//! The spin lock: no pub/sub, the waiter polls with exponential back-off. `REDIS_URL` (default
//! `redis://127.0.0.1:6379`).
//!
//! `cargo run --example spin`

use std::time::Duration;

use redisson_lock::{Client, Config};

#[tokio::main]
async fn main() -> redisson_lock::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = Client::connect(&url, Config::default()).await?;

    let held = client
        .get_spin_lock("example:spin")
        .lock_with_lease(Duration::from_millis(300))
        .await?;
    let started = tokio::time::Instant::now();
    let waiter = client.get_spin_lock("example:spin");
    // The holder never unlocks; its lease ends, and the polling waiter gets in.
    let guard = waiter.try_lock_for(Duration::from_secs(5)).await?;
    println!("got it after {:?}: {}", started.elapsed(), guard.is_some());
    drop(held);
    if let Some(g) = guard {
        g.unlock().await?;
    }
    println!("{:?}", client.stats());
    client.shutdown().await;
    Ok(())
}
