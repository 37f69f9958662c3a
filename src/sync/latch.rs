//! The count-down latch (Redisson `RCountDownLatch`, sync protocol §4): a string key holding
//! the count; the step to zero deletes it and announces `0`, which opens every waiter.

use std::time::Duration;

use fred::types::Value;

use super::call::flag;
use crate::{
    client::Client,
    conn::scripts::{ScriptCall, ScriptId},
    engine::{self, Observed, SleepOn, Step, Wait, Waiter, Won},
    error::{Error, Result},
    service::pubsub::Reading,
    types::names,
};

/// A distributed count-down latch, wire-compatible with Redisson's `RCountDownLatch`.
///
/// The key `N` holds the count (absent: 0, open). [`count_down`](Self::count_down) deletes it
/// when the count reaches zero and announces `0` on
/// `redisson_countdownlatch__channel__{N}`, which wakes every waiter of every client.
///
/// On a cluster the channel's hash tag is `N` up to its first `}`; a name containing `}` (such
/// as `{t}x`) puts the channel in another slot than the key, and every call that needs both
/// fails with [`Error::CrossSlot`] before anything is sent (Redisson fails with `CROSSSLOT`).
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// let latch = client.get_count_down_latch("workers-ready");
/// latch.try_set_count(2).await?;
/// // in each worker, when ready:
/// latch.count_down().await?;
/// // in the coordinator:
/// let opened = latch.wait_for(std::time::Duration::from_secs(10)).await?;
/// # let _ = opened;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CountDownLatch {
    client: Client,
    name: String,
    channel: String,
}

/// Redisson's name for [`CountDownLatch`].
pub type RCountDownLatch = CountDownLatch;

impl std::fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountDownLatch")
            .field("name", &self.name)
            .finish()
    }
}

impl Client {
    /// The count-down latch `name` (Redisson `getCountDownLatch`); the name goes through the
    /// configured [`NameMapper`](crate::NameMapper). Makes no call.
    pub fn get_count_down_latch(&self, name: &str) -> CountDownLatch {
        let name = self.map_name(name);
        CountDownLatch {
            client: self.clone(),
            channel: names::latch_channel(&name),
            name,
        }
    }
}

impl CountDownLatch {
    /// The raw name in Redis (after the name mapper): the key holding the count.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn calls(&self) -> Calls<'_> {
        Calls {
            name: &self.name,
            channel: &self.channel,
            publish: self.client.core().messaging().publish_command(),
        }
    }

    /// Sets the count if the latch does not exist (Redisson `trySetCount`) and announces `1`
    /// ("closed"). `true` when set, `false` when a count was there (nothing changed).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero count (nothing sent: a latch of count 0 is open
    /// and has no key); Redis and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have set the count.
    pub async fn try_set_count(&self, count: u64) -> Result<bool> {
        if count == 0 {
            return Err(Error::InvalidArgument(
                "a count-down latch's count is at least 1".into(),
            ));
        }
        let call = self.calls().set(count);
        let reply = self.client.core().run(call, &self.name).await?;
        crate::observe::synchronizer("count_down_latch", &self.name, "set");
        flag(&reply, &self.name)
    }

    /// Counts down by one (Redisson `countDown`). The step to zero deletes the latch and
    /// announces `0`, which opens every waiter; counting down an open latch changes nothing.
    ///
    /// # Errors
    /// Redis and connection errors. A lost reply is not retried (it would count twice).
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have counted down.
    pub async fn count_down(&self) -> Result<()> {
        let call = self.calls().count_down();
        self.client.core().run(call, &self.name).await?;
        crate::observe::synchronizer("count_down_latch", &self.name, "count_down");
        Ok(())
    }

    /// The count (Redisson `getCount`): 0 when the latch is open (absent).
    ///
    /// # Errors
    /// Redis and connection errors ([`Error::Redis`] for a key that is not a number).
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn count(&self) -> Result<u64> {
        let n = self.client.core().integer(&self.name, &self.name).await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Deletes the latch (Redisson `delete`) and announces `1`: `true` when it existed.
    /// Waiters are not opened by a deletion (as in Redisson); they see the count 0 when they
    /// next look (at their deadline, or after a message).
    ///
    /// # Errors
    /// Redis and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have deleted it.
    pub async fn delete(&self) -> Result<bool> {
        let call = self.calls().delete();
        let reply = self.client.core().run(call, &self.name).await?;
        flag(&reply, &self.name)
    }

    /// Waits without limit until the count is 0 (Redisson `await()`). A transient failure
    /// (a command timeout, a lost connection) does not end the wait: it reads again after a
    /// pause.
    ///
    /// # Errors
    /// Redis errors that are not transient; [`Error::PermissionDenied`] for a channel it may
    /// not listen on.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped wait leaves the channel and nothing else.
    pub async fn wait(&self) -> Result<()> {
        self.wait_until(Wait::Until(None)).await.map(drop)
    }

    /// Waits at most `timeout` until the count is 0 (Redisson `await(timeout)`): `true` when
    /// it is 0, `false` when the time passed first. The count is read once more at the
    /// deadline, as Redisson does, so a latch opened unheard still gives `true`. A zero
    /// `timeout` reads the count once.
    ///
    /// # Errors
    /// As [`wait`](Self::wait).
    ///
    /// # Cancel safety
    /// As [`wait`](Self::wait).
    pub async fn wait_for(&self, timeout: Duration) -> Result<bool> {
        self.wait_until(Wait::for_duration(timeout)).await
    }

    async fn wait_until(&self, wait: Wait) -> Result<bool> {
        let seen = Observed {
            kind: "count_down_latch",
            owner: "",
            wait: wait.remaining(),
            lease: None,
        };
        Ok(engine::acquire(&Opening(self), wait, seen)
            .await?
            .map(Won::take)
            .is_some())
    }
}

/// A look at a latch's count: the engine's waiter for [`CountDownLatch::wait`] and
/// [`CountDownLatch::wait_for`]. Done when the count is 0.
struct Opening<'a>(&'a CountDownLatch);

impl Waiter for Opening<'_> {
    /// A look takes nothing.
    type Won = ();
    /// Nothing to replicate: a read.
    const RETRIES_UNREPLICATED_ONCE: bool = true;
    /// The last look at the count at the deadline, as Redisson's.
    const LOOKS_AGAIN_AT_DEADLINE: bool = true;

    fn client(&self) -> &Client {
        &self.0.client
    }

    fn name(&self) -> &str {
        &self.0.name
    }

    /// Reads the count (a read: nothing to undo, no task of its own).
    async fn attempt(&self, _wait: Wait) -> Result<Step<Won<()>>> {
        Ok(match self.0.count().await? {
            0 => Step::Done(Won::new(())),
            _ => Step::Busy { frees_in: None },
        })
    }

    /// A read may be repeated.
    fn repeatable(&self) -> bool {
        true
    }

    fn sleep_on(&self) -> SleepOn {
        SleepOn::Channel {
            channel: self.0.channel.clone(),
            reading: Reading::Opening,
        }
    }
}

/// The calls of one latch, built from its names (unit-tested against the scripts' headers and
/// the protocol's argument order).
struct Calls<'a> {
    name: &'a str,
    channel: &'a str,
    publish: &'static str,
}

impl Calls<'_> {
    fn call(&self, script: ScriptId, args: Vec<Value>) -> ScriptCall {
        ScriptCall::new(script, vec![self.name.into(), self.channel.into()], args)
    }

    /// CDL-SET: `KEYS = [N, channel]`, `ARGV = ["1", n, pub]`.
    fn set(&self, count: u64) -> ScriptCall {
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
    fn count_down(&self) -> ScriptCall {
        self.call(
            ScriptId::LatchCountDown,
            vec![Value::from("0"), Value::from(self.publish)],
        )
    }

    /// CDL-DEL: `KEYS = [N, channel]`, `ARGV = ["1", pub]`.
    fn delete(&self) -> ScriptCall {
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
