//! What keeps a permit of a permit-expirable semaphore alive and tells its holder where it
//! stands: the client's watchdog renews a permit acquired without a lease (one entry of the
//! renewal run that renews the locks, PS-LEASE's wire: Java's `updateLeaseTime(permitId,
//! watchdog timeout)`), and every permit guard has the [`LossSignal`] a lock guard has
//! (`Held`, `InDoubt` after a connection event, `Lost` once its id is gone from `{N}:timeout`
//! or its deadline passed).
//!
//! The hold's key in the watchdog's bookkeeping is (`N`, the id as 32 hex characters): ids are
//! unique, so a permit is a hold of its own, counted once.

use std::{sync::Arc, time::Duration};

use fred::types::{Key, Value};
use tokio::time::Instant;

use super::calls::{Calls, NO_LEASE};
use crate::{
    client::Client,
    conn::scripts::{ScriptCall, ScriptId},
    service::watchdog::{HoldKey, HoldState, Layout, LossSignal, RenewalShape, Upkeep, Watched},
    types::permit::PermitId,
};

/// How a permit lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Life {
    /// Renewed by the watchdog (acquired without a lease, the watchdog on).
    Watchdog,
    /// Leased on the wire: expires that long after its acquisition unless released.
    Leased(Duration),
    /// No lease and no watchdog: the no-lease score, never expires.
    Forever,
}

/// The watch over one permit: the watched hold (its loss signal, its registration with the
/// watchdog until [`end`](Self::end)) and how the permit lives.
pub(super) struct PermitLife {
    watched: Watched,
    life: Life,
}

/// The renewal shape of a permit: PS-LEASE over the semaphore's three keys.
fn renewal_shape(calls: Calls<'_>) -> RenewalShape {
    RenewalShape {
        script: ScriptId::PermitRenew,
        keys: crate::service::watchdog::ShapeKeys::from([
            Key::from(calls.name),
            Key::from(calls.timeouts),
            Key::from(calls.channel),
        ]),
        layout: Layout::PermitLease,
        values: Arc::from([calls.publish.to_owned()]),
    }
}

/// PS-GETLEASE for `id` as of `now` (epoch ms): `KEYS = [N, timeouts, channel]`,
/// `ARGV = [id, 922337203685477, now, pub]`. Answers the ms left (> 0 while the permit lives:
/// how a leased permit in doubt is confirmed after a reconnect).
pub(super) fn lease_left_call(calls: Calls<'_>, id: PermitId, now: i64) -> ScriptCall {
    ScriptCall::new(
        ScriptId::PermitLeaseLeft,
        vec![
            calls.name.into(),
            calls.timeouts.into(),
            calls.channel.into(),
        ],
        vec![
            Value::Bytes(fred::bytes::Bytes::copy_from_slice(id.as_bytes())),
            Value::from(NO_LEASE),
            Value::from(now),
            Value::from(calls.publish),
        ],
    )
}

impl PermitLife {
    /// Starts watching the permit `id`, whose acquisition was sent at `sent_at` (monotonic)
    /// with the epoch clock at `now_ms`.
    pub(super) fn start(
        client: &Client,
        calls: Calls<'_>,
        id: PermitId,
        life: Life,
        sent_at: Instant,
        now_ms: i64,
    ) -> Self {
        let key = HoldKey::new(calls.name.into(), id.to_string().into(), Arc::from([]));
        let upkeep = Upkeep {
            shape: renewal_shape(calls),
            queue: None,
            presence: Some(lease_left_call(calls, id, now_ms)),
        };
        let (renewed, lease) = match life {
            Life::Watchdog => (true, None),
            Life::Leased(lease) => (false, Some(lease)),
            Life::Forever => (false, None),
        };
        let watched = Watched::start(client.watchdog(), key, upkeep, sent_at, renewed, lease);
        Self { watched, life }
    }

    /// How the permit lives.
    pub(super) fn life(&self) -> Life {
        self.life
    }

    /// The permit's loss signal.
    pub(super) fn loss_signal(&self) -> Arc<LossSignal> {
        self.watched.loss().clone()
    }

    /// Where the permit stands.
    pub(super) fn state(&self) -> HoldState {
        self.watched.state()
    }

    /// Until when the permit is known to live (monotonic clock), unless lost earlier.
    pub(super) fn valid_until(&self) -> Instant {
        self.watched.loss().deadline()
    }

    /// Resolves once the permit is no longer held (in doubt or lost).
    pub(super) async fn not_held(&self) {
        self.watched.loss().wait_not_held().await
    }

    /// Stops renewing and following the permit (idempotent): before its release, or when it
    /// is kept (a watchdog permit then lives until its last renewal's deadline).
    pub(super) fn end(&mut self, client: &Client) {
        self.watched.let_go(client.watchdog());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::scripts::tests::assert_matches_header;
    use crate::service::watchdog::renewal_call;

    const NAMES: Calls<'static> = Calls {
        name: "p",
        timeouts: "{p}:timeout",
        channel: "redisson_sc:{p}",
        publish: "publish",
    };

    #[test]
    fn a_permit_renewal_entry_is_ps_lease_over_the_semaphores_keys() {
        let a = PermitId::from_bytes([0xab; 16]);
        let b = PermitId::from_bytes([0x01; 16]);
        let shape = renewal_shape(NAMES);
        let (fa, fb) = (a.to_string(), b.to_string());
        let call = renewal_call(&[(&shape, vec![&fa]), (&shape, vec![&fb])], 9_000);
        assert_matches_header(&call);
        assert_eq!(call.script, ScriptId::PermitRenew);
        let keys: Vec<&str> = call.keys.iter().map(|k| k.as_str().unwrap()).collect();
        assert_eq!(keys, ["p", "{p}:timeout", "redisson_sc:{p}"].repeat(2));
        assert_eq!(call.args.len(), 1 + 2 * 4);
        assert_eq!(call.args[0], Value::from(9_000i64));
        for (entry, id) in [(0, a), (1, b)] {
            let args = &call.args[1 + 4 * entry..][..4];
            assert_eq!(args[0], Value::Bytes(id.as_bytes().to_vec().into()));
            let (deadline, now) = (args[1].as_i64().unwrap(), args[2].as_i64().unwrap());
            assert_eq!(deadline - now, 9_000, "the new deadline is now + lease");
            assert_eq!(args[3], Value::from("publish"));
        }
    }

    #[test]
    fn the_lease_left_call_is_ps_getlease() {
        let id = PermitId::from_bytes([7; 16]);
        let call = lease_left_call(NAMES, id, 1_000);
        assert_matches_header(&call);
        assert_eq!(call.args[1], Value::from(922_337_203_685_477i64));
        assert_eq!(call.args[2], Value::from(1_000i64));
    }
}
