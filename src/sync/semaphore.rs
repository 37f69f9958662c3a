//! The semaphore (Redisson `RSemaphore`, sync protocol §2): a string key holding the available
//! permits, anonymous permits, a channel on which every release announces the new count.

use std::time::Duration;

use fred::types::Value;

use super::call::{flag, integer, run_synced, run_taking};
use crate::{
    client::Client,
    conn::scripts::{ScriptCall, ScriptId},
    engine::{self, detach, Observed, Orphan, SleepOn, Step, Wait, Waiter, Won},
    error::{Error, Result},
    service::pubsub::Reading,
    types::names,
};

/// The object kind in logs and metrics.
const OBJECT: &str = "semaphore";

/// A distributed counting semaphore, wire-compatible with Redisson's `RSemaphore`.
///
/// The key `N` is a string holding the available permits; nothing records who took them, so
/// any client may release any number (a Java service can release what a Rust service took).
/// A release announces the new count on `redisson_sc:{N}`; a waiter of any client wakes on it
/// (as many waiters per client as the announced permits allow) and tries again.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// let semaphore = client.get_semaphore("pool");
/// semaphore.try_set_permits(3).await?;
/// semaphore.acquire(1).await?;
/// // ... use the resource ...
/// semaphore.release(1).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    client: Client,
    name: String,
    channel: String,
}

/// Redisson's name for [`Semaphore`].
pub type RSemaphore = Semaphore;

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name)
            .finish()
    }
}

impl Client {
    /// The semaphore `name` (Redisson `getSemaphore`); the name goes through the configured
    /// [`NameMapper`](crate::NameMapper). Makes no call.
    pub fn get_semaphore(&self, name: &str) -> Semaphore {
        let name = self.map_name(name);
        Semaphore {
            client: self.clone(),
            channel: names::semaphore_channel(&name),
            name,
        }
    }
}

impl Semaphore {
    /// The raw name in Redis (after the name mapper): the key holding the permits.
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

    /// Sets the permits if the semaphore does not exist yet (Redisson `trySetPermits`), and
    /// announces them. `true` when set, `false` when it existed (nothing changed).
    ///
    /// # Errors
    /// Redis and connection errors; [`Error::NotReplicated`] when replica sync is on and no
    /// replica acknowledged (the master has the permits).
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have set the permits.
    pub async fn try_set_permits(&self, permits: u64) -> Result<bool> {
        self.set(permits, 0).await
    }

    /// As [`try_set_permits`](Self::try_set_permits), with a time to live for the key
    /// (Redisson 3.29+ `trySetPermits(permits, timeToLive)`): the semaphore disappears, with
    /// its permits, after `ttl`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero `ttl` (nothing sent); else as
    /// [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Cancel safety
    /// As [`try_set_permits`](Self::try_set_permits).
    pub async fn try_set_permits_with_ttl(&self, permits: u64, ttl: Duration) -> Result<bool> {
        let ms = crate::types::millis::clamp_millis(ttl);
        if ms == 0 {
            return Err(Error::InvalidArgument(
                "a semaphore's time to live is at least 1 ms".into(),
            ));
        }
        self.set(permits, ms).await
    }

    async fn set(&self, permits: u64, ttl_ms: u64) -> Result<bool> {
        let call = self.calls().set(permits, ttl_ms);
        let reply = run_synced(&self.client, call, &self.name, (OBJECT, "set")).await?;
        flag(&reply, &self.name)
    }

    /// Takes `permits` permits, waiting without limit until a release makes them available
    /// (Redisson `acquire(permits)`). Zero permits succeed at once without a call.
    ///
    /// # Errors
    /// Redis and connection errors (an attempt whose reply was lost may have taken the
    /// permits: they are anonymous, so nothing can tell); [`Error::NotReplicated`] once the
    /// retries of an acquisition no replica acknowledged are used up (each was given back).
    ///
    /// # Cancel safety
    /// Cancel safe: dropped while waiting it leaves the channel; dropped while an attempt is in
    /// flight, the attempt finishes in the background and gives back what it took.
    pub async fn acquire(&self, permits: u64) -> Result<()> {
        match self.acquire_until(permits, Wait::Until(None)).await? {
            true => Ok(()),
            false => Err(Error::Timeout("acquire without limit ended".into())),
        }
    }

    /// One attempt to take `permits` permits (Redisson `tryAcquire(permits)`): `true` when
    /// taken.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire(&self, permits: u64) -> Result<bool> {
        self.acquire_until(permits, Wait::Once).await
    }

    /// Takes `permits` permits, waiting at most `wait` (Redisson `tryAcquire(permits, wait)`):
    /// `true` when taken, `false` when `wait` passed first. A zero `wait` is one attempt.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire).
    ///
    /// # Cancel safety
    /// As [`acquire`](Self::acquire).
    pub async fn try_acquire_for(&self, permits: u64, wait: Duration) -> Result<bool> {
        self.acquire_until(permits, Wait::for_duration(wait)).await
    }

    async fn acquire_until(&self, permits: u64, wait: Wait) -> Result<bool> {
        if permits == 0 {
            return Ok(true);
        }
        let take = Take {
            semaphore: self,
            permits,
        };
        let seen = Observed {
            kind: OBJECT,
            owner: "",
            wait: wait.remaining(),
            lease: None,
        };
        Ok(engine::acquire(&take, wait, seen)
            .await?
            .map(Won::take)
            .is_some())
    }

    /// SEM-REL without the replica sync (an undo).
    async fn give_back(&self, permits: u64) -> Result<i64> {
        let call = self.calls().release(permits);
        let reply = self.client.core().run(call, &self.name).await?;
        integer(&reply, &self.name)
    }

    /// Gives back `permits` permits (Redisson `release(permits)`), creating the semaphore if
    /// it does not exist, and announces the new count, which wakes as many waiters (of every
    /// client) as it allows. Zero permits make no call.
    ///
    /// # Errors
    /// Redis and connection errors; [`Error::NotReplicated`] when replica sync is on and no
    /// replica acknowledged (the master has the permits).
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have released the permits.
    pub async fn release(&self, permits: u64) -> Result<()> {
        if permits == 0 {
            return Ok(());
        }
        run_synced(
            &self.client,
            self.calls().release(permits),
            &self.name,
            (OBJECT, "release"),
        )
        .await?;
        Ok(())
    }

    /// The available permits (Redisson `availablePermits`): 0 when the semaphore does not
    /// exist; negative after more permits were removed than there were.
    ///
    /// # Errors
    /// Redis and connection errors ([`Error::Redis`] for a key that is not a number).
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn available_permits(&self) -> Result<i64> {
        self.client.core().integer(&self.name, &self.name).await
    }

    /// Takes every available permit (Redisson `drainPermits`) and returns how many that was;
    /// 0 when the semaphore does not exist. Announces nothing.
    ///
    /// # Errors
    /// Redis and connection errors; [`Error::NotReplicated`] as for
    /// [`release`](Self::release) (the permits were taken).
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may have taken the permits.
    pub async fn drain_permits(&self) -> Result<i64> {
        let call = self.calls().drain();
        let reply = run_synced(&self.client, call, &self.name, (OBJECT, "drain")).await?;
        integer(&reply, &self.name)
    }

    /// Adds `permits` (or removes, when negative) to the available permits (Redisson
    /// `addPermits`), creating the semaphore if needed, and announces the new count.
    ///
    /// # Errors
    /// Redis and connection errors; [`Error::NotReplicated`] as for
    /// [`release`](Self::release). Never run twice: a lost reply is not retried.
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have added the permits.
    pub async fn add_permits(&self, permits: i64) -> Result<()> {
        let call = self.calls().add(permits);
        run_synced(&self.client, call, &self.name, (OBJECT, "add")).await?;
        Ok(())
    }

    /// Deletes the semaphore (Redisson `delete`): `true` when it existed. Announces nothing,
    /// as Redisson does: waiters keep waiting.
    ///
    /// # Errors
    /// Redis and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have deleted it.
    pub async fn delete(&self) -> Result<bool> {
        let n = self.client.core().delete(&[&self.name], &self.name).await?;
        Ok(n > 0)
    }
}

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

/// One taking of `permits` permits: the engine's waiter for [`Semaphore::acquire`] and its
/// variants.
struct Take<'a> {
    semaphore: &'a Semaphore,
    permits: u64,
}

/// Permits taken, on their way to the caller.
struct Taken {
    semaphore: Semaphore,
    permits: u64,
}

/// Permits taken for a caller that went away are given back.
impl Orphan for Taken {
    fn orphaned(self) {
        crate::observe::late_acquisition(&self.semaphore.name, "");
        let client = self.semaphore.client.clone();
        drop(client.spawn(async move {
            if let Err(e) = self.semaphore.give_back(self.permits).await {
                log::warn!(
                    "could not give back the permits of {} its dropped caller took: {e}",
                    self.semaphore.name
                );
            }
        }));
    }
}

impl Waiter for Take<'_> {
    type Won = Taken;
    /// Redisson retries an unreplicated SEM-ACQ, a single try's too.
    const RETRIES_UNREPLICATED_ONCE: bool = true;

    fn client(&self) -> &Client {
        &self.semaphore.client
    }

    fn name(&self) -> &str {
        &self.semaphore.name
    }

    /// One SEM-ACQ, never cut short ([`detach`]); taken but acknowledged by no replica: given
    /// back, [`Error::NotReplicated`].
    async fn attempt(&self, wait: Wait) -> Result<Step<Won<Taken>>> {
        let (this, permits) = (self.semaphore.clone(), self.permits);
        let deadline = wait.deadline();
        detach(
            self.client().runtime(),
            || (),
            move |_| async move {
                let call = this.calls().acquire_call(permits);
                let taken = |v: &Value| v.as_i64() == Some(1);
                let undo = || async {
                    if let Err(e) = this.give_back(permits).await {
                        log::warn!(
                            "could not give back the unreplicated permits of {}: {e}",
                            this.name
                        );
                    }
                };
                let value = run_taking(&this.client, call, (&this.name, ""), deadline, taken, undo)
                    .await
                    .map_err(|f| f.error)??;
                if flag(&value, &this.name)? {
                    Ok(Step::Done(Won::new(Taken {
                        semaphore: this,
                        permits,
                    })))
                } else {
                    Ok(Step::Busy { frees_in: None })
                }
            },
        )
        .await
    }

    /// Not repeated after a transient failure: the permits are anonymous, so an attempt whose
    /// reply was lost cannot be told apart from one that never ran (it may have taken them).
    fn repeatable(&self) -> bool {
        false
    }

    fn sleep_on(&self) -> SleepOn {
        SleepOn::Channel {
            channel: self.semaphore.channel.clone(),
            reading: Reading::Permits,
        }
    }
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
