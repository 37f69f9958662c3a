//! Test rig: a loopback TCP proxy between a client and a `redis-server`, for the network faults
//! of the fault catalogue (§4.3: ambiguous replies, lost replies, partitions, slow networks).
//!
//! The proxy listens on a free `127.0.0.1` port and forwards every accepted connection to a
//! target port. The test controls it at run time:
//!
//! * [`set_latency`](Proxy::set_latency) / [`set_jitter`](Proxy::set_jitter): delay every chunk
//!   of one direction; chunks keep their order (a chunk never overtakes an earlier one).
//! * [`freeze`](Proxy::freeze): a blackhole. Connections stay open and bytes are still accepted
//!   from both sides, but nothing is forwarded; [`unfreeze`](Proxy::unfreeze) delivers what was
//!   held, [`unfreeze_dropping`](Proxy::unfreeze_dropping) discards it.
//! * [`hold_next_reply`](Proxy::hold_next_reply) / [`drop_next_reply`](Proxy::drop_next_reply):
//!   the next server→client chunk (optionally the next one matching a predicate) is held until
//!   the test releases or discards it, or is discarded at once. Later chunks of the same
//!   connection wait behind a held one.
//! * [`reset`](Proxy::reset): closes every current connection abruptly (RST, `SO_LINGER` 0).
//! * [`refuse`](Proxy::refuse): closes (or reopens) the listening socket, so new connections are
//!   refused by the kernel (`ECONNREFUSED`), as when the server is down.
//! * [`stats`](Proxy::stats) / [`wait_for`](Proxy::wait_for): connection and chunk counters, and
//!   a bounded wait on them, so tests wait on events instead of sleeping.
//!
//! Beware: over real TCP a reply is never lost while its connection lives. A client that
//! pipelines (fred) matches replies to commands in order and keeps timed-out commands queued,
//! so after a reply discarded on a live connection every later reply goes to the command before
//! it (checked with fred 10.1: every later command times out). Use a drop alone to model a
//! middlebox that loses bytes; follow it with [`reset`](Proxy::reset) to model the realistic
//! "reply lost with its connection" (fault catalogue S10, variant). A held reply that arrives
//! after the command timed out is harmless: it is matched to the timed-out command.
//!
//! A "chunk" is what one `read` returned: usually one reply when one command is in flight, but
//! TCP may merge or split replies. Pub/sub pushes are chunks too: use the `_matching` variants
//! to pick a particular reply.
//!
//! Every task runs on the Tokio runtime of the test; dropping the [`Proxy`] stops them all and
//! closes the listener and every connection. It depends on Tokio only.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{
        tcp::{OwnedReadHalf, OwnedWriteHalf},
        TcpListener, TcpStream,
    },
    sync::{mpsc, watch},
    task::AbortHandle,
    time::Instant,
};

/// One direction of a proxied connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Client → server (requests).
    Upstream = 0,
    /// Server → client (replies and pushes).
    Downstream = 1,
}

/// Counters of a proxy, indexed by `Direction as usize` where per direction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Connections accepted since the start.
    pub accepted: u64,
    /// Connections currently open (accepted and not yet closed on both sides).
    pub open: usize,
    /// Chunks read from the sending side (forwarded, dropped, or still held).
    pub received: [u64; 2],
    /// Chunks forwarded.
    pub forwarded: [u64; 2],
    /// Chunks discarded (by `unfreeze_dropping`, `drop_next_reply` or a discarded hold).
    pub dropped: [u64; 2],
    /// `true` while the listening socket is open (not refusing).
    pub listening: bool,
}

/// A predicate on the bytes of a chunk, for the `_matching` holds and drops.
pub type Filter = Box<dyn Fn(&[u8]) -> bool + Send + Sync>;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Decision {
    Pending,
    Release,
    Discard,
}

#[derive(Clone, Debug)]
struct HoldState {
    /// The bytes of the chunk once one was caught.
    caught: Option<Vec<u8>>,
    decision: Decision,
}

struct HoldSlot {
    filter: Option<Filter>,
    state: watch::Sender<HoldState>,
}

impl HoldSlot {
    fn matches(&self, data: &[u8]) -> bool {
        match &self.filter {
            Some(f) => f(data),
            None => true,
        }
    }
}

/// A hold armed by [`Proxy::hold_next_reply`] (or a drop armed by [`Proxy::drop_next_reply`]).
///
/// Dropping the handle of a hold releases the chunk it holds (one it catches later passes at
/// once); the handle of a drop can be ignored, the drop stays armed.
pub struct HeldReply {
    slot: Arc<HoldSlot>,
}

impl HeldReply {
    /// Waits until a chunk was caught (held, or discarded for a drop) and returns its bytes;
    /// `None` if nothing was caught within `within`.
    pub async fn wait_caught(&self, within: Duration) -> Option<Vec<u8>> {
        let mut rx = self.slot.state.subscribe();
        let caught = tokio::time::timeout(within, rx.wait_for(|s| s.caught.is_some()))
            .await
            .ok()?
            .ok()?;
        caught.caught.clone()
    }

    /// `true` once a chunk was caught.
    pub fn is_caught(&self) -> bool {
        self.slot.state.borrow().caught.is_some()
    }

    /// Delivers the held chunk (and lets the chunks queued behind it go).
    pub fn release(&self) {
        self.decide(Decision::Release);
    }

    /// Discards the held chunk; the chunks queued behind it go on.
    pub fn discard(&self) {
        self.decide(Decision::Discard);
    }

    fn decide(&self, decision: Decision) {
        self.slot.state.send_if_modified(|s| {
            if s.decision == Decision::Pending {
                s.decision = decision;
                true
            } else {
                false
            }
        });
    }
}

impl Drop for HeldReply {
    fn drop(&mut self) {
        self.release();
    }
}

struct Settings {
    latency: [Duration; 2],
    jitter: [Duration; 2],
    frozen: bool,
    /// Incremented by every `freeze`.
    freeze_gen: u64,
    /// Freezes with a generation up to this one ended with `unfreeze_dropping`.
    dropped_upto: u64,
    refuse: bool,
    /// Incremented by every `reset`; connections born earlier are closed.
    reset_gen: u64,
    hold: [Option<Arc<HoldSlot>>; 2],
}

struct Shared {
    target: u16,
    settings: watch::Sender<Settings>,
    stats: watch::Sender<Stats>,
    tasks: Mutex<Vec<AbortHandle>>,
}

impl Shared {
    fn track(&self, task: AbortHandle) {
        let mut tasks = self.tasks.lock().unwrap();
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }
}

/// A loopback TCP proxy to `127.0.0.1:<target>`; see the module documentation.
pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Starts a proxy to `127.0.0.1:<target_port>` on a free loopback port. Must be called in
    /// a Tokio runtime.
    pub async fn start(target_port: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy's listening socket");
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            target: target_port,
            settings: watch::Sender::new(Settings {
                latency: [Duration::ZERO; 2],
                jitter: [Duration::ZERO; 2],
                frozen: false,
                freeze_gen: 0,
                dropped_upto: 0,
                refuse: false,
                reset_gen: 0,
                hold: [None, None],
            }),
            stats: watch::Sender::new(Stats {
                listening: true,
                ..Stats::default()
            }),
            tasks: Mutex::new(Vec::new()),
        });
        let task = tokio::spawn(accept_loop(listener, port, shared.clone()));
        shared.track(task.abort_handle());
        Proxy { port, shared }
    }

    /// `redis://127.0.0.1:<proxy port>`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The proxy's listening port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port connections are forwarded to.
    pub fn target_port(&self) -> u16 {
        self.shared.target
    }

    /// Adds `delay` to every chunk of one direction from now on (chunks keep their order).
    pub fn set_latency(&self, dir: Direction, delay: Duration) {
        self.shared
            .settings
            .send_modify(|s| s.latency[dir as usize] = delay);
    }

    /// Adds a uniformly random ±`jitter` to the latency of one direction (never below zero;
    /// chunks still keep their order).
    pub fn set_jitter(&self, dir: Direction, jitter: Duration) {
        self.shared
            .settings
            .send_modify(|s| s.jitter[dir as usize] = jitter);
    }

    /// Stops forwarding in both directions without closing anything (a blackhole). Bytes are
    /// still read from both sides and held; new connections are accepted and held too.
    pub fn freeze(&self) {
        self.shared.settings.send_modify(|s| {
            if !s.frozen {
                s.frozen = true;
                s.freeze_gen += 1;
            }
        });
    }

    /// Resumes forwarding and delivers everything that was held, in order.
    pub fn unfreeze(&self) {
        self.shared.settings.send_modify(|s| s.frozen = false);
    }

    /// Resumes forwarding and discards everything that was held during the freeze.
    pub fn unfreeze_dropping(&self) {
        self.shared.settings.send_modify(|s| {
            if s.frozen {
                s.frozen = false;
                s.dropped_upto = s.freeze_gen;
            }
        });
    }

    /// `true` while frozen.
    pub fn is_frozen(&self) -> bool {
        self.shared.settings.borrow().frozen
    }

    /// Holds the next server→client chunk until the returned handle releases or discards it.
    pub fn hold_next_reply(&self) -> HeldReply {
        self.arm(Direction::Downstream, None, Decision::Pending)
    }

    /// Holds the next server→client chunk for which `filter` is true.
    pub fn hold_next_reply_matching(
        &self,
        filter: impl Fn(&[u8]) -> bool + Send + Sync + 'static,
    ) -> HeldReply {
        self.arm(
            Direction::Downstream,
            Some(Box::new(filter)),
            Decision::Pending,
        )
    }

    /// Discards the next server→client chunk; the handle tells when it happened.
    pub fn drop_next_reply(&self) -> HeldReply {
        self.arm(Direction::Downstream, None, Decision::Discard)
    }

    /// Discards the next server→client chunk for which `filter` is true.
    pub fn drop_next_reply_matching(
        &self,
        filter: impl Fn(&[u8]) -> bool + Send + Sync + 'static,
    ) -> HeldReply {
        self.arm(
            Direction::Downstream,
            Some(Box::new(filter)),
            Decision::Discard,
        )
    }

    /// Holds the next chunk of either direction matching `filter` (`None`: any chunk).
    pub fn hold_next(&self, dir: Direction, filter: Option<Filter>) -> HeldReply {
        self.arm(dir, filter, Decision::Pending)
    }

    /// Discards the next chunk of either direction matching `filter` (`None`: any chunk).
    pub fn drop_next(&self, dir: Direction, filter: Option<Filter>) -> HeldReply {
        self.arm(dir, filter, Decision::Discard)
    }

    /// Arms a hold slot; it replaces (disarms) an earlier one of the same direction that has
    /// not caught anything yet.
    fn arm(&self, dir: Direction, filter: Option<Filter>, decision: Decision) -> HeldReply {
        let slot = Arc::new(HoldSlot {
            filter,
            state: watch::Sender::new(HoldState {
                caught: None,
                decision,
            }),
        });
        self.shared
            .settings
            .send_modify(|s| s.hold[dir as usize] = Some(slot.clone()));
        HeldReply { slot }
    }

    /// Closes every current connection abruptly: both sockets of each get `SO_LINGER` 0, so
    /// the client and the server see a reset. New connections are accepted as usual. Returns
    /// at once; wait for `open == 0` with [`wait_for`](Self::wait_for) if needed.
    pub fn reset(&self) {
        self.shared.settings.send_modify(|s| s.reset_gen += 1);
    }

    /// `true`: close the listening socket, so new connections are refused (`ECONNREFUSED`);
    /// connections already open are left alone. `false`: listen again on the same port.
    /// Returns once the listening socket is in the requested state.
    pub async fn refuse(&self, refuse: bool) {
        self.shared.settings.send_modify(|s| s.refuse = refuse);
        let reached = self
            .wait_for(|s| s.listening != refuse, Duration::from_secs(10))
            .await;
        assert!(
            reached,
            "the proxy's listener did not follow refuse({refuse})"
        );
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        self.shared.stats.borrow().clone()
    }

    /// Connections currently open.
    pub fn connections(&self) -> usize {
        self.shared.stats.borrow().open
    }

    /// Connections accepted since the start.
    pub fn accepted(&self) -> u64 {
        self.shared.stats.borrow().accepted
    }

    /// Waits until `cond` holds for the counters; `false` if it did not within `within`.
    pub async fn wait_for(&self, cond: impl FnMut(&Stats) -> bool, within: Duration) -> bool {
        let mut rx = self.shared.stats.subscribe();
        let reached = matches!(
            tokio::time::timeout(within, rx.wait_for(cond)).await,
            Ok(Ok(_))
        );
        reached
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        for task in self.shared.tasks.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

async fn accept_loop(listener: TcpListener, port: u16, shared: Arc<Shared>) {
    let mut settings = shared.settings.subscribe();
    let mut listener = Some(listener);
    loop {
        let refuse = settings.borrow_and_update().refuse;
        if refuse {
            if listener.take().is_some() {
                shared.stats.send_modify(|s| s.listening = false);
            }
            if settings.changed().await.is_err() {
                return;
            }
            continue;
        }
        let l = match &listener {
            Some(l) => l,
            None => {
                listener = Some(rebind(port).await);
                shared.stats.send_modify(|s| s.listening = true);
                listener.as_ref().unwrap()
            }
        };
        tokio::select! {
            accepted = l.accept() => {
                let Ok((client, _)) = accepted else { continue };
                let born = settings.borrow().reset_gen;
                shared.stats.send_modify(|s| {
                    s.accepted += 1;
                    s.open += 1;
                });
                let task = tokio::spawn(serve(client, born, shared.clone()));
                shared.track(task.abort_handle());
            }
            changed = settings.changed() => {
                if changed.is_err() {
                    return;
                }
            }
        }
    }
}

/// Listens on `port` again (the kernel allows it at once: Tokio listeners use `SO_REUSEADDR`).
async fn rebind(port: u16) -> TcpListener {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match TcpListener::bind(("127.0.0.1", port)).await {
            Ok(l) => return l,
            Err(e) if Instant::now() >= deadline => {
                panic!("the proxy cannot listen on port {port} again: {e}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Decrements the open-connection count however the connection task ends.
struct OpenGuard(Arc<Shared>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.stats.send_modify(|s| s.open -= 1);
    }
}

/// Why a pump stopped the whole connection.
struct Abort;

async fn serve(client: TcpStream, born: u64, shared: Arc<Shared>) {
    let _open = OpenGuard(shared.clone());
    let server = match TcpStream::connect(("127.0.0.1", shared.target)).await {
        Ok(s) => s,
        Err(_) => {
            let _ = client.set_zero_linger();
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_r, mut client_w) = client.into_split();
    let (mut server_r, mut server_w) = server.into_split();
    let (up_tx, up_rx) = mpsc::unbounded_channel();
    let (down_tx, down_rx) = mpsc::unbounded_channel();
    let mut settings = shared.settings.subscribe();
    let pumps = async {
        tokio::try_join!(
            read_side(&mut client_r, up_tx, Direction::Upstream, &shared),
            write_side(&mut server_w, up_rx, Direction::Upstream, &shared),
            read_side(&mut server_r, down_tx, Direction::Downstream, &shared),
            write_side(&mut client_w, down_rx, Direction::Downstream, &shared),
        )
    };
    let clean = tokio::select! {
        done = pumps => done.is_ok(),
        _ = settings.wait_for(|s| s.reset_gen > born) => false,
    };
    if !clean {
        // Abrupt close: RST to both sides. Dropping a write half would send a FIN first, so
        // the write halves are forgotten and the sockets close with the read halves.
        let _ = client_r.as_ref().set_zero_linger();
        let _ = server_r.as_ref().set_zero_linger();
        client_w.forget();
        server_w.forget();
    }
}

enum Item {
    Data {
        bytes: Vec<u8>,
        due: Instant,
        /// The freeze generation if the chunk was read while frozen.
        read_in_freeze: Option<u64>,
    },
    /// The sender closed its side (FIN): pass the half-close on.
    Eof,
}

/// A small xorshift generator for jitter (no dependency, seeded per pump).
struct Jitter(u64);

impl Jitter {
    fn new() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e37_79b9_7f4a_7c15);
        Jitter(seed | 1)
    }

    /// Uniform in [base − jitter, base + jitter], at least zero.
    fn apply(&mut self, base: Duration, jitter: Duration) -> Duration {
        if jitter.is_zero() {
            return base;
        }
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let span = jitter.as_micros() as u64 * 2 + 1;
        let offset = Duration::from_micros(self.0 % span);
        (base + offset).saturating_sub(jitter)
    }
}

async fn read_side(
    from: &mut OwnedReadHalf,
    to: mpsc::UnboundedSender<Item>,
    dir: Direction,
    shared: &Shared,
) -> Result<(), Abort> {
    let mut buf = vec![0u8; 16 * 1024];
    let mut last_due = Instant::now();
    let mut jitter = Jitter::new();
    loop {
        let n = from.read(&mut buf).await.map_err(|_| Abort)?;
        if n == 0 {
            let _ = to.send(Item::Eof);
            return Ok(());
        }
        let (delay, read_in_freeze) = {
            let s = shared.settings.borrow();
            let d = dir as usize;
            (
                jitter.apply(s.latency[d], s.jitter[d]),
                s.frozen.then_some(s.freeze_gen),
            )
        };
        shared.stats.send_modify(|s| s.received[dir as usize] += 1);
        let due = (Instant::now() + delay).max(last_due);
        last_due = due;
        let item = Item::Data {
            bytes: buf[..n].to_vec(),
            due,
            read_in_freeze,
        };
        if to.send(item).is_err() {
            return Err(Abort);
        }
    }
}

async fn write_side(
    to: &mut OwnedWriteHalf,
    mut from: mpsc::UnboundedReceiver<Item>,
    dir: Direction,
    shared: &Shared,
) -> Result<(), Abort> {
    let mut settings = shared.settings.subscribe();
    let d = dir as usize;
    while let Some(item) = from.recv().await {
        let (bytes, due, read_in_freeze) = match item {
            Item::Data {
                bytes,
                due,
                read_in_freeze,
            } => (bytes, due, read_in_freeze),
            Item::Eof => {
                let _ = to.shutdown().await;
                return Ok(());
            }
        };
        // Without latency `due` has passed already: forward at once (a timer, even an expired
        // one, waits for the next tick of Tokio's 1 ms wheel and added ~1 ms per chunk).
        if due > Instant::now() {
            tokio::time::sleep_until(due).await;
        }

        // A hold armed for this direction catches the first matching chunk.
        let mut claimed = None;
        shared.settings.send_if_modified(|s| match &s.hold[d] {
            Some(slot) if slot.matches(&bytes) => {
                claimed = s.hold[d].take();
                true
            }
            _ => false,
        });
        if let Some(slot) = claimed {
            slot.state.send_modify(|s| s.caught = Some(bytes.clone()));
            let mut rx = slot.state.subscribe();
            let decision = rx
                .wait_for(|s| s.decision != Decision::Pending)
                .await
                .map(|s| s.decision)
                .unwrap_or(Decision::Release);
            if decision == Decision::Discard {
                shared.stats.send_modify(|s| s.dropped[d] += 1);
                continue;
            }
        }

        // A freeze holds the chunk; `unfreeze_dropping` discards it.
        let mut waited_in_freeze = None;
        loop {
            let frozen = {
                let s = settings.borrow_and_update();
                s.frozen.then_some(s.freeze_gen)
            };
            match frozen {
                None => break,
                Some(g) => waited_in_freeze = Some(g),
            }
            if settings.changed().await.is_err() {
                return Err(Abort);
            }
        }
        let dropped_upto = settings.borrow().dropped_upto;
        if [read_in_freeze, waited_in_freeze]
            .into_iter()
            .flatten()
            .any(|g| g <= dropped_upto)
        {
            shared.stats.send_modify(|s| s.dropped[d] += 1);
            continue;
        }

        to.write_all(&bytes).await.map_err(|_| Abort)?;
        shared.stats.send_modify(|s| s.forwarded[d] += 1);
    }
    // The reader side ended with an error: abort the connection.
    Err(Abort)
}
