//! The blocking API for every kind, owned by the calling OS thread. `REDIS_URL` (default
//! `redis://127.0.0.1:6379`).
//!
//! `cargo run --example blocking`

use std::{sync::Arc, time::Duration};

use redisson_lock::{blocking::Client, Config};

fn main() -> redisson_lock::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = Client::connect(&url, Config::default())?;

    let lock = Arc::new(client.get_lock("example:blocking"));
    let guard = lock.lock()?;
    let other = lock.clone();
    // Another thread is another owner.
    let got = std::thread::spawn(move || other.try_lock().map(|g| g.is_some()))
        .join()
        .expect("thread")?;
    println!("another thread got it while held: {got}");
    guard.unlock()?;

    let fair = client.get_fair_lock("example:blocking:fair");
    fair.lock()?.unlock()?;
    let rw = client.get_read_write_lock("example:blocking:rw");
    rw.read_lock().lock()?.unlock()?;
    rw.write_lock().lock()?.unlock()?;
    let fenced = client.get_fenced_lock("example:blocking:fenced");
    let g = fenced.lock()?;
    println!("fenced token {}", g.token());
    g.unlock()?;
    let spin = client.get_spin_lock("example:blocking:spin");
    if let Some(g) = spin.try_lock_for(Duration::from_secs(1))? {
        g.unlock()?;
    }
    client.shutdown();
    Ok(())
}
