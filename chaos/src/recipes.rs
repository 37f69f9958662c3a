//! The recipes' owners (issue 32): `election` (a campaign of `Client::get_election`: a leader
//! is a holder, its term the fencing token, so the checker's overlap and token rules say
//! "never two leaders that both think they lead") and `permit` (a watchdog permit of a
//! permit-expirable semaphore of one permit: "never more holders than permits who all think
//! they hold") and `run-once` (`Client::run_once` of the tick's name `chaos-once-<tick>`, see
//! [`once_tick`]: a run is a hold of that name from the job's start to its end, so the
//! overlap rules say "never two runs of one tick whose holders both thought they held"). Kept
//! apart from `worker.rs`, which dispatches to it.

use std::time::{Duration, Instant};

use redisson_lock::{Client, HoldState, HoldWatch, Leadership, PermitGuard};

/// The recipe variants.
pub const VARIANTS: [&str; 3] = ["election", "permit", "run-once"];

/// A run-once owner's tick, in ms of the shared monotonic clock (every worker process of the
/// machine reads the same one): tick `T` is `[T, T + 1)` ticks of it, its job's name
/// `chaos-once-<T>`.
pub const ONCE_TICK_MS: u64 = 1000;
/// A run's `at_least`: one tick. A run that begins within its tick keeps the name past the
/// tick's end, so an owner that tries the tick within it finds the name held (a later try, a
/// paused owner's, may legitimately run it again: see the checker's `once_reruns`).
pub const ONCE_AT_LEAST: Duration = Duration::from_millis(ONCE_TICK_MS);
/// A run's `at_most`: above the longest work (2.5 s), so a run is cut only when its work
/// stalls.
pub const ONCE_AT_MOST: Duration = Duration::from_millis(4000);

/// The tick of `ns` (the shared clock, see [`ONCE_TICK_MS`]).
pub fn once_tick(ns: u64) -> u64 {
    ns / (ONCE_TICK_MS * 1_000_000)
}

/// The run-once name of tick `tick`.
pub fn once_name(tick: u64) -> String {
    format!("chaos-once-{tick}")
}

/// A hold of a recipe.
pub enum RecipeHeld {
    /// Leading an election.
    Leader(Leadership),
    /// Holding the one permit of a permit-expirable semaphore (renewed by the watchdog).
    Permit(PermitGuard),
    /// Running a run-once job: the job's view of the hold (`run_once` releases it).
    Run(HoldWatch),
}

impl RecipeHeld {
    pub fn state(&self) -> HoldState {
        match self {
            RecipeHeld::Leader(l) => l.state(),
            RecipeHeld::Permit(p) => p.state(),
            RecipeHeld::Run(w) => w.state(),
        }
    }

    /// The hold's validity deadline; none for a run-once job, which is told only its state
    /// (the checker then excuses an overlap by the state alone).
    pub fn valid_until(&self) -> Option<Instant> {
        match self {
            RecipeHeld::Leader(l) => Some(l.valid_until().into_std()),
            RecipeHeld::Permit(p) => Some(p.valid_until().into_std()),
            RecipeHeld::Run(_) => None,
        }
    }

    /// The leader's term (its fencing token); none for a permit.
    pub fn token(&self) -> Option<u64> {
        match self {
            RecipeHeld::Leader(l) => Some(l.term()),
            RecipeHeld::Permit(_) | RecipeHeld::Run(_) => None,
        }
    }

    /// Resolves when the holder is told its hold is in doubt or lost.
    pub async fn told(&self) {
        match self {
            RecipeHeld::Leader(l) => l.lost().await,
            RecipeHeld::Permit(p) => p.lost().await,
            RecipeHeld::Run(w) => w.lost().await,
        }
    }

    /// Resigns or gives the permit back.
    pub async fn unlock(self) -> Result<(), String> {
        let kind = |e: redisson_lock::Error| format!("{:?}", e.kind());
        match self {
            RecipeHeld::Leader(l) => l.resign().await.map_err(kind),
            // A permit found gone (released or reclaimed) gives back nothing: not an error of
            // the release, the loss was told.
            RecipeHeld::Permit(p) => p.release().await.map(drop).map_err(kind),
            // `run_once` releases (or keeps until `at_least`) the name when the job ends.
            RecipeHeld::Run(_) => Ok(()),
        }
    }
}

/// Campaigns for the election `name`, or takes the one permit of the semaphore `name`, waiting
/// at most `wait`.
pub async fn acquire(
    client: &Client,
    variant: &str,
    name: &str,
    wait: Duration,
) -> Result<Option<RecipeHeld>, String> {
    let kind = |e: redisson_lock::Error| format!("{:?}", e.kind());
    match variant {
        "election" => Ok(client
            .get_election(name)
            .try_campaign_for(wait)
            .await
            .map_err(kind)?
            .map(RecipeHeld::Leader)),
        "permit" => {
            let semaphore = client.get_permit_expirable_semaphore(name);
            // One permit, set once (an existing semaphore is left as it is).
            semaphore.try_set_permits(1).await.map_err(kind)?;
            Ok(semaphore
                .try_acquire_for(wait, None)
                .await
                .map_err(kind)?
                .map(RecipeHeld::Permit))
        }
        other => Err(format!("unknown-variant-{other}")),
    }
}
