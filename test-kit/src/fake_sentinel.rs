//! A stand-in sentinel that names whatever master the test sets: a sentinel that has not
//! caught up with a failover (as one in TILT mode, or cut off from the others, stays), put
//! first in a client's sentinel list so that the client's discovery asks it first.
//!
//! It speaks just enough RESP: `SENTINEL get-master-addr-by-name` answers the set address,
//! other `SENTINEL` subcommands an empty list, `SUBSCRIBE` confirms each channel (and
//! [`publish`](FakeSentinel::publish) sends an event to the connections subscribed to its
//! channel, as a sentinel announces a failover), `PING` answers `PONG`, anything else `OK`.
//! Threads on a loopback listener, one per connection; stopped (listener and connections) when
//! dropped.

use std::{
    collections::HashSet,
    io::{BufRead, BufReader, Write},
    net::{Shutdown, TcpListener, TcpStream},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

pub struct FakeSentinel {
    port: u16,
    master: Arc<Mutex<(String, u16)>>,
    stop: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    /// `get-master-addr-by-name` questions answered.
    asked: Arc<std::sync::atomic::AtomicU64>,
    subscribers: Subscribers,
}

/// The subscribed connections: each one's writer (shared with its reply thread, so a message
/// never cuts into a reply) and channels.
type Subscribers = Arc<Mutex<Vec<(Arc<Mutex<TcpStream>>, HashSet<String>)>>>;

impl FakeSentinel {
    /// Listens on a free loopback port, naming `master`.
    pub fn start(master: (String, u16)) -> FakeSentinel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        let fake = FakeSentinel {
            port,
            master: Arc::new(Mutex::new(master)),
            stop: Arc::new(AtomicBool::new(false)),
            conns: Arc::new(Mutex::new(Vec::new())),
            asked: Arc::new(Default::default()),
            subscribers: Arc::new(Mutex::new(Vec::new())),
        };
        let (master, stop, conns, asked, subscribers) = (
            fake.master.clone(),
            fake.stop.clone(),
            fake.conns.clone(),
            fake.asked.clone(),
            fake.subscribers.clone(),
        );
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let _ = stream.set_nonblocking(false);
                        if let Ok(c) = stream.try_clone() {
                            conns.lock().unwrap().push(c);
                        }
                        let (master, asked, subscribers) =
                            (master.clone(), asked.clone(), subscribers.clone());
                        std::thread::spawn(move || serve(stream, master, asked, subscribers));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        fake
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Names `master` from now on.
    pub fn name(&self, master: (String, u16)) {
        *self.master.lock().unwrap() = master;
    }

    /// How many times it was asked for the master.
    pub fn asked(&self) -> u64 {
        self.asked.load(Ordering::SeqCst)
    }

    /// How many connections subscribed to `channel`.
    pub fn subscribed(&self, channel: &str) -> usize {
        self.subscribers
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, channels)| channels.contains(channel))
            .count()
    }

    /// Sends `payload` on `channel` to every connection subscribed to it (a sentinel's event,
    /// e.g. `+try-failover` with `master <name> <ip> <port>`); returns how many got it.
    pub fn publish(&self, channel: &str, payload: &str) -> usize {
        let message = format!(
            "*3\r\n{}{}{}",
            bulk("message"),
            bulk(channel),
            bulk(payload)
        );
        let subscribers = self.subscribers.lock().unwrap();
        subscribers
            .iter()
            .filter(|(_, channels)| channels.contains(channel))
            .filter(|(w, _)| w.lock().unwrap().write_all(message.as_bytes()).is_ok())
            .count()
    }
}

impl Drop for FakeSentinel {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

/// Reads one command (a RESP array of bulk strings, or an inline command).
fn read_command(reader: &mut impl BufRead) -> Option<Vec<String>> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let line = line.trim_end();
    let Some(n) = line.strip_prefix('*') else {
        return Some(line.split_whitespace().map(str::to_owned).collect());
    };
    let n: usize = n.parse().ok()?;
    let mut words = Vec::with_capacity(n);
    for _ in 0..n {
        let mut header = String::new();
        reader.read_line(&mut header).ok()?;
        let len: usize = header.trim_end().strip_prefix('$')?.parse().ok()?;
        let mut buf = vec![0u8; len + 2];
        std::io::Read::read_exact(reader, &mut buf).ok()?;
        buf.truncate(len);
        words.push(String::from_utf8_lossy(&buf).into_owned());
    }
    Some(words)
}

fn serve(
    stream: TcpStream,
    master: Arc<Mutex<(String, u16)>>,
    asked: Arc<std::sync::atomic::AtomicU64>,
    subscribers: Subscribers,
) {
    let writer = match stream.try_clone() {
        Ok(w) => Arc::new(Mutex::new(w)),
        Err(_) => return,
    };
    let mut reader = BufReader::new(stream);
    let mut subscribed = 0usize;
    while let Some(words) = read_command(&mut reader) {
        let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
        let reply = match upper.first().map(String::as_str) {
            Some("PING") if subscribed > 0 => format!("*2\r\n{}{}", bulk("pong"), bulk("")),
            Some("PING") => "+PONG\r\n".to_owned(),
            Some("SENTINEL")
                if upper.get(1).map(String::as_str) == Some("GET-MASTER-ADDR-BY-NAME") =>
            {
                asked.fetch_add(1, Ordering::SeqCst);
                let (host, port) = master.lock().unwrap().clone();
                format!("*2\r\n{}{}", bulk(&host), bulk(&port.to_string()))
            }
            Some("SENTINEL") => "*0\r\n".to_owned(),
            Some("SUBSCRIBE") | Some("PSUBSCRIBE") => {
                let kind = words[0].to_ascii_lowercase();
                let mut out = String::new();
                {
                    let mut subs = subscribers.lock().unwrap();
                    let i = match subs.iter().position(|(w, _)| Arc::ptr_eq(w, &writer)) {
                        Some(i) => i,
                        None => {
                            subs.push((writer.clone(), HashSet::new()));
                            subs.len() - 1
                        }
                    };
                    subs[i].1.extend(words[1..].iter().cloned());
                }
                for channel in &words[1..] {
                    subscribed += 1;
                    out.push_str(&format!(
                        "*3\r\n{}{}:{subscribed}\r\n",
                        bulk(&kind),
                        bulk(channel)
                    ));
                }
                out
            }
            Some("QUIT") => {
                let _ = writer.lock().unwrap().write_all(b"+OK\r\n");
                break;
            }
            _ => "+OK\r\n".to_owned(),
        };
        if writer.lock().unwrap().write_all(reply.as_bytes()).is_err() {
            break;
        }
    }
    subscribers
        .lock()
        .unwrap()
        .retain(|(w, _)| !Arc::ptr_eq(w, &writer));
}
