//! The synchronizer commands of `lock-peer` (peer protocol, "Synchronizers, non-reentrant and
//! group locks"): `sem*` (`RSemaphore`), `psem*` (`RPermitExpirableSemaphore`) and `cdl*`
//! (`RCountDownLatch`). Permits are anonymous or named by their ids, so no thread state is kept.

use std::time::Duration;

use redisson_lock::{Client, PermitId};

use super::{err, invalid, Reply};

/// The commands this file answers.
const COMMANDS: &[&str] = &[
    "semsetpermits",
    "semacquire",
    "semtryacquire",
    "semrelease",
    "semavailable",
    "semdrain",
    "semadd",
    "psemsetpermits",
    "psemacquire",
    "psemtryacquire",
    "psemrelease",
    "psemtryrelease",
    "psemavailable",
    "cdlsetcount",
    "cdlcountdown",
    "cdlcount",
    "cdlawait",
];

/// `true` for a synchronizer command.
pub(crate) fn is_sync_command(command: &str) -> bool {
    COMMANDS.contains(&command)
}

/// Argument `i` as a number (`None` when absent).
fn number<T: std::str::FromStr>(
    words: &[String],
    i: usize,
) -> Result<Option<T>, (&'static str, String)> {
    match words.get(i) {
        None => Ok(None),
        Some(v) => v
            .parse::<T>()
            .map(Some)
            .map_err(|_| invalid(&format!("not a valid number: {v}"))),
    }
}

fn required<T: std::str::FromStr>(
    words: &[String],
    i: usize,
    what: &str,
) -> Result<T, (&'static str, String)> {
    number(words, i)?.ok_or_else(|| invalid(&format!("missing {what}")))
}

fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

/// Runs one synchronizer command (`words[0]`, with `words[1]` the object's name).
pub(crate) async fn execute(client: &Client, words: &[String]) -> Reply {
    let command = words[0].as_str();
    let name = words.get(1).ok_or_else(|| invalid("missing name"))?;
    match command {
        "semsetpermits" => {
            let n: u64 = required(words, 2, "permits")?;
            let set = client
                .get_semaphore(name)
                .try_set_permits(n)
                .await
                .map_err(err)?;
            Ok(set.to_string())
        }
        "semacquire" => {
            let n: u64 = number(words, 2)?.unwrap_or(1);
            // The peer protocol's permits stay taken until a `semrelease` (the Java style).
            let taken = client.get_semaphore(name).acquire(n).await.map_err(err)?;
            taken.forget();
            Ok("acquired".into())
        }
        "semtryacquire" => {
            let n: u64 = number(words, 2)?.unwrap_or(1);
            let sem = client.get_semaphore(name);
            let got = match number::<u64>(words, 3)? {
                None => sem.try_acquire(n).await,
                Some(wait) => sem.try_acquire_for(n, millis(wait)).await,
            };
            Ok(got.map_err(err)?.map(|p| p.forget()).is_some().to_string())
        }
        "semrelease" => {
            let n: u64 = number(words, 2)?.unwrap_or(1);
            client.get_semaphore(name).release(n).await.map_err(err)?;
            Ok("released".into())
        }
        "semavailable" => Ok(client
            .get_semaphore(name)
            .available_permits()
            .await
            .map_err(err)?
            .to_string()),
        "semdrain" => Ok(client
            .get_semaphore(name)
            .drain_permits()
            .await
            .map_err(err)?
            .to_string()),
        "semadd" => {
            let n: i64 = required(words, 2, "permits")?;
            client
                .get_semaphore(name)
                .add_permits(n)
                .await
                .map_err(err)?;
            Ok("added".into())
        }
        "psemsetpermits" => {
            let n: u64 = required(words, 2, "permits")?;
            let sem = client.get_permit_expirable_semaphore(name);
            Ok(sem.try_set_permits(n).await.map_err(err)?.to_string())
        }
        "psemacquire" => {
            let lease = number::<u64>(words, 2)?.map(millis);
            // No lease: the permit never expires (the protocol's, and Java's, acquire()).
            let sem = client
                .get_permit_expirable_semaphore(name)
                .without_watchdog();
            let guard = sem.acquire(lease).await.map_err(err)?;
            Ok(guard.keep().to_string())
        }
        "psemtryacquire" => {
            let wait = number::<u64>(words, 2)?;
            let lease = number::<u64>(words, 3)?.map(millis);
            let sem = client
                .get_permit_expirable_semaphore(name)
                .without_watchdog();
            let got = match wait {
                None => sem.try_acquire(lease).await,
                Some(w) => sem.try_acquire_for(millis(w), lease).await,
            };
            Ok(match got.map_err(err)? {
                Some(guard) => guard.keep().to_string(),
                None => "null".into(),
            })
        }
        "psemrelease" | "psemtryrelease" => {
            let id: PermitId = words
                .get(2)
                .ok_or_else(|| invalid("missing permit id"))?
                .parse()
                .map_err(|e: redisson_lock::ParsePermitIdError| invalid(&e.to_string()))?;
            let sem = client.get_permit_expirable_semaphore(name);
            if command == "psemrelease" {
                sem.release(id).await.map_err(err)?;
                Ok("released".into())
            } else {
                Ok(sem.try_release(id).await.map_err(err)?.to_string())
            }
        }
        "psemavailable" => Ok(client
            .get_permit_expirable_semaphore(name)
            .available_permits()
            .await
            .map_err(err)?
            .to_string()),
        "cdlsetcount" => {
            let n: u64 = required(words, 2, "count")?;
            let latch = client.get_count_down_latch(name);
            Ok(latch.try_set_count(n).await.map_err(err)?.to_string())
        }
        "cdlcountdown" => {
            client
                .get_count_down_latch(name)
                .count_down()
                .await
                .map_err(err)?;
            Ok("ok".into())
        }
        "cdlcount" => Ok(client
            .get_count_down_latch(name)
            .count()
            .await
            .map_err(err)?
            .to_string()),
        "cdlawait" => {
            let latch = client.get_count_down_latch(name);
            match number::<u64>(words, 2)? {
                None => {
                    latch.wait().await.map_err(err)?;
                    Ok("true".into())
                }
                Some(ms) => Ok(latch.wait_for(millis(ms)).await.map_err(err)?.to_string()),
            }
        }
        other => Err(("UNSUPPORTED", format!("unknown command {other}"))),
    }
}
