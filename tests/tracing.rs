//! The `tracing` feature against a real redis-server: a span per acquisition with its fields,
//! and a `lock lost` event, read back through a recording subscriber.
#![cfg(feature = "tracing")]

use redisson_lock_test_kit as common;

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use common::{Admin, RedisServer};
use fred::interfaces::KeysInterface;
use redisson_lock::{Client, Config};
use tracing::{
    field::{Field, Visit},
    span, Event, Metadata, Subscriber,
};

type Fields = BTreeMap<String, String>;

#[derive(Default)]
struct Seen {
    spans: Mutex<BTreeMap<u64, (String, Fields)>>,
    events: Mutex<Vec<Fields>>,
    next: AtomicU64,
}

struct Collect<'a>(&'a mut Fields);

impl Visit for Collect<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(
            field.name().to_owned(),
            format!("{value:?}").trim_matches('"').into(),
        );
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

struct Recorder(Arc<Seen>);

impl Subscriber for Recorder {
    fn enabled(&self, meta: &Metadata<'_>) -> bool {
        meta.target().starts_with("redisson_lock")
    }
    fn new_span(&self, attrs: &span::Attributes<'_>) -> span::Id {
        let id = self.0.next.fetch_add(1, Ordering::SeqCst) + 1;
        let mut fields = Fields::new();
        attrs.record(&mut Collect(&mut fields));
        let name = attrs.metadata().name().to_owned();
        self.0.spans.lock().unwrap().insert(id, (name, fields));
        span::Id::from_u64(id)
    }
    fn record(&self, id: &span::Id, values: &span::Record<'_>) {
        if let Some((_, fields)) = self.0.spans.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Collect(fields));
        }
    }
    fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Fields::new();
        event.record(&mut Collect(&mut fields));
        self.0.events.lock().unwrap().push(fields);
    }
    fn enter(&self, _: &span::Id) {}
    fn exit(&self, _: &span::Id) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_have_spans_and_losses_have_events() {
    let seen = Arc::new(Seen::default());
    tracing::subscriber::set_global_default(Recorder(seen.clone())).unwrap();
    let s = RedisServer::start();
    let admin = Admin::connect(&s.url()).await;
    let config = Config::default().lock_watchdog_timeout(Duration::from_millis(600));
    let client = Client::connect(&s.url(), config).await.unwrap();

    let lock = client.get_fair_lock_with_owner("t:span", redisson_lock::Owner::new());
    let guard = lock.lock().await.unwrap();
    let busy = client
        .get_fair_lock_with_owner("t:span", redisson_lock::Owner::new())
        .try_lock_for(Duration::from_millis(50))
        .await
        .unwrap();
    assert!(busy.is_none());

    let spans: Vec<Fields> = seen
        .spans
        .lock()
        .unwrap()
        .values()
        .filter(|(name, f)| {
            name == "acquire" && f.get("lock").map(String::as_str) == Some("t:span")
        })
        .map(|(_, f)| f.clone())
        .collect();
    assert_eq!(spans.len(), 2, "{spans:?}");
    assert_eq!(spans[0]["kind"], "fair");
    assert_eq!(spans[0]["owner"], lock.owner_field());
    assert_eq!(spans[0]["outcome"], "acquired");
    assert!(spans[0].contains_key("waited_ms"));
    assert_eq!(spans[1]["outcome"], "not_acquired");
    assert_eq!(spans[1]["wait_ms"], "50");
    assert!(
        !spans[0].contains_key("wait_ms"),
        "lock() has no wait limit"
    );

    let _: i64 = admin.redis.del("t:span").await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("lost");
    let events = seen.events.lock().unwrap().clone();
    let lost = events
        .iter()
        .find(|e| e.get("message").map(String::as_str) == Some("lock lost"))
        .expect("a lock lost event");
    assert_eq!(lost["lock"], "t:span");
    assert_eq!(lost["owner"], lock.owner_field());
    assert_eq!(lost["reason"], "renewal found it gone");
}
