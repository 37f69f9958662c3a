//! The permit-expirable semaphore's wire (sync protocol §3): its calls, built from its names
//! (unit-tested against the scripts' headers and the protocol's argument order), and the
//! reading of PS-ACQ's reply.

use std::time::Duration;

use fred::types::Value;

use crate::{
    conn::{
        core::unexpected,
        scripts::{ScriptCall, ScriptId},
    },
    error::Result,
    types::permit::PermitId,
};

/// The score of a permit acquired without a lease: it never expires.
pub(crate) const NO_LEASE: i64 = 922_337_203_685_477;

/// What one PS-ACQ said.
pub(crate) enum Reply {
    Taken(PermitId),
    /// Not taken; the earliest permit expires in this long (`None`: none will).
    Busy(Option<Duration>),
}

/// The calls of one permit-expirable semaphore, built from its names (unit-tested against the
/// scripts' headers and the protocol's argument order).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Calls<'a> {
    pub(crate) name: &'a str,
    pub(crate) timeouts: &'a str,
    pub(crate) channel: &'a str,
    pub(crate) publish: &'static str,
}

impl Calls<'_> {
    /// PS-SET (the semaphore's SEM-SET without TTL): `KEYS = [N, channel]`, `ARGV = [n, pub, 0]`.
    pub(crate) fn set(&self, permits: u64) -> ScriptCall {
        crate::sync::semaphore::Calls {
            name: self.name,
            channel: self.channel,
            publish: self.publish,
        }
        .set(permits, 0)
    }

    /// PS-ADD: `KEYS = [N, channel]`, `ARGV = [n, pub]`.
    pub(crate) fn add(&self, permits: i64) -> ScriptCall {
        ScriptCall::new(
            ScriptId::PermitAdd,
            vec![self.name.into(), self.channel.into()],
            vec![Value::from(permits), Value::from(self.publish)],
        )
    }

    /// PS-AVAIL: `KEYS = [N, timeouts, channel]`, `ARGV = [now, pub]`.
    pub(crate) fn available(&self, now: i64) -> ScriptCall {
        ScriptCall::new(
            ScriptId::PermitAvailable,
            vec![self.name.into(), self.timeouts.into(), self.channel.into()],
            vec![Value::from(now), Value::from(self.publish)],
        )
    }

    /// PS-ACQ for one permit: `KEYS = [N, timeouts, channel]`,
    /// `ARGV = [1, deadline, now, 922337203685477, pub, id]` (deadline = now + lease, or the
    /// no-lease score).
    pub(crate) fn acquire_call(&self, id: PermitId, lease_ms: Option<u64>, now: i64) -> ScriptCall {
        let expires = lease_ms.map_or(NO_LEASE, |ms| {
            now.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX))
        });
        ScriptCall::new(
            ScriptId::PermitAcquire,
            vec![self.name.into(), self.timeouts.into(), self.channel.into()],
            vec![
                Value::from(1),
                Value::from(expires),
                Value::from(now),
                Value::from(NO_LEASE),
                Value::from(self.publish),
                id_value(id),
            ],
        )
    }

    /// PS-REL: `KEYS = [N, channel, timeouts]`, `ARGV = [id, 1, now, pub]`.
    pub(crate) fn release(&self, id: PermitId, now: i64) -> ScriptCall {
        ScriptCall::new(
            ScriptId::PermitRelease,
            vec![self.name.into(), self.channel.into(), self.timeouts.into()],
            vec![
                id_value(id),
                Value::from(1),
                Value::from(now),
                Value::from(self.publish),
            ],
        )
    }
}

/// A permit id as the scripts take it: its 16 raw bytes.
fn id_value(id: PermitId) -> Value {
    Value::Bytes(fred::bytes::Bytes::copy_from_slice(id.as_bytes()))
}

/// `true` for PS-ACQ's success reply.
pub(crate) fn is_ok(reply: &Value) -> bool {
    matches!(reply.as_bytes(), Some(b"OK"))
}

/// PS-ACQ's reply: `OK`, `:<expiry ms>` or nil.
pub(crate) fn decode_acquire(reply: &Value, id: PermitId, now: i64, name: &str) -> Result<Reply> {
    if reply.is_null() {
        return Ok(Reply::Busy(None));
    }
    let Some(text) = reply.as_bytes().and_then(|b| std::str::from_utf8(b).ok()) else {
        return Err(unexpected(
            name,
            format!("OK, :<ms> or nil expected, got {reply:?}"),
        ));
    };
    if text == "OK" {
        return Ok(Reply::Taken(id));
    }
    let expires = text
        .strip_prefix(':')
        .and_then(|ms| ms.parse::<f64>().ok())
        .filter(|ms| ms.is_finite())
        .ok_or_else(|| unexpected(name, format!("OK, :<ms> or nil expected, got {text:?}")))?;
    // At least 1 ms: an expired permit left in the set is given back by the next attempt.
    let wait_ms = (expires - now as f64)
        .max(1.0)
        .min(crate::types::millis::MAX_MILLIS as f64);
    Ok(Reply::Busy(Some(Duration::from_millis(wait_ms as u64))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_call_matches_its_script_header_and_the_protocols_order() {
        use crate::conn::scripts::tests::assert_matches_header;
        let calls = Calls {
            name: "p",
            timeouts: "{p}:timeout",
            channel: "redisson_sc:{p}",
            publish: "publish",
        };
        let id = PermitId::from_bytes([0xab; 16]);
        let text = |v: &Value| match v {
            Value::Bytes(b) if b.len() == 16 => format!("<{} raw bytes>", b.len()),
            other => other.as_string().unwrap(),
        };
        let three = ["p", "{p}:timeout", "redisson_sc:{p}"];
        let raw = "<16 raw bytes>";
        let cases = [
            (
                calls.set(4),
                vec!["p", "redisson_sc:{p}"],
                vec!["4", "publish", "0"],
            ),
            (
                calls.add(2),
                vec!["p", "redisson_sc:{p}"],
                vec!["2", "publish"],
            ),
            (
                calls.available(1_000),
                three.to_vec(),
                vec!["1000", "publish"],
            ),
            (
                calls.acquire_call(id, Some(500), 1_000),
                three.to_vec(),
                vec!["1", "1500", "1000", "922337203685477", "publish", raw],
            ),
            (
                calls.acquire_call(id, None, 1_000),
                three.to_vec(),
                vec![
                    "1",
                    "922337203685477",
                    "1000",
                    "922337203685477",
                    "publish",
                    raw,
                ],
            ),
            (
                calls.release(id, 2_000),
                vec!["p", "redisson_sc:{p}", "{p}:timeout"],
                vec![raw, "1", "2000", "publish"],
            ),
        ];
        for (call, keys, args) in cases {
            assert_matches_header(&call);
            let k: Vec<&str> = call.keys.iter().map(|k| k.as_str().unwrap()).collect();
            assert_eq!(k, keys, "{:?}", call.script);
            let a: Vec<String> = call.args.iter().map(text).collect();
            assert_eq!(a, args, "{:?}", call.script);
        }
        assert_eq!(id_value(id), Value::Bytes(vec![0xab; 16].into()));
    }

    #[test]
    fn acquire_replies_decode_to_taken_busy_or_errors() {
        let id = PermitId::from_bytes([7; 16]);
        let now = 1_000_000;
        assert!(matches!(
            decode_acquire(&Value::from("OK"), id, now, "p"),
            Ok(Reply::Taken(i)) if i == id
        ));
        assert!(matches!(
            decode_acquire(&Value::Null, id, now, "p"),
            Ok(Reply::Busy(None))
        ));
        assert!(matches!(
            decode_acquire(&Value::from(":1000250"), id, now, "p"),
            Ok(Reply::Busy(Some(d))) if d == Duration::from_millis(250)
        ));
        // Expired already (more expired permits than one attempt gives back): 1 ms.
        assert!(matches!(
            decode_acquire(&Value::from(":999000"), id, now, "p"),
            Ok(Reply::Busy(Some(d))) if d == Duration::from_millis(1)
        ));
        for bad in [Value::from("KO"), Value::from(":x"), Value::Integer(1)] {
            assert!(decode_acquire(&bad, id, now, "p").is_err(), "{bad:?}");
        }
        assert!(is_ok(&Value::from("OK")));
        assert!(!is_ok(&Value::Null));
    }
}
