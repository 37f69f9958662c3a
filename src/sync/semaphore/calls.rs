//! The calls of one semaphore (sync protocol §2), built from its names.

use fred::types::Value;

use crate::conn::scripts::{ScriptCall, ScriptId};

/// The calls of one semaphore, built from its names (unit-tested against the scripts' headers
/// and the protocol's argument order).
pub(crate) struct Calls<'a> {
    pub(crate) name: &'a str,
    pub(crate) channel: &'a str,
    /// `publish`, `spublish` or `both`.
    pub(crate) publish: &'static str,
}

impl Calls<'_> {
    fn with_channel(&self, script: ScriptId, args: Vec<Value>) -> ScriptCall {
        ScriptCall::new(script, vec![self.name.into(), self.channel.into()], args)
    }

    /// SEM-ACQ: `KEYS = [N]`, `ARGV = [permits]`.
    pub(crate) fn acquire_call(&self, permits: u64) -> ScriptCall {
        ScriptCall::new(
            ScriptId::SemAcquire,
            vec![self.name.into()],
            vec![Value::from(clamp(permits))],
        )
    }

    /// SEM-REL: `KEYS = [N, channel]`, `ARGV = [permits, pub]`.
    pub(crate) fn release(&self, permits: u64) -> ScriptCall {
        self.with_channel(
            ScriptId::SemRelease,
            vec![Value::from(clamp(permits)), Value::from(self.publish)],
        )
    }

    /// SEM-SET / SEM-SET-TTL / PS-SET: `KEYS = [N, channel]`, `ARGV = [n, pub, ttlMs or 0]`.
    pub(crate) fn set(&self, permits: u64, ttl_ms: u64) -> ScriptCall {
        self.with_channel(
            ScriptId::SemSet,
            vec![
                Value::from(clamp(permits)),
                Value::from(self.publish),
                Value::from(i64::try_from(ttl_ms).unwrap_or(i64::MAX)),
            ],
        )
    }

    /// SEM-DRAIN: `KEYS = [N]`, no `ARGV`.
    pub(crate) fn drain(&self) -> ScriptCall {
        ScriptCall::new(ScriptId::SemDrain, vec![self.name.into()], vec![])
    }

    /// SEM-ADD: `KEYS = [N, channel]`, `ARGV = [n, pub]`.
    pub(crate) fn add(&self, permits: i64) -> ScriptCall {
        self.with_channel(
            ScriptId::SemAdd,
            vec![Value::from(permits), Value::from(self.publish)],
        )
    }
}

/// A permit count as the scripts take it (Redis integers are signed 64-bit).
fn clamp(permits: u64) -> i64 {
    i64::try_from(permits).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::scripts::tests::assert_matches_header;

    #[test]
    fn a_permit_count_is_clamped_to_a_redis_integer() {
        assert_eq!(clamp(u64::MAX), i64::MAX);
        assert_eq!(clamp(3), 3);
    }

    #[test]
    fn every_call_matches_its_script_header_and_the_protocols_order() {
        let calls = Calls {
            name: "s",
            channel: "redisson_sc:{s}",
            publish: "spublish",
        };
        let keys = |c: &ScriptCall| -> Vec<String> {
            c.keys
                .iter()
                .map(|k| k.as_str().unwrap().to_owned())
                .collect()
        };
        let args = |c: &ScriptCall| -> Vec<String> {
            c.args.iter().map(|a| a.as_string().unwrap()).collect()
        };
        let both = ["s", "redisson_sc:{s}"];
        let cases = [
            (calls.acquire_call(2), vec!["s"], vec!["2"]),
            (calls.release(3), both.to_vec(), vec!["3", "spublish"]),
            (calls.set(5, 0), both.to_vec(), vec!["5", "spublish", "0"]),
            (
                calls.set(5, 900),
                both.to_vec(),
                vec!["5", "spublish", "900"],
            ),
            (calls.drain(), vec!["s"], vec![]),
            (calls.add(-4), both.to_vec(), vec!["-4", "spublish"]),
        ];
        for (call, k, a) in cases {
            assert_matches_header(&call);
            assert_eq!(keys(&call), k, "{:?}", call.script);
            assert_eq!(args(&call), a, "{:?}", call.script);
        }
    }
}
