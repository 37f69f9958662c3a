//! What the sentinels say, read: the channels of their failover events, and one message as
//! an [`Event`] about the watched master (or nothing). Pure: no connection here.

use fred::types::Value;

/// The sentinel events the watcher listens to.
pub(super) const CHANNELS: [&str; 7] = [
    "+try-failover",
    "+switch-master",
    "-failover-abort-not-elected",
    "-failover-abort-no-good-slave",
    "-failover-abort-slave-timeout",
    "+failover-end-for-timeout",
    "+reset-master",
];

/// A server's address as the sentinels announce it.
pub(super) type Addr = (String, u16);

/// One sentinel event about the watched master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Event {
    /// A sentinel started a failover attempt of the master at `of`.
    Began { of: Addr },
    /// A sentinel gave its attempt up.
    Abandoned,
    /// The master moved from `from` to `to`.
    Switched { from: Addr, to: Addr },
    /// The sentinel was reset (`SENTINEL RESET`): it forgot its attempt, if any; ask the
    /// sentinels again.
    Reset,
    /// Some of the sentinel's events were missed (the receiver lagged): ask the sentinels
    /// again.
    Missed,
}

/// The master name an event's payload concerns, and that master's address: `master <name>
/// <ip> <port>` for events of a master, `<type> <name> <ip> <port> @ <master> <ip> <port>` for
/// others.
fn master_named(payload: &str) -> Option<(&str, Addr)> {
    let mut words = payload.split_whitespace();
    let mut rest = match words.next()? {
        "master" => words,
        _ => payload.split(" @ ").nth(1)?.split_whitespace(),
    };
    let name = rest.next()?;
    let host = rest.next()?;
    let port = rest.next()?.parse().ok()?;
    Some((name, (host.to_owned(), port)))
}

/// Reads one message of `channel` about `master` (`None`: another master, or unreadable).
pub(super) fn parse(channel: &str, payload: &str, master: &str) -> Option<Event> {
    if channel == "+switch-master" {
        // <name> <old ip> <old port> <new ip> <new port>
        let words: Vec<&str> = payload.split_whitespace().collect();
        return match words.as_slice() {
            [name, old_host, old_port, host, port] if *name == master => Some(Event::Switched {
                from: ((*old_host).to_owned(), old_port.parse().ok()?),
                to: ((*host).to_owned(), port.parse().ok()?),
            }),
            _ => None,
        };
    }
    let (name, of) = master_named(payload)?;
    if name != master {
        return None;
    }
    match channel {
        "+try-failover" => Some(Event::Began { of }),
        "+reset-master" => Some(Event::Reset),
        c if c.starts_with("-failover-abort") || c == "+failover-end-for-timeout" => {
            Some(Event::Abandoned)
        }
        _ => None,
    }
}

/// The text of a message's payload (`None` for a payload that is not text).
pub(super) fn payload_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.to_string()),
        Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_of_the_watched_master_are_read_and_others_ignored() {
        assert_eq!(
            parse("+try-failover", "master m 127.0.0.1 17001", "m"),
            Some(Event::Began {
                of: ("127.0.0.1".into(), 17001)
            })
        );
        assert_eq!(
            parse("+try-failover", "master other 127.0.0.1 1", "m"),
            None
        );
        assert_eq!(
            parse("+switch-master", "m 127.0.0.1 17001 127.0.0.1 17002", "m"),
            Some(Event::Switched {
                from: ("127.0.0.1".into(), 17001),
                to: ("127.0.0.1".into(), 17002)
            })
        );
        assert_eq!(
            parse("+switch-master", "mm 127.0.0.1 1 127.0.0.1 2", "m"),
            None
        );
        assert_eq!(
            parse("+switch-master", "m 127.0.0.1 1 127.0.0.1", "m"),
            None
        );
        assert_eq!(
            parse("-failover-abort-not-elected", "master m 127.0.0.1 1", "m"),
            Some(Event::Abandoned)
        );
        assert_eq!(
            parse(
                "-failover-abort-slave-timeout",
                "slave 127.0.0.1:2 127.0.0.1 2 @ m 127.0.0.1 1",
                "m"
            ),
            Some(Event::Abandoned)
        );
        assert_eq!(
            parse("+failover-end-for-timeout", "master m 127.0.0.1 1", "m"),
            Some(Event::Abandoned)
        );
        assert_eq!(
            parse("+reset-master", "master m 127.0.0.1 1", "m"),
            Some(Event::Reset)
        );
        assert_eq!(parse("+try-failover", "", "m"), None);
    }

    #[test]
    fn a_payload_is_read_as_text_whatever_its_encoding() {
        assert_eq!(
            payload_text(&Value::from("master m 1.2.3.4 1")).as_deref(),
            Some("master m 1.2.3.4 1")
        );
        assert_eq!(
            payload_text(&Value::Bytes(b"m \xff".to_vec().into())).as_deref(),
            Some("m \u{fffd}")
        );
        assert_eq!(payload_text(&Value::Integer(1)), None);
    }
}
