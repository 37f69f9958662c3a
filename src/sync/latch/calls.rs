//! The calls of one latch (sync protocol §4), built from its names.

use fred::types::Value;

use crate::conn::scripts::{ScriptCall, ScriptId};

/// The calls of one latch, built from its names (unit-tested against the scripts' headers and
/// the protocol's argument order).
pub(super) struct Calls<'a> {
    pub(super) name: &'a str,
    pub(super) channel: &'a str,
    pub(super) publish: &'static str,
}

impl Calls<'_> {
    fn call(&self, script: ScriptId, args: Vec<Value>) -> ScriptCall {
        ScriptCall::new(script, vec![self.name.into(), self.channel.into()], args)
    }

    /// CDL-SET: `KEYS = [N, channel]`, `ARGV = ["1", n, pub]`.
    pub(super) fn set(&self, count: u64) -> ScriptCall {
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        self.call(
            ScriptId::LatchSet,
            vec![
                Value::from("1"),
                Value::from(count),
                Value::from(self.publish),
            ],
        )
    }

    /// CDL-DOWN: `KEYS = [N, channel]`, `ARGV = ["0", pub]`.
    pub(super) fn count_down(&self) -> ScriptCall {
        self.call(
            ScriptId::LatchCountDown,
            vec![Value::from("0"), Value::from(self.publish)],
        )
    }

    /// CDL-DEL: `KEYS = [N, channel]`, `ARGV = ["1", pub]`.
    pub(super) fn delete(&self) -> ScriptCall {
        self.call(
            ScriptId::LatchDelete,
            vec![Value::from("1"), Value::from(self.publish)],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::scripts::tests::assert_matches_header;

    #[test]
    fn every_call_matches_its_script_header_and_the_protocols_order() {
        let calls = Calls {
            name: "l",
            channel: "redisson_countdownlatch__channel__{l}",
            publish: "publish",
        };
        for (call, args) in [
            (calls.set(3), vec!["1", "3", "publish"]),
            (calls.count_down(), vec!["0", "publish"]),
            (calls.delete(), vec!["1", "publish"]),
        ] {
            assert_matches_header(&call);
            let keys: Vec<&str> = call.keys.iter().map(|k| k.as_str().unwrap()).collect();
            assert_eq!(keys, ["l", "redisson_countdownlatch__channel__{l}"]);
            let got: Vec<String> = call.args.iter().map(|a| a.as_string().unwrap()).collect();
            assert_eq!(got, args, "{:?}", call.script);
        }
    }
}
