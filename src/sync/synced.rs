//! How the synchronizers' calls reach the replicas: the call Redisson syncs to a replica
//! without undoing it ([`run_synced`]), and an acquisition's call that is undone when
//! unreplicated ([`run_taking`]). Their replies are decoded by the connection's `flag` and
//! `integer`, as the locks' are.

use std::future::Future;

use fred::types::Value;
use tokio::time::Instant;

use crate::{
    client::Client,
    conn::{core::AcquireFailure, replicas::Synced, scripts::ScriptCall},
    error::{Error, Result},
};

/// Runs a synchronizer's acquisition call (its attempt, inside `detach`) as Redisson syncs it:
/// the script on the replica-sync path, `taken` saying which replies took something. Taken
/// but acknowledged by no replica: `undo` gives it back (a failure is its own to report) and
/// the attempt is [`Error::NotReplicated`]; `what` names what was taken for the observer.
pub(crate) async fn run_taking<U: Future<Output = ()>>(
    client: &Client,
    call: ScriptCall,
    (name, what): (&str, &str),
    deadline: Option<Instant>,
    taken: impl Fn(&Value) -> bool + Send + Sync,
    undo: impl FnOnce() -> U,
) -> std::result::Result<Result<Value>, AcquireFailure> {
    let barrier = crate::conn::replicas::Barrier::default();
    let (value, synced) = client
        .core()
        .run_acquire(call, name, deadline, taken, &barrier)
        .await?;
    let Synced::Missing { wanted, acked } = synced else {
        return Ok(Ok(value));
    };
    crate::observe::not_replicated(name, what);
    undo().await;
    Ok(Err(Error::NotReplicated {
        lock: name.to_owned(),
        wanted,
        acked,
    }))
}

/// Runs a change Redisson syncs to a replica without undoing it (classes S-ONCE and S-RETRY of
/// sync protocol §1.3): the script, then, where the master has replicas and replica sync is on,
/// `WAIT` on the same connection. No replica acknowledging gives
/// [`Error::NotReplicated`]; the call ran on the master and is not run again (a second run of
/// an add would add twice). A change made is counted as `(object, operation)` (see
/// `observe::synchronizer`).
pub(crate) async fn run_synced(
    client: &Client,
    call: ScriptCall,
    name: &str,
    (object, operation): (&'static str, &'static str),
) -> Result<Value> {
    let barrier = crate::conn::replicas::Barrier::default();
    let outcome = client
        .core()
        .run_acquire(call, name, None, |_| true, &barrier)
        .await;
    match outcome {
        Ok((_, Synced::Missing { wanted, acked })) => {
            log::warn!("no replica acknowledged the change of {name} in time (the master has it)");
            Err(Error::NotReplicated {
                lock: name.to_owned(),
                wanted,
                acked,
            })
        }
        Ok((value, _)) => {
            crate::observe::synchronizer(object, name, operation);
            Ok(value)
        }
        Err(failure) => Err(failure.error),
    }
}
