//! `#[locked(..)]`: a method that runs under a lock named after its argument, a fair lock with a
//! wait and a lease, and the same with `Lock::run` for code that cannot use an attribute.
//! `REDIS_URL` (default `redis://127.0.0.1:6379`).
//!
//! `cargo run --example macro`

use std::{sync::Arc, time::Duration};

use redisson_lock::{locked, Client, Config};

/// The application's error: lock failures arrive through `From<redisson_lock::Error>`.
#[derive(Debug)]
enum AppError {
    Lock(redisson_lock::Error),
    Rejected(&'static str),
}

impl From<redisson_lock::Error> for AppError {
    fn from(e: redisson_lock::Error) -> Self {
        AppError::Lock(e)
    }
}

impl std::fmt::Display for AppError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AppError::Lock(e) => write!(f, "lock: {e}"),
            AppError::Rejected(why) => write!(f, "rejected: {why}"),
        }
    }
}

struct Inventory {
    client: Client,
}

impl Inventory {
    /// One order at a time per id, across every process using the same Redis (and Java
    /// services locking "example:orders:<id>" with Redisson). The watchdog keeps the lock while
    /// the body runs.
    #[locked(client = &self.client, name = "example:orders:{id}")]
    async fn ship(&self, id: u64, qty: u32) -> Result<String, AppError> {
        if qty == 0 {
            return Err(AppError::Rejected("nothing to ship"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok(format!("shipped {qty} of order {id}"))
    }

    /// A fair lock: callers get it in the order they asked; each waits at most 2 s and holds
    /// it at most 10 s.
    #[locked(client = &self.client, name = "example:report", wait = "2s", lease = "10s", kind = fair)]
    async fn report(&self, who: &str) -> Result<(), AppError> {
        println!("{who} writes the report");
        tokio::time::sleep(Duration::from_millis(100)).await;
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), AppError> {
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let client = Client::connect(&url, Config::default()).await?;
    let inventory = Arc::new(Inventory {
        client: client.clone(),
    });

    // Two calls for the same order run one after the other; another order runs beside them.
    let (a, b, c) = tokio::join!(
        inventory.ship(7, 1),
        inventory.ship(7, 2),
        inventory.ship(8, 5)
    );
    println!("{}\n{}\n{}", a?, b?, c?);
    if let Err(e) = inventory.ship(9, 0).await {
        println!("{e}");
    }

    let writers = ["alice", "bob", "carol"].map(|who| {
        let inventory = inventory.clone();
        tokio::spawn(async move { inventory.report(who).await })
    });
    for w in writers {
        w.await.expect("task")?;
    }

    // Without the attribute: the same helpers it expands to.
    let lock = client.get_lock("example:orders:7");
    let n = lock
        .run(|| async {
            println!("holding {} through Lock::run", lock.name());
            Ok::<_, redisson_lock::Error>(1)
        })
        .await?;
    println!("ran {n} time(s)");

    client.shutdown().await;
    Ok(())
}
