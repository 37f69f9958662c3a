//! What both multi-locks do with a part: one attempt as the part's owner, the release of every
//! part held after a failed attempt, the random pause between rounds.

use std::time::Duration;

use futures::future::join_all;

use crate::{
    error::Result,
    lock::{
        front::LockPart,
        guard::{AnyGuard, Guard},
    },
};

impl LockPart {
    /// One attempt on this part as its owner, as a type-erased guard.
    pub(super) async fn acquire(
        &self,
        lease: Option<Duration>,
        wait: Option<Duration>,
    ) -> Result<Option<AnyGuard>> {
        let held = self
            .handle
            .acquire_as(self.handle.owner(), lease, wait)
            .await?;
        Ok(held.map(Guard::new))
    }
}

pub(super) async fn release_all(held: Vec<AnyGuard>) {
    for r in join_all(held.into_iter().map(AnyGuard::unlock)).await {
        if let Err(e) = r {
            log::debug!("releasing a part after a failed multi-lock attempt: {e}");
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
