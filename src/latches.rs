//! Clean-up of unlock latches in batches.
//!
//! A release writes a latch key (`redisson_unlock_latch:{N}:<request id>`, with a PX covering
//! every retry of that release) so that a retried release is answered from it instead of
//! running twice. Once the release has returned, nothing reads the latch again; deleting it is
//! housekeeping (it would expire by itself). Instead of one `DEL` per release, released latches
//! are queued here and removed with one `UNLINK` per batch (per slot on a cluster), so an
//! uncontended lock+unlock costs two server commands plus a small fraction of one.

use std::{collections::HashMap, sync::Arc, time::Duration};

use fred::types::Key;
use tokio::sync::mpsc;

use crate::core::{slot_of, Core};

/// How long the sweeper gathers latches after the first one arrives: at most one `UNLINK` per
/// this period (per slot) whatever the release rate, and a latch outlives its release by at most
/// this long (it would expire by itself anyway).
const GATHER: Duration = Duration::from_millis(100);
/// The most keys one `UNLINK` carries.
const MAX_BATCH: usize = 512;

/// The sender side: cheap, never blocks.
pub(crate) struct LatchSweeper {
    tx: mpsc::UnboundedSender<Key>,
    task: tokio::task::JoinHandle<()>,
}

impl LatchSweeper {
    pub(crate) fn start(core: Arc<Core>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(core, rx));
        Self { tx, task }
    }

    /// Queues a latch whose release has returned.
    pub(crate) fn done(&self, latch: Key) {
        let _ = self.tx.send(latch);
    }
}

impl Drop for LatchSweeper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn run(core: Arc<Core>, mut rx: mpsc::UnboundedReceiver<Key>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        tokio::time::sleep(GATHER).await;
        while batch.len() < MAX_BATCH * 8 {
            match rx.try_recv() {
                Ok(k) => batch.push(k),
                Err(_) => break,
            }
        }
        for keys in groups(std::mem::take(&mut batch), core.is_clustered()) {
            core.unlink(keys).await;
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
            assert!(crate::core::one_slot(g));
            assert!(g.len() <= MAX_BATCH);
        }
        assert_eq!(clustered.len(), 3, "400 keys in each of 3 slots");
    }
}
