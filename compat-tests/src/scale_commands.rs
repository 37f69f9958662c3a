//! The `scale` commands of `lock-peer` (an extension of the peer protocol, documented in
//! `docs/performance.md`, "The scale commands"): many holds, many waiters and churn on distinct
//! lock names, for the bench's scale rows. The holds and the waiters'
//! acquisitions are kept here (one set per peer) until `scale release`.
//!
//! Each waiter is a task of its own (`Client::get_lock` acts for the calling task), as a service that
//! locks per entity would do; `tasks` owners acquire the holds, each its share, one after the
//! other.

use std::{
    str::FromStr,
    time::{Duration, Instant},
};

use redisson_lock::{Client, LockGuard};
use tokio::task::JoinSet;

use super::{epoch_ms, kind_word, one_line};

/// What the `scale` commands keep between commands.
#[derive(Default)]
pub(crate) struct Scale {
    /// Every hold taken by `scale hold` or by a waiter of `scale wait`, until `scale release`.
    holds: Vec<LockGuard>,
    /// The waiters of the last `scale wait`, until `scale waited`.
    waiters: Option<JoinSet<Waited>>,
}

/// What one waiter of `scale wait` got: its guard and when (epoch ms), or its error's kind.
type Waited = Result<Option<(LockGuard, u128)>, &'static str>;

const USAGE: &str = "scale hold <count> <prefix> [tasks [leaseMs]] | scale release | \
                     scale wait <count> <prefix> <waitMs> | scale waited | \
                     scale churn <count> <prefix> [tasks] | scale stats";

fn arg<T: FromStr>(words: &[String], i: usize, default: Option<T>) -> Option<T> {
    match words.get(i) {
        Some(w) => w.parse().ok(),
        None => default,
    }
}

impl Scale {
    /// Runs `scale <words...>`; the reply line.
    pub(crate) async fn run(&mut self, client: &Client, words: &[String]) -> String {
        let reply = match words.first().map(String::as_str) {
            Some("hold") => self.hold(client, words).await,
            Some("release") => Some(self.release(client).await),
            Some("wait") => self.wait(client, words),
            Some("waited") => Some(self.waited().await),
            Some("churn") => churn(client, words).await,
            Some("stats") => Some(stats(client)),
            _ => None,
        };
        match reply {
            Some(Ok(value)) => format!("- scale OK {value}"),
            Some(Err(e)) => format!("- scale ERR {e}"),
            None => format!("- scale ERR INVALID: {USAGE}"),
        }
    }

    /// `scale hold <count> <prefix> [tasks [leaseMs]]`: `tasks` owners (16) take the locks
    /// `<prefix><i>`, `i` below `count`, each its share one after the other (watchdog mode, or
    /// `leaseMs`).
    async fn hold(&mut self, client: &Client, words: &[String]) -> Option<Result<String, String>> {
        let count: usize = arg(words, 1, None)?;
        let prefix = words.get(2)?.clone();
        let tasks: usize = arg(words, 3, Some(16))?.max(1);
        let lease = arg::<u64>(words, 4, Some(0))?;
        let started = Instant::now();
        let mut set = JoinSet::new();
        for t in 0..tasks {
            let (client, prefix) = (client.clone(), prefix.clone());
            set.spawn(async move {
                let mut held = Vec::with_capacity(count / tasks + 1);
                for i in (t..count).step_by(tasks) {
                    let lock = client.get_lock(&format!("{prefix}{i}"));
                    let guard = if lease > 0 {
                        lock.lock_with_lease(Duration::from_millis(lease)).await
                    } else {
                        lock.lock().await
                    };
                    match guard {
                        Ok(g) => held.push(g),
                        Err(e) => return (held, Some(e)),
                    }
                }
                (held, None)
            });
        }
        let mut failure = None;
        let before = self.holds.len();
        while let Some(done) = set.join_next().await {
            let (held, error) = done.expect("a hold task panicked");
            self.holds.extend(held);
            failure = failure.or(error);
        }
        let took = started.elapsed().as_secs_f64();
        let held = self.holds.len() - before;
        Some(match failure {
            Some(e) => Err(format!(
                "{}: {} (held {held})",
                kind_word(&e),
                one_line(&e.to_string())
            )),
            None => Ok(format!(
                "held={held} ms={:.0} per_s={:.0}",
                took * 1000.0,
                held as f64 / took.max(1e-9)
            )),
        })
    }

    /// `scale release`: every kept hold released at once (the guards dropped together), then
    /// waits until the client has no background release, watchdog hold or owner entry left.
    async fn release(&mut self, client: &Client) -> Result<String, String> {
        let released = self.holds.len();
        let (at, started) = (epoch_ms(), Instant::now());
        drop(std::mem::take(&mut self.holds));
        let dropped_ms = started.elapsed().as_secs_f64() * 1000.0;
        loop {
            let s = client.stats();
            if s.background_releases == 0 && s.watchdog_holds == 0 && s.owner_entries == 0 {
                break;
            }
            if started.elapsed() > Duration::from_secs(300) {
                return Err(format!("TIMEOUT: releases not done after 300 s: {s:?}"));
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Ok(format!(
            "released={released} at={at} end={} drop_ms={dropped_ms:.1} ms={:.1}",
            epoch_ms(),
            started.elapsed().as_secs_f64() * 1000.0
        ))
    }

    /// `scale wait <count> <prefix> <waitMs>`: `count` waiters, each an owner of its own, try
    /// the lock `<prefix><i>` for `waitMs`; answers once they are started (`scale waited`
    /// tells how they ended).
    fn wait(&mut self, client: &Client, words: &[String]) -> Option<Result<String, String>> {
        let count: usize = arg(words, 1, None)?;
        let prefix = words.get(2)?;
        let wait = Duration::from_millis(arg(words, 3, None)?);
        let set = self.waiters.get_or_insert_with(JoinSet::new);
        for i in 0..count {
            let lock = client.get_lock(&format!("{prefix}{i}"));
            set.spawn(async move {
                match lock.try_lock_for(wait).await {
                    Ok(Some(g)) => Ok(Some((g, epoch_ms()))),
                    Ok(None) => Ok(None),
                    Err(e) => Err(kind_word(&e)),
                }
            });
        }
        Some(Ok(format!("waiting={}", set.len())))
    }

    /// `scale waited`: waits for the waiters of `scale wait` to end; how many acquired (their
    /// holds are kept), timed out or failed, and when the first and the last acquired.
    async fn waited(&mut self) -> Result<String, String> {
        let Some(mut set) = self.waiters.take() else {
            return Ok("acquired=0 timed_out=0 errors=0".into());
        };
        let (mut timed_out, mut errors) = (0usize, 0usize);
        let (mut first, mut last) = (u128::MAX, 0u128);
        let mut kinds = Vec::new();
        let before = self.holds.len();
        while let Some(done) = set.join_next().await {
            match done.expect("a waiter panicked") {
                Ok(Some((guard, at))) => {
                    self.holds.push(guard);
                    first = first.min(at);
                    last = last.max(at);
                }
                Ok(None) => timed_out += 1,
                Err(kind) => {
                    errors += 1;
                    if !kinds.contains(&kind) {
                        kinds.push(kind);
                    }
                }
            }
        }
        let acquired = self.holds.len() - before;
        let mut line = format!("acquired={acquired} timed_out={timed_out} errors={errors}");
        if acquired > 0 {
            line.push_str(&format!(" first_at={first} last_at={last}"));
        }
        if !kinds.is_empty() {
            line.push_str(&format!(" error_kinds={}", kinds.join(",")));
        }
        Ok(line)
    }
}

/// `scale churn <count> <prefix> [tasks]`: `count` lock + unlock on distinct names
/// `<prefix><i>`, by `tasks` owners (32), each its share.
async fn churn(client: &Client, words: &[String]) -> Option<Result<String, String>> {
    let count: usize = arg(words, 1, None)?;
    let prefix = words.get(2)?.clone();
    let tasks: usize = arg(words, 3, Some(32))?.max(1);
    let started = Instant::now();
    let mut set = JoinSet::new();
    for t in 0..tasks {
        let (client, prefix) = (client.clone(), prefix.clone());
        set.spawn(async move {
            for i in (t..count).step_by(tasks) {
                let guard = client.get_lock(&format!("{prefix}{i}")).lock().await?;
                guard.unlock().await?;
            }
            Ok::<_, redisson_lock::Error>(())
        });
    }
    let mut failure = None;
    while let Some(done) = set.join_next().await {
        if let Err(e) = done.expect("a churn task panicked") {
            failure.get_or_insert(e);
        }
    }
    let took = started.elapsed().as_secs_f64();
    Some(match failure {
        Some(e) => Err(format!("{}: {}", kind_word(&e), one_line(&e.to_string()))),
        None => Ok(format!(
            "ops={count} ms={:.0} per_s={:.0}",
            took * 1000.0,
            count as f64 / took.max(1e-9)
        )),
    })
}

/// `scale stats`: the client's own counters (`Client::stats`).
fn stats(client: &Client) -> Result<String, String> {
    let s = client.stats();
    Ok(format!(
        "watchdog_holds={} channels={} waiters={} wait_lines={} owner_entries={} \
         background_releases={} renewal_calls={}",
        s.watchdog_holds,
        s.subscribed_channels,
        s.waiters,
        s.wait_lines,
        s.owner_entries,
        s.background_releases,
        s.renewal_calls
    ))
}
