//! The fenced lock: every acquisition gets a larger token, which the protected resource uses to
//! reject writes from a holder that lost the lock. `REDIS_URL` (default
//! `redis://127.0.0.1:6379`).
//!
//! `cargo run --example fenced`

use redisson_lock::{Client, Config};

/// A resource that accepts a write only with a token at least as large as any it has seen.
struct Ledger {
    highest: u64,
}

impl Ledger {
    fn write(&mut self, token: u64, what: &str) -> bool {
        if token < self.highest {
            println!("rejected {what} (stale token {token} < {})", self.highest);
            return false;
        }
        self.highest = token;
        println!("accepted {what} with token {token}");
        true
    }
}

#[tokio::main]
async fn main() -> redisson_lock::Result<()> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = Client::connect(&url, Config::default()).await?;
    let mut ledger = Ledger { highest: 0 };

    let lock = client.get_fenced_lock("example:ledger");
    let old = lock.lock().await?;
    let old_token = old.token();
    old.unlock().await?;
    let new = lock.lock().await?;
    ledger.write(new.token(), "the new holder's entry");
    ledger.write(old_token, "a late write of the old holder");
    new.unlock().await?;
    client.shutdown().await;
    Ok(())
}
