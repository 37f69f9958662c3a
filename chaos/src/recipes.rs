//! The recipes' owners (issue 32): `election` (a campaign of `Client::get_election`: a leader
//! is a holder, its term the fencing token, so the checker's overlap and token rules say
//! "never two leaders that both think they lead") and `permit` (a watchdog permit of a
//! permit-expirable semaphore of one permit: "never more holders than permits who all think
//! they hold"). Kept apart from `worker.rs`, which dispatches to it.

use std::time::{Duration, Instant};

use redisson_lock::{Client, HoldState, Leadership, PermitGuard};

/// The recipe variants.
pub const VARIANTS: [&str; 2] = ["election", "permit"];

/// A hold of a recipe.
pub enum RecipeHeld {
    /// Leading an election.
    Leader(Leadership),
    /// Holding the one permit of a permit-expirable semaphore (renewed by the watchdog).
    Permit(PermitGuard),
}

impl RecipeHeld {
    pub fn state(&self) -> HoldState {
        match self {
            RecipeHeld::Leader(l) => l.state(),
            RecipeHeld::Permit(p) => p.state(),
        }
    }

    pub fn valid_until(&self) -> Instant {
        match self {
            RecipeHeld::Leader(l) => l.valid_until().into_std(),
            RecipeHeld::Permit(p) => p.valid_until().into_std(),
        }
    }

    /// The leader's term (its fencing token); none for a permit.
    pub fn token(&self) -> Option<u64> {
        match self {
            RecipeHeld::Leader(l) => Some(l.term()),
            RecipeHeld::Permit(_) => None,
        }
    }

    /// Resolves when the holder is told its hold is in doubt or lost.
    pub async fn told(&self) {
        match self {
            RecipeHeld::Leader(l) => l.lost().await,
            RecipeHeld::Permit(p) => p.lost().await,
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
