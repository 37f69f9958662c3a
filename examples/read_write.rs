//! The read-write lock: many readers or one writer, and a writer may downgrade to reader.
//! `REDIS_URL` (default `redis://127.0.0.1:6379`).
//!
//! `cargo run --example read_write`

use std::time::Duration;

use redisson_lock::{Client, Config};

#[tokio::main]
async fn main() -> redisson_lock::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = Client::connect(&url, Config::default()).await?;

    let a = client.get_read_write_lock("example:catalog");
    let b = client.get_read_write_lock("example:catalog");
    let ra = a.read_lock().lock().await?;
    let rb = b.read_lock().lock().await?; // readers share
    println!("two readers hold it");
    let writer = b
        .write_lock()
        .try_lock_for(Duration::from_millis(200))
        .await?;
    println!("a writer while A reads: {}", writer.is_some()); // false
    ra.unlock().await?;
    rb.unlock().await?;

    // Downgrade: hold the write lock, take the read lock, release the write lock.
    let w = a.write_lock().lock().await?;
    let r = a.read_lock().lock().await?;
    w.unlock().await?;
    println!(
        "downgraded; B may read too: {}",
        b.read_lock().try_lock().await?.is_some()
    );
    r.unlock().await?;
    client.shutdown().await;
    Ok(())
}
