//! A Redis user without channel permissions (S22): waits and releases that need a channel are
//! refused with `Error::PermissionDenied`, every time, and a refused release changes nothing.

use redisson_lock_test_kit as common;

use std::time::Duration;

use common::{Admin, RedisServer};
use fred::interfaces::HashesInterface;
use redisson_lock::{Client, Config, Error};
use tokio::time::Instant;

async fn narrow_client(s: &RedisServer, admin: &Admin) -> Client {
    // Every command and key, no channel at all.
    admin
        .cmd(
            "ACL",
            vec![
                "SETUSER".into(),
                "narrow".into(),
                "on".into(),
                ">pw".into(),
                "~*".into(),
                "resetchannels".into(),
                "+@all".into(),
            ],
        )
        .await
        .unwrap();
    let url = format!("redis://narrow:pw@127.0.0.1:{}", s.port());
    Client::connect(&url, Config::default()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_without_channel_permission_is_refused_every_time() {
    let s = RedisServer::start();
    let admin = Admin::connect(&s.url()).await;
    let narrow = narrow_client(&s, &admin).await;
    let holder = Client::connect(&s.url(), Config::default()).await.unwrap();
    let _held = holder.get_lock("perm:wait").lock().await.unwrap();
    for round in 0..3 {
        let started = Instant::now();
        let r = narrow
            .get_lock("perm:wait")
            .try_lock_for(Duration::from_secs(5))
            .await;
        match r {
            Err(Error::PermissionDenied(f)) => {
                assert!(
                    f.message().contains("redisson_lock__channel:{perm:wait}"),
                    "{f}"
                )
            }
            other => panic!("round {round}: {other:?} after {:?}", started.elapsed()),
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "round {round}: refused at once, not after polling"
        );
    }
    // A spin lock needs no channel: it works for this user.
    let spin = narrow.get_spin_lock("perm:spin");
    spin.lock().await.unwrap().unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_that_may_not_publish_is_refused_with_nothing_changed() {
    let s = RedisServer::start();
    let admin = Admin::connect(&s.url()).await;
    let narrow = narrow_client(&s, &admin).await;
    for (name, kind) in [
        ("perm:r", "reentrant"),
        ("perm:f", "fair"),
        ("perm:w", "write"),
    ] {
        let (field, outcome) = match kind {
            "reentrant" => {
                let lock = narrow.get_lock(name);
                let g = lock.try_lock().await.unwrap().expect("free");
                (g.owner_field().to_owned(), g.unlock().await)
            }
            "fair" => {
                let lock = narrow.get_fair_lock(name);
                let g = lock.try_lock().await.unwrap().expect("free");
                (g.owner_field().to_owned(), g.unlock().await)
            }
            _ => {
                let rw = narrow.get_read_write_lock(name);
                let g = rw.write_lock().try_lock().await.unwrap().expect("free");
                (g.owner_field().to_owned(), g.unlock().await)
            }
        };
        assert!(
            matches!(outcome, Err(Error::PermissionDenied(_))),
            "{kind}: {outcome:?}"
        );
        let count: Option<String> = admin.redis.hget(name, field.as_str()).await.unwrap();
        assert_eq!(
            count.as_deref(),
            Some("1"),
            "{kind}: the refused release changed nothing"
        );
        assert!(admin.pttl(name).await > 0);
    }
}

/// Every `log` record of this test binary, for the once-at-connect report.
struct Capture;
static LOGGED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        LOGGED
            .lock()
            .unwrap()
            .push(format!("{} {}", record.level(), record.args()));
    }
    fn flush(&self) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_refused_subscribe_and_publish_outright_is_told_at_connect_and_refused_before_sending(
) {
    static CAPTURE: Capture = Capture;
    if log::set_logger(&CAPTURE).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
    let s = RedisServer::start();
    let admin = Admin::connect(&s.url()).await;
    // Every key and channel, every command (ACL DRYRUN included) except the pub/sub ones.
    admin
        .cmd(
            "ACL",
            [
                "SETUSER",
                "nopubsub",
                "on",
                ">pw",
                "~*",
                "&*",
                "+@all",
                "-subscribe",
                "-ssubscribe",
                "-publish",
                "-spublish",
            ]
            .into_iter()
            .map(Into::into)
            .collect(),
        )
        .await
        .unwrap();
    let url = format!("redis://nopubsub:pw@127.0.0.1:{}", s.port());
    let narrow = Client::connect(&url, Config::default()).await.unwrap();
    let reports: Vec<String> = LOGGED
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains("user nopubsub may not run"))
        .cloned()
        .collect();
    assert_eq!(reports.len(), 1, "reported once at connect: {reports:?}");
    assert!(
        reports[0].contains("SUBSCRIBE") && reports[0].contains("PUBLISH"),
        "{reports:?}"
    );

    // A wait for a held lock: one acquisition attempt, then refused without any SUBSCRIBE or
    // permission script.
    let holder = Client::connect(&s.url(), Config::default()).await.unwrap();
    let _held = holder.get_lock("perm:dry").lock().await.unwrap();
    admin.reset_stats().await;
    let r = narrow
        .get_lock("perm:dry")
        .try_lock_for(Duration::from_secs(30))
        .await;
    match r {
        Err(Error::PermissionDenied(f)) => assert!(
            f.message().contains("ACL DRYRUN") && f.message().contains("SUBSCRIBE"),
            "{f}"
        ),
        other => panic!("{other:?}"),
    }
    let calls = admin.all_command_calls().await;
    assert_eq!(calls.get("evalsha").copied(), Some(1), "{calls:?}");
    assert_eq!(calls.get("subscribe"), None, "{calls:?}");

    // Its own lock: acquired, but the release is refused before anything is sent, and the
    // hold is left exactly as it was.
    let lock = narrow.get_lock("perm:dry-own");
    let g = lock.try_lock().await.unwrap().expect("free");
    let field = g.owner_field().to_owned();
    admin.reset_stats().await;
    let outcome = g.unlock().await;
    match outcome {
        Err(Error::PermissionDenied(f)) => assert!(f.message().contains("PUBLISH"), "{f}"),
        other => panic!("{other:?}"),
    }
    let calls = admin.all_command_calls().await;
    assert_eq!(calls.get("evalsha"), None, "nothing sent: {calls:?}");
    let count: Option<String> = admin
        .redis
        .hget("perm:dry-own", field.as_str())
        .await
        .unwrap();
    assert_eq!(count.as_deref(), Some("1"));

    // A spin lock needs neither: it works for this user.
    let spin = narrow.get_spin_lock("perm:dry-spin");
    spin.lock().await.unwrap().unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_refused_script_load_connects_and_its_scripts_go_by_eval() {
    let s = RedisServer::start();
    let admin = Admin::connect(&s.url()).await;
    admin
        .cmd(
            "ACL",
            [
                "SETUSER",
                "noload",
                "on",
                ">pw",
                "~*",
                "&*",
                "+@all",
                "-script|load",
            ]
            .into_iter()
            .map(Into::into)
            .collect(),
        )
        .await
        .unwrap();
    admin.cmd("SCRIPT", vec!["FLUSH".into()]).await.unwrap();
    let url = format!("redis://noload:pw@127.0.0.1:{}", s.port());
    let client = Client::connect(&url, Config::default()).await.unwrap();
    let lock = client.get_lock("perm:noload");
    let g = lock.lock().await.unwrap();
    assert_eq!(admin.hgetall("perm:noload").await.len(), 1);
    g.unlock().await.unwrap();
    assert!(!admin.exists("perm:noload").await);
    assert!(admin.command_calls("eval").await >= 2, "sent by EVAL");
}
