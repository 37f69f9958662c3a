//! A semaphore, a permit-expirable semaphore or a count-down latch, read from its keys (sync
//! protocol §2–4) and told apart by what is there and who waits on which channel.

use fred::{clients::Client as Redis, types::Value};

use super::{
    model::{Inspection, Permit},
    redis::{braced, cmd, subscribers, text, ttl_ms, Result},
};

/// The score of a permit acquired without a lease (sync protocol §3.1).
const NO_LEASE: i64 = 922_337_203_685_477;
/// A semaphore, a permit-expirable semaphore or a count-down latch named `name` (sync protocol
/// §2–4): an integer string `N`, and for the permit-expirable semaphore the sorted set
/// `{N}:timeout`. `None` when neither is there (not a synchronizer). A semaphore and a latch
/// look alike in Redis: the waiters on their channels tell them apart when there are any.
pub async fn inspect(redis: &Redis, name: &str, key_type: &str) -> Result<Option<Inspection>> {
    let b = braced(name);
    let timeouts = format!("{b}:timeout");
    let value = match key_type {
        "string" => match text(&cmd(redis, "GET", vec![name.into()]).await?).parse::<i64>() {
            Ok(v) => Some(v),
            Err(_) => return Ok(None),
        },
        _ => None,
    };
    let expirable = text(&cmd(redis, "TYPE", vec![timeouts.as_str().into()]).await?) == "zset";
    if value.is_none() && !expirable {
        return Ok(None);
    }
    let mut out = Inspection {
        name: name.to_owned(),
        exists: value.is_some(),
        value,
        ..Default::default()
    };
    if out.exists {
        out.ttl_ms = ttl_ms(redis, name).await?;
    }
    let semaphore_channel = format!("redisson_sc:{b}");
    let latch_channel = format!("redisson_countdownlatch__channel__{{{name}}}");
    if expirable {
        out.kind = "permit-expirable-semaphore";
        out.now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let scores = cmd(
            redis,
            "ZRANGE",
            vec![timeouts.into(), 0.into(), (-1).into(), "WITHSCORES".into()],
        )
        .await?
        .into_array();
        for pair in scores.chunks(2) {
            let id: String = pair[0]
                .as_bytes()
                .unwrap_or_default()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let score = pair
                .get(1)
                .and_then(Value::as_string)
                .and_then(|s| s.parse::<f64>().ok())
                .map(|f| f as i64);
            out.permits.push(Permit {
                id,
                expires_ms: score.filter(|s| *s != NO_LEASE),
            });
        }
        out.channels = subscribers(redis, &[semaphore_channel]).await?;
        return Ok(Some(out));
    }
    // The latch channel's hash tag may differ from N's (a name with `}`): counted apart.
    let mut channels = subscribers(redis, std::slice::from_ref(&semaphore_channel)).await?;
    channels.extend(subscribers(redis, std::slice::from_ref(&latch_channel)).await?);
    let (semaphore, latch) = (channels[0].1, channels[1].1);
    out.kind = match (semaphore > 0, latch > 0) {
        (true, false) => "semaphore",
        (false, true) => "count-down-latch",
        _ => "semaphore-or-latch",
    };
    out.channels = match out.kind {
        "semaphore" => vec![channels[0].clone()],
        "count-down-latch" => vec![channels[1].clone()],
        _ => channels,
    };
    Ok(Some(out))
}
