//! Many waiters of every kind that waits, each on an object of its own that another client keeps
//! busy: the workload of the scale test (`tests/scale.rs`) and of the `waiters` example
//! (`compat-tests/examples/waiters.rs`, memory per waiter).

use std::{any::Any, time::Duration};

use redisson_lock::{Client, Result};
use tokio::task::JoinSet;

/// Every kind that waits on a channel, as [`busy`], [`spawn_waiters`] and [`free`] name them.
pub const KINDS: [&str; 9] = [
    "reentrant",
    "fair",
    "fenced",
    "non-reentrant",
    "read",
    "write",
    "semaphore",
    "permits",
    "latch",
];

/// What one waiter got: a guard, or nothing to keep (a semaphore's permit, an open latch);
/// `None` if it timed out.
pub type Got = Result<Option<Box<dyn Any + Send>>>;

fn boxed<T: Any + Send>(got: Option<T>) -> Option<Box<dyn Any + Send>> {
    got.map(|g| Box::new(g) as Box<dyn Any + Send>)
}

/// Makes `count` objects `<prefix><i>` of `kind` busy through `holder`: locks held (a read
/// lock's name by a writer), semaphores left without permits, latches counting 1. What it
/// holds, for [`free`].
pub async fn busy(
    holder: &Client,
    kind: &str,
    prefix: &str,
    count: usize,
) -> Result<Vec<Box<dyn Any + Send>>> {
    let mut held: Vec<Box<dyn Any + Send>> = Vec::with_capacity(count);
    for i in 0..count {
        let name = format!("{prefix}{i}");
        match kind {
            "reentrant" => held.push(Box::new(holder.get_lock(&name).lock().await?)),
            "fair" => held.push(Box::new(holder.get_fair_lock(&name).lock().await?)),
            "fenced" => held.push(Box::new(holder.get_fenced_lock(&name).lock().await?)),
            "non-reentrant" => {
                held.push(Box::new(holder.get_non_reentrant_lock(&name).lock().await?))
            }
            "read" | "write" => held.push(Box::new(
                holder
                    .get_read_write_lock(&name)
                    .write_lock()
                    .lock()
                    .await?,
            )),
            "latch" => {
                holder.get_count_down_latch(&name).try_set_count(1).await?;
            }
            // A semaphore that does not exist has no permit.
            _ => {}
        }
    }
    Ok(held)
}

/// One waiter of `kind` per object `<prefix><i>` (`i` below `count`), each an owner of its
/// own on a handle it keeps while it waits (at most `wait`), each a task of its own whose
/// future is its kind's alone (one `match` inside one future would give every waiter the
/// largest kind's size).
pub fn spawn_waiters(
    set: &mut JoinSet<Got>,
    client: &Client,
    kind: &str,
    prefix: &str,
    count: usize,
    wait: Duration,
) {
    macro_rules! each {
        (|$c:ident, $name:ident| $body:expr) => {
            for i in 0..count {
                let ($c, $name) = (client.clone(), format!("{prefix}{i}"));
                set.spawn(async move { $body });
            }
        };
    }
    match kind {
        "reentrant" => each!(|c, name| {
            let lock = c.get_lock(&name);
            Ok(boxed(lock.try_lock_for(wait).await?))
        }),
        "fair" => each!(|c, name| {
            let lock = c.get_fair_lock(&name);
            Ok(boxed(lock.try_lock_for(wait).await?))
        }),
        "fenced" => each!(|c, name| {
            let lock = c.get_fenced_lock(&name);
            Ok(boxed(lock.try_lock_for(wait).await?))
        }),
        "non-reentrant" => each!(|c, name| {
            let lock = c.get_non_reentrant_lock(&name);
            Ok(boxed(lock.try_lock_for(wait).await?))
        }),
        "read" => each!(|c, name| {
            let rw = c.get_read_write_lock(&name);
            Ok(boxed(rw.read_lock().try_lock_for(wait).await?))
        }),
        "write" => each!(|c, name| {
            let rw = c.get_read_write_lock(&name);
            Ok(boxed(rw.write_lock().try_lock_for(wait).await?))
        }),
        "semaphore" => each!(|c, name| {
            let semaphore = c.get_semaphore(&name);
            // Kept taken, as before the permits had a guard.
            let taken = semaphore.try_acquire_for(1, wait).await?;
            Ok(boxed(taken.map(|p| {
                p.forget();
            })))
        }),
        "permits" => each!(|c, name| {
            let semaphore = c.get_permit_expirable_semaphore(&name);
            Ok(boxed(semaphore.try_acquire_for(wait, None).await?))
        }),
        "latch" => each!(|c, name| {
            let latch = c.get_count_down_latch(&name);
            Ok(boxed(latch.wait_for(wait).await?.then_some(())))
        }),
        other => panic!("no waiting kind {other}"),
    }
}

/// Frees what [`busy`] made busy: drops the holds at once (their releases run in the
/// holder's background), gives each semaphore a permit, counts each latch down.
pub async fn free(
    holder: &Client,
    kind: &str,
    prefix: &str,
    count: usize,
    held: Vec<Box<dyn Any + Send>>,
) -> Result<()> {
    drop(held);
    let mut set = JoinSet::new();
    for i in 0..count {
        let (holder, name, kind) = (holder.clone(), format!("{prefix}{i}"), kind.to_owned());
        set.spawn(async move {
            match kind.as_str() {
                "semaphore" => holder.get_semaphore(&name).release(1).await,
                "permits" => {
                    holder
                        .get_permit_expirable_semaphore(&name)
                        .add_permits(1)
                        .await
                }
                "latch" => holder.get_count_down_latch(&name).count_down().await,
                _ => Ok(()),
            }
        });
    }
    while let Some(done) = set.join_next().await {
        done.expect("a task freeing an object")?;
    }
    Ok(())
}
