//! What both multi-locks do with a part: one attempt as an owner (the part's own, or the one the
//! multi-lock acts for), the release of every part held after a failed attempt, the random pause
//! between rounds.

use std::time::Duration;

use futures::future::join_all;

use crate::{
    error::Result,
    lock::{
        front::LockPart,
        guard::{AnyGuard, Guard},
    },
    types::owner::Owner,
};

impl LockPart {
    /// One attempt on this part as `owner`, as a type-erased guard.
    pub(super) async fn acquire_as(
        &self,
        owner: Owner,
        lease: Option<Duration>,
        wait: Option<Duration>,
    ) -> Result<Option<AnyGuard>> {
        let held = self.handle.acquire_as(owner, lease, wait).await?;
        Ok(held.map(Guard::new))
    }

    /// Another part over the same lock handle (the same lock, client and own owner).
    #[cfg_attr(not(feature = "blocking"), allow(dead_code))]
    pub(super) fn share(&self) -> LockPart {
        LockPart {
            handle: self.handle.clone(),
        }
    }

    /// The owner a multi-lock acting for `owner` uses on this part: that one, else the part's
    /// own (its lock handle's).
    pub(super) fn owner_for(&self, owner: Option<Owner>) -> Owner {
        owner.unwrap_or_else(|| self.handle.owner())
    }
}

pub(super) async fn release_all(held: Vec<AnyGuard>) {
    for r in join_all(held.into_iter().map(AnyGuard::unlock)).await {
        if let Err(e) = r {
            log::debug!("releasing a part after a failed multi-lock attempt: {e:#}");
        }
    }
}

pub(super) fn random_between(low: Duration, high: Duration) -> Duration {
    if high <= low {
        return low;
    }
    let span = (high - low).as_millis() as u64;
    let r = u64::from_le_bytes(uuid::Uuid::new_v4().as_bytes()[..8].try_into().unwrap());
    low + Duration::from_millis(r % span.max(1))
}
