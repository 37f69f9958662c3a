//! The blocking client and the runtime it blocks the calling thread on; the factories of each
//! family are in that family's room.

use std::{future::Future, sync::mpsc::RecvTimeoutError, sync::Arc, time::Duration};

use tokio::runtime::Runtime;

use crate::{
    error::{Error, Result},
    Config,
};

/// The runtime a blocking client and its handles share, and the async client on it: when the
/// last of them is dropped, the client is shut down (the releases of dropped guards sent, as
/// [`Client::shutdown`] says) before the runtime stops.
#[derive(Debug)]
pub(super) struct Rt(Option<Runtime>, Option<crate::Client>);

impl Drop for Rt {
    fn drop(&mut self) {
        let Some(rt) = self.0.take() else {
            return;
        };
        // Blocking here is allowed only outside an async runtime (a blocking client dropped
        // inside a task stops without waiting: its background releases end with the runtime).
        if let (Some(client), Err(_)) = (self.1.take(), tokio::runtime::Handle::try_current()) {
            let _report = rt.block_on(client.shutdown());
        }
        rt.shutdown_background();
    }
}

impl Rt {
    /// Blocks the calling thread on the client's runtime. Tokio panics here when the calling
    /// thread drives an async runtime (see the module's `# Panics`); a `spawn_blocking` thread
    /// or a plain thread is fine. No check of our own: Tokio offers no way to tell a
    /// `spawn_blocking` thread (allowed) from an async worker (not allowed) without trying.
    pub(super) fn block_on<F: Future>(&self, fut: F) -> F::Output {
        self.0.as_ref().expect("runtime present").block_on(fut)
    }

    /// Blocks on a stream's `next` for at most `timeout`: the item, else
    /// [`RecvTimeoutError::Timeout`], or [`RecvTimeoutError::Disconnected`] once the stream
    /// has ended. The crate's streams are cancel safe: a wait that times out loses nothing.
    pub(super) fn next_within<T>(
        &self,
        timeout: Duration,
        next: impl Future<Output = Option<T>>,
    ) -> std::result::Result<T, RecvTimeoutError> {
        // The timer is made inside the runtime (it needs its time driver).
        match self.block_on(async move { tokio::time::timeout(timeout, next).await }) {
            Ok(Some(item)) => Ok(item),
            Ok(None) => Err(RecvTimeoutError::Disconnected),
            Err(_) => Err(RecvTimeoutError::Timeout),
        }
    }
}

/// A blocking client. Cheap to clone.
///
/// ```no_run
/// use redisson_lock::{blocking::Client, Config};
/// let client = Client::connect("redis://127.0.0.1:6379", Config::default())?;
/// let guard = client.get_lock("orders").lock()?;
/// guard.unlock()?;
/// client.shutdown();
/// # Ok::<(), redisson_lock::Error>(())
/// ```
#[derive(Clone)]
pub struct Client {
    pub(super) inner: crate::Client,
    pub(super) rt: Arc<Rt>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("blocking::Client")
            .field("id", &self.inner.id())
            .finish()
    }
}

impl Client {
    /// Connects, starting the client's runtime (two worker threads).
    ///
    /// # Errors
    /// As [`crate::Client::connect`].
    ///
    /// # Panics
    /// On a thread that drives an async runtime (see the [module docs](super)).
    pub fn connect(url: &str, config: Config) -> Result<Client> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("redisson-lock")
            .enable_all()
            .build()
            .map_err(|e| Error::Connection(format!("cannot start runtime: {e}").into()))?;
        let mut rt = Rt(Some(runtime), None);
        let inner = rt.block_on(crate::Client::connect(url, config))?;
        rt.1 = Some(inner.clone());
        Ok(Client {
            inner,
            rt: Arc::new(rt),
        })
    }

    /// The client id (`<client uuid>` of every owner field).
    pub fn id(&self) -> &str {
        self.inner.id()
    }

    /// The async client underneath (same connections, watchdog and subscriptions).
    pub fn as_async(&self) -> &crate::Client {
        &self.inner
    }

    /// As [`crate::Client::shutdown`]: sends the releases of the guards already dropped (for
    /// at most the shutdown timeout), keeps the holds of guards still held, stops the
    /// watchdog and closes the connections. Dropping the last clone of the client and of its
    /// handles does the same (outside an async runtime).
    ///
    /// # Panics
    /// On a thread that drives an async runtime (see the [module docs](super)).
    pub fn shutdown(&self) -> crate::ShutdownReport {
        self.rt.block_on(self.inner.shutdown())
    }
}
