//! Authentication against a real redis-server with ACL users: password rotation through a
//! `Credentials` handle (used by the next reconnect of the command and subscriber connections),
//! a wrong password and a disabled user (typed error, fast, no retry storm), and the secrets
//! guarantee: no password in any log line at TRACE (the crate's and fred's `log` records, and
//! `tracing` events with the feature), nor in any error, `Config`, `Client` or `Credentials`
//! `Debug`/`Display`. Every test name contains `secret`.

use redisson_lock_test_kit as common;

use std::{
    fmt::Write as _,
    sync::{Mutex, OnceLock},
    time::Duration,
};

use common::{Admin, RedisServer};
use fred::types::Value;
use redisson_lock::{Client, Config, Credentials, Error, ErrorKind};
use tokio::time::Instant;

/// Every password these tests use: none may appear in any captured text.
const OLD: &str = "pw-Rot8-Old-7Qx";
const NEW: &str = "pw-Rot8-New-9Zk";
const WRONG: &str = "pw-Wr0ng-3Hd";
const RIGHT: &str = "pw-R1ght-5Mv";
const PASSWORDS: [&str; 4] = [OLD, NEW, WRONG, RIGHT];

// ---- capture of every log record and tracing event in this test process ----

fn captured() -> &'static Mutex<String> {
    static BUF: OnceLock<Mutex<String>> = OnceLock::new();
    BUF.get_or_init(|| Mutex::new(String::new()))
}

struct LogCapture;

impl log::Log for LogCapture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        let mut buf = captured().lock().unwrap();
        let _ = writeln!(
            buf,
            "[log {} {}] {}",
            record.level(),
            record.target(),
            record.args()
        );
    }
    fn flush(&self) {}
}

#[cfg(feature = "tracing")]
mod trace_capture {
    use super::captured;
    use std::fmt::Write as _;
    use std::sync::atomic::{AtomicU64, Ordering};
    use tracing::{field::Field, field::Visit, span, Event, Metadata, Subscriber};

    struct Text(String);
    impl Visit for Text {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }

    pub struct Everything(pub AtomicU64);
    impl Subscriber for Everything {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, attrs: &span::Attributes<'_>) -> span::Id {
            let mut t = Text(format!("[span {}]", attrs.metadata().name()));
            attrs.record(&mut t);
            captured().lock().unwrap().push_str(&(t.0 + "\n"));
            span::Id::from_u64(self.0.fetch_add(1, Ordering::Relaxed) + 1)
        }
        fn record(&self, _: &span::Id, values: &span::Record<'_>) {
            let mut t = Text("[span record]".into());
            values.record(&mut t);
            captured().lock().unwrap().push_str(&(t.0 + "\n"));
        }
        fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut t = Text(format!(
                "[event {} {}]",
                event.metadata().level(),
                event.metadata().target()
            ));
            event.record(&mut t);
            captured().lock().unwrap().push_str(&(t.0 + "\n"));
        }
        fn enter(&self, _: &span::Id) {}
        fn exit(&self, _: &span::Id) {}
    }
}

/// Installs the capture once per process, at TRACE for everything.
fn capture_everything() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        log::set_logger(&LogCapture).expect("no other logger in this test binary");
        log::set_max_level(log::LevelFilter::Trace);
        #[cfg(feature = "tracing")]
        tracing::subscriber::set_global_default(trace_capture::Everything(
            std::sync::atomic::AtomicU64::new(0),
        ))
        .expect("no other subscriber in this test binary");
    });
}

/// Records the `Display` and `Debug` of an error and of every error in its source chain.
fn show_error(out: &mut String, e: &Error) {
    let _ = writeln!(out, "{e} | {e:?} | {e:#?}");
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let _ = writeln!(out, "  source: {s} | {s:?}");
        source = s.source();
    }
}

// ---- the server side ----

async fn acl(admin: &Admin, args: &[&str]) {
    let args: Vec<Value> = args.iter().map(|a| (*a).into()).collect();
    admin.cmd("ACL", args).await.expect("ACL command");
}

/// A user allowed everything the locks need (every command, key and channel).
async fn add_user(admin: &Admin, user: &str, password: &str) {
    acl(
        admin,
        &[
            "SETUSER",
            user,
            "reset",
            "on",
            &format!(">{password}"),
            "~*",
            "&*",
            "+@all",
        ],
    )
    .await;
}

/// Failed `AUTH` and `HELLO` calls since start (`failed_calls` in `INFO commandstats`).
async fn auth_failures(admin: &Admin) -> u64 {
    let info = admin
        .cmd("INFO", vec!["commandstats".into()])
        .await
        .unwrap()
        .as_string()
        .unwrap();
    info.lines()
        .filter(|l| l.starts_with("cmdstat_auth:") || l.starts_with("cmdstat_hello:"))
        .filter_map(|l| {
            l.split(',')
                .find_map(|f| f.strip_prefix("failed_calls="))
                .and_then(|n| n.trim().parse::<u64>().ok())
        })
        .sum()
}

/// `ACL LOG` authentication failures of `user` (the `count` of its `reason=auth` entries).
async fn acl_log_auth_failures(admin: &Admin, user: &str) -> i64 {
    let entries = admin
        .cmd("ACL", vec!["LOG".into()])
        .await
        .unwrap()
        .into_array();
    entries
        .into_iter()
        .map(|e| {
            let kv = e.into_array();
            let get = |k: &str| {
                kv.chunks(2)
                    .find(|p| p[0].as_string().as_deref() == Some(k))
                    .and_then(|p| p.get(1).cloned())
            };
            let is_auth = get("reason").and_then(|v| v.as_string()).as_deref() == Some("auth");
            let of_user = get("username").and_then(|v| v.as_string()).as_deref() == Some(user);
            if is_auth && of_user {
                get("count").and_then(|v| v.as_i64()).unwrap_or(0)
            } else {
                0
            }
        })
        .sum()
}

/// Connections authenticated as `user`, by `CLIENT LIST` (`flags` of each).
async fn connections_of(admin: &Admin, user: &str) -> Vec<String> {
    let list = admin
        .cmd("CLIENT", vec!["LIST".into()])
        .await
        .unwrap()
        .as_string()
        .unwrap();
    let tag = format!(" user={user} ");
    list.lines()
        .filter(|l| l.contains(&tag))
        .map(|l| {
            l.split(' ')
                .find_map(|f| f.strip_prefix("flags="))
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

async fn kill_user(admin: &Admin, user: &str) -> i64 {
    admin
        .cmd("CLIENT", vec!["KILL".into(), "USER".into(), user.into()])
        .await
        .unwrap()
        .as_i64()
        .unwrap()
}

// ---- the scenarios (each returns the texts it produced, for the secrets check) ----

/// Rotation: the server's password and the client's `Credentials` change, the client's
/// connections are killed; the reconnects authenticate with the new password, and lock, wait
/// and wake-up work. A second client with the old password fixed in its config cannot reconnect.
async fn rotated_password_run() -> String {
    let mut seen = String::new();
    let s = RedisServer::start();
    let admin = Admin::connect(&s.url()).await;
    add_user(&admin, "rot", OLD).await;
    add_user(&admin, "fixed", OLD).await;
    let credentials = Credentials::new(Some("rot"), OLD);
    let config = Config::default()
        .credentials(credentials.clone())
        .reconnect_max_delay(Duration::from_millis(200));
    let _ = writeln!(seen, "{config:?} {config:#?} {credentials:?}");
    let client = Client::connect(&s.url(), config).await.expect("connect");
    let _ = writeln!(seen, "{client:?}");
    let fixed_url = format!("redis://fixed:{OLD}@127.0.0.1:{}", s.port());
    let fixed_config = Config::default().timeout(Duration::from_millis(1500));
    let fixed = Client::connect(&fixed_url, fixed_config.clone())
        .await
        .expect("connect with the old password");
    let _ = writeln!(seen, "{fixed_config:?} {fixed:?}");

    // Both of the client's connections exist (the subscriber one is opened at connect).
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            connections_of(&admin, "rot").await.len() == 2
        })
        .await,
        "command and subscriber connections of 'rot'"
    );
    client
        .get_lock("auth:before")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();

    // Rotate on the server, then in the application, then cut every connection of both users.
    for user in ["rot", "fixed"] {
        acl(&admin, &["SETUSER", user, "resetpass", &format!(">{NEW}")]).await;
    }
    credentials.rotate(NEW);
    let _ = writeln!(seen, "{credentials:?} {credentials:#?}");
    let failures_before = auth_failures(&admin).await;
    assert_eq!(kill_user(&admin, "rot").await, 2, "both connections cut");
    assert!(kill_user(&admin, "fixed").await >= 1);

    // Both connections come back, authenticated as 'rot' with the new password, and the
    // subscriber connection is a pub/sub one again once a waiter subscribes.
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            connections_of(&admin, "rot").await.len() == 2
        })
        .await,
        "reconnected: {:?}",
        connections_of(&admin, "rot").await
    );

    // Lock, wait and wake-up through the reconnected connections: the rotated client waits
    // (its subscriber connection re-authenticated) for a lock another client holds.
    let holder = Client::connect(&s.url(), Config::default()).await.unwrap();
    let held = holder.get_lock("auth:rotated").lock().await.unwrap();
    let waiter = {
        let lock = client.get_lock("auth:rotated");
        tokio::spawn(async move {
            let g = lock.try_lock_for(Duration::from_secs(20)).await?;
            Ok::<_, Error>((Instant::now(), g))
        })
    };
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            admin.numsub("redisson_lock__channel:{auth:rotated}").await == 1
        })
        .await,
        "the rotated client subscribed"
    );
    assert!(connections_of(&admin, "rot").await.iter().any(|f| f == "P"));
    let released = Instant::now();
    held.unlock().await.unwrap();
    let g = common::woke_within(waiter, released, Duration::from_secs(1))
        .await
        .expect("the rotated client got the lock");
    g.unlock().await.unwrap();
    let lock = client.get_lock("auth:after");
    let g = lock.lock().await.unwrap();
    assert!(lock.is_held_by_current().await.unwrap());
    g.unlock().await.unwrap();

    // The rotated client never offered a wrong password; the fixed one offers the old one and
    // is refused.
    let err = fixed
        .get_lock("auth:fixed")
        .try_lock()
        .await
        .expect_err("the old password no longer works");
    show_error(&mut seen, &err);
    assert!(
        matches!(
            err.kind(),
            ErrorKind::Timeout
                | ErrorKind::Connection
                | ErrorKind::PermissionDenied
                | ErrorKind::Ambiguous
        ),
        "{err:?}"
    );
    let failures = auth_failures(&admin).await - failures_before;
    println!(
        "auth failures after the rotation (all from the client with a fixed password): {failures}"
    );
    assert!(failures >= 1, "the fixed client tried its old password");
    assert_eq!(
        acl_log_auth_failures(&admin, "rot").await,
        0,
        "the rotated client never offered a wrong password"
    );
    assert!(acl_log_auth_failures(&admin, "fixed").await >= 1);
    fixed.shutdown().await;
    client.shutdown().await;
    holder.shutdown().await;
    seen
}

/// A wrong password and a disabled user, at connect: `PermissionDenied`, at once, with one
/// failed `AUTH` and no retry afterwards.
async fn refused_credentials_run() -> String {
    let mut seen = String::new();
    let s = RedisServer::start();
    let admin = Admin::connect(&s.url()).await;
    add_user(&admin, "alice", RIGHT).await;
    add_user(&admin, "off", RIGHT).await;
    acl(&admin, &["SETUSER", "off", "off"]).await;

    let cases = [
        (
            "wrong password in the URL",
            format!("redis://alice:{WRONG}@127.0.0.1:{}", s.port()),
            Config::default(),
        ),
        (
            "wrong password in the config",
            s.url(),
            Config::default().username("alice").password(WRONG),
        ),
        (
            "wrong password in a Credentials handle",
            s.url(),
            Config::default().credentials(Credentials::new(Some("alice"), WRONG)),
        ),
        (
            "disabled user",
            format!("redis://off:{RIGHT}@127.0.0.1:{}", s.port()),
            Config::default(),
        ),
    ];
    for (what, url, config) in cases {
        let config = config.connect_timeout(Duration::from_secs(5));
        let _ = writeln!(seen, "{config:?}");
        let before = auth_failures(&admin).await;
        let started = Instant::now();
        let err = Client::connect(&url, config).await.unwrap_err();
        let took = started.elapsed();
        show_error(&mut seen, &err);
        assert_eq!(err.kind(), ErrorKind::PermissionDenied, "{what}: {err:?}");
        // The server's reply is the error's source (said once in a report of the chain).
        let source = std::error::Error::source(&err).map(ToString::to_string);
        assert!(
            source.as_deref().is_some_and(|s| s.contains("WRONGPASS")),
            "{what}: {err} / {source:?}"
        );
        assert!(took < Duration::from_secs(2), "{what}: took {took:?}");
        // No retry in the background: the count stays where the one attempt left it.
        tokio::time::sleep(Duration::from_millis(700)).await;
        let attempts = auth_failures(&admin).await - before;
        println!("{what}: refused in {took:?} after {attempts} AUTH attempt(s)");
        assert!(
            (1..=2).contains(&attempts),
            "{what}: {attempts} AUTH attempts"
        );
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_rotated_password_is_used_on_the_next_reconnect() {
    capture_everything();
    rotated_password_run().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_wrong_password_and_disabled_user_fail_fast_without_retry_storm() {
    capture_everything();
    refused_credentials_run().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_config_and_credentials_cannot_both_set_the_password() {
    let err = Client::connect(
        "redis://127.0.0.1:1",
        Config::default()
            .password(WRONG)
            .credentials(Credentials::new(None::<String>, RIGHT)),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    let err = Client::connect(
        "redis://127.0.0.1:1",
        Config::default().sentinel_credentials(Credentials::new(None::<String>, RIGHT)),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(!format!("{err} {err:?}").contains(RIGHT));
}

/// The secrets guarantee over all three runs: every log record (TRACE, every target: the
/// crate's and fred's), every tracing event and span field (feature `tracing`), and every
/// error, `Config`, `Client` and `Credentials` text they produced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_passwords_never_appear_in_logs_errors_or_debug_output() {
    capture_everything();
    let mut seen = rotated_password_run().await;
    seen.push_str(&refused_credentials_run().await);
    let logs = captured().lock().unwrap().clone();
    assert!(
        logs.lines().count() > 50,
        "the capture works: {} lines",
        logs.lines().count()
    );
    assert!(
        logs.contains("[log TRACE fred"),
        "fred's TRACE records are captured"
    );
    for password in PASSWORDS {
        if let Some(line) = logs.lines().find(|l| l.contains(password)) {
            panic!("a password in a log line: {line}");
        }
        if let Some(line) = seen.lines().find(|l| l.contains(password)) {
            panic!("a password in an error or Debug text: {line}");
        }
    }
    println!(
        "checked {} log lines and {} error/Debug lines",
        logs.lines().count(),
        seen.lines().count()
    );
}
