//! The fair lock: waiters get the lock in arrival order. `REDIS_URL` (default
//! `redis://127.0.0.1:6379`).
//!
//! `cargo run --example fair`

use std::time::Duration;

use redisson_lock::{Client, Config};

#[tokio::main]
async fn main() -> redisson_lock::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = Client::connect(&url, Config::default()).await?;

    let first = client.get_fair_lock("example:fair").lock().await?;
    let mut waiters = Vec::new();
    for n in 0..3 {
        let lock = client.get_fair_lock("example:fair");
        waiters.push(tokio::spawn(async move {
            let guard = lock.lock().await?;
            println!("waiter {n} got the lock");
            tokio::time::sleep(Duration::from_millis(50)).await;
            guard.unlock().await.map(|_| ())
        }));
        // Queue them one after the other so their order is known.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    first.unlock().await?;
    for w in waiters {
        w.await.expect("task")?;
    }
    client.shutdown().await;
    Ok(())
}
