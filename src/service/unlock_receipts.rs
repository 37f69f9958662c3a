//! Clean-up of unlock receipts in batches.
//!
//! A release writes a receipt key (Redisson's "unlock latch": `redisson_unlock_latch:{N}:<request
//! id>`, with a PX covering every retry of that release) so that a retried release is answered
//! from it instead of running twice. Once the release has returned, nothing reads the receipt
//! again; deleting it is housekeeping (it would expire by itself). Instead of one `DEL` per
//! release, spent receipts are queued here and removed with one `UNLINK` per batch (per slot on a cluster), so an
//! uncontended lock+unlock costs two server commands plus a small fraction of one.
//!
//! The sweeper gathers for [`GATHER`] after a quiet spell, then takes up to [`PER_ROUND`] keys;
//! a full round means it is behind, so the next round starts at once (no gathering): the rate
//! it keeps up with is that of its `UNLINK`s, not one round per period. The queue is bounded
//! ([`QUEUE`] keys): beyond that a receipt is left to expire by its PX (said once in the log).

use std::{
    collections::HashMap,
    future::Future,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use fred::types::Key;
use tokio::sync::mpsc;

use crate::conn::{cluster::slot_of, core::Core};

/// How long the sweeper gathers receipts after the first one arrives (when it is not behind): at
/// most one `UNLINK` per this period (per slot) at low rates, and a receipt outlives its release
/// by about this long (it would expire by itself anyway).
const GATHER: Duration = Duration::from_millis(100);
/// The most keys one `UNLINK` carries.
const MAX_BATCH: usize = 512;
/// The most keys one round takes from the queue.
const PER_ROUND: usize = MAX_BATCH * 8;
/// The most receipts waiting for their `UNLINK` (about 100 bytes each).
const QUEUE: usize = 65_536;

/// The sender side: cheap, never blocks.
pub(crate) struct ReceiptSweeper {
    tx: mpsc::Sender<Key>,
    /// A receipt was left to expire because the queue was full (logged once).
    overflowed: AtomicBool,
    task: tokio::task::JoinHandle<()>,
}

/// Where the swept receipts go: the core's `UNLINK` (a recorder in unit tests).
pub(crate) trait Unlink: Send + Sync + 'static {
    /// Removes the keys (one slot on a cluster); failures are ignored (the receipts expire).
    fn unlink(&self, keys: Vec<Key>) -> impl Future<Output = ()> + Send;
    /// Whether keys must be grouped by slot.
    fn clustered(&self) -> bool;
}

impl Unlink for Arc<Core> {
    fn unlink(&self, keys: Vec<Key>) -> impl Future<Output = ()> + Send {
        Core::unlink(self, keys)
    }

    fn clustered(&self) -> bool {
        self.is_clustered()
    }
}

impl ReceiptSweeper {
    pub(crate) fn start(sink: impl Unlink) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        let task = tokio::spawn(run(sink, rx));
        Self {
            tx,
            overflowed: AtomicBool::new(false),
            task,
        }
    }

    /// Queues a receipt whose release has returned; with the queue full, leaves it to expire.
    pub(crate) fn done(&self, receipt: Key) {
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(receipt) {
            if !self.overflowed.swap(true, Ordering::Relaxed) {
                log::warn!(
                    "unlock receipt clean-up is {QUEUE} keys behind; receipts beyond that expire \
                     by themselves"
                );
            }
        }
    }

    /// Receipts waiting in the queue.
    #[cfg(test)]
    fn queued(&self) -> usize {
        self.tx.max_capacity() - self.tx.capacity()
    }
}

impl Drop for ReceiptSweeper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(sink: impl Unlink, mut rx: mpsc::Receiver<Key>) {
    let mut batch = Vec::with_capacity(PER_ROUND);
    let mut behind = false;
    while let Some(first) = rx.recv().await {
        batch.push(first);
        if !behind {
            tokio::time::sleep(GATHER).await;
        }
        while batch.len() < PER_ROUND {
            match rx.try_recv() {
                Ok(k) => batch.push(k),
                Err(_) => break,
            }
        }
        behind = batch.len() == PER_ROUND;
        for keys in groups(std::mem::take(&mut batch), sink.clustered()) {
            sink.unlink(keys).await;
        }
    }
}

/// Splits keys into `UNLINK` calls: at most [`MAX_BATCH`] keys each, and on a cluster one slot
/// per call (a multi-key command must stay within a slot).
fn groups(keys: Vec<Key>, clustered: bool) -> Vec<Vec<Key>> {
    if !clustered {
        return keys.chunks(MAX_BATCH).map(<[Key]>::to_vec).collect();
    }
    let mut by_slot: HashMap<u16, Vec<Key>> = HashMap::new();
    for k in keys {
        by_slot.entry(slot_of(&k)).or_default().push(k);
    }
    by_slot
        .into_values()
        .flat_map(|v| v.chunks(MAX_BATCH).map(<[Key]>::to_vec).collect::<Vec<_>>())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the `UNLINK`s; each takes `round_trip`, or never returns when `stalled`.
    #[derive(Clone, Default)]
    struct Recorder {
        unlinked: Arc<std::sync::atomic::AtomicUsize>,
        calls: Arc<std::sync::atomic::AtomicUsize>,
        round_trip: Duration,
        stalled: bool,
    }

    impl Unlink for Recorder {
        fn unlink(&self, keys: Vec<Key>) -> impl Future<Output = ()> + Send {
            let this = self.clone();
            async move {
                if this.stalled {
                    std::future::pending::<()>().await;
                }
                tokio::time::sleep(this.round_trip).await;
                this.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                this.unlinked
                    .fetch_add(keys.len(), std::sync::atomic::Ordering::SeqCst);
            }
        }

        fn clustered(&self) -> bool {
            false
        }
    }

    /// With the `UNLINK`s stalled, the queue stops at its bound and `done` never blocks.
    #[tokio::test(start_paused = true)]
    async fn the_queue_is_bounded() {
        let recorder = Recorder {
            stalled: true,
            ..Default::default()
        };
        let sweeper = ReceiptSweeper::start(recorder);
        for i in 0..QUEUE * 2 {
            sweeper.done(receipt(i));
            if i == 0 {
                // The sweeper takes the first key and its round, then stalls in its UNLINK.
                tokio::time::sleep(GATHER * 2).await;
            }
        }
        assert_eq!(sweeper.queued(), QUEUE);
        assert!(sweeper.overflowed.load(Ordering::Relaxed));
    }

    fn receipt(i: usize) -> Key {
        Key::from(format!("redisson_unlock_latch:{{n}}:{i}"))
    }

    /// 60 000 releases at once (600k/s for 100 ms) are swept at the speed of the `UNLINK`s,
    /// not one bounded round per gathering period (the old cap: 4 096 keys per 100 ms, ~41k/s,
    /// which took 5.3 s for 200 000 keys).
    #[tokio::test(start_paused = true)]
    async fn a_full_batch_goes_again_at_once() {
        let recorder = Recorder {
            round_trip: Duration::from_millis(1),
            ..Default::default()
        };
        let sweeper = ReceiptSweeper::start(recorder.clone());
        let start = tokio::time::Instant::now();
        const N: usize = 60_000;
        for i in 0..N {
            sweeper.done(receipt(i));
        }
        while recorder.unlinked.load(std::sync::atomic::Ordering::SeqCst) < N {
            assert!(start.elapsed() < Duration::from_secs(30), "never swept");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let took = start.elapsed();
        let calls = recorder.calls.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(calls, N.div_ceil(MAX_BATCH), "full batches of {MAX_BATCH}");
        // One gathering period, then back-to-back UNLINKs of 1 ms each.
        assert!(
            took <= GATHER + Duration::from_millis(2 * calls as u64),
            "swept in {took:?}"
        );
    }

    #[test]
    fn batches_are_bounded_and_on_a_cluster_per_slot() {
        let keys: Vec<Key> = (0..1200)
            .map(|i| Key::from(format!("redisson_unlock_latch:{{n{}}}:{i}", i % 3)))
            .collect();
        let plain = groups(keys.clone(), false);
        assert_eq!(
            plain.iter().map(Vec::len).collect::<Vec<_>>(),
            vec![512, 512, 176]
        );
        let clustered = groups(keys, true);
        assert_eq!(clustered.iter().map(Vec::len).sum::<usize>(), 1200);
        for g in &clustered {
            assert!(crate::conn::cluster::one_slot(g));
            assert!(g.len() <= MAX_BATCH);
        }
        assert_eq!(clustered.len(), 3, "400 keys in each of 3 slots");
    }
}
