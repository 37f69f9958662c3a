//! What the servers say about the replicas: how many can acknowledge a `WAIT` (`INFO
//! replication`), and whether one the sentinels list for a promoted master is alive.

use std::{collections::HashMap, time::Duration};

use fred::types::Value;

use super::memory::Master;
use crate::conn::connect::Sentinels;

/// Whether a replica the sentinels list for `master` (the master the client reached after a
/// failover) is alive: a server whose address accepts a connection, among those no sentinel
/// that answered holds down (`s_down`, `o_down`), the master itself and servers that still
/// report the role of a master (`role-reported`) left out. A stopped
/// process still accepts (its kernel does), a dead one refuses: a replica that may still
/// attach counts, the old master killed for good does not. `None` when no sentinel answered
/// (or on a deployment without sentinels). Bounded by `within` for the sentinels, and again
/// for the connections.
pub(super) async fn replicas_alive(
    sentinels: Option<&Sentinels>,
    master: &Master,
    within: Duration,
) -> Option<bool> {
    let sentinels = sentinels?;
    let replies = sentinels
        .ask(&["replicas", sentinels.master.as_str()], within)
        .await;
    let lists: Vec<Vec<Value>> = replies
        .into_iter()
        .filter_map(|reply| reply.convert::<Vec<Value>>().ok())
        .collect();
    if lists.is_empty() {
        return None;
    }
    let listed: Vec<Vec<(String, String)>> =
        lists.into_iter().flatten().filter_map(fields).collect();
    let candidates = candidates(&listed, master);
    let probes = candidates.iter().map(|(host, port)| async move {
        matches!(
            tokio::time::timeout(
                within,
                tokio::net::TcpStream::connect((host.as_str(), *port))
            )
            .await,
            Ok(Ok(_))
        )
    });
    Some(
        futures::future::join_all(probes)
            .await
            .into_iter()
            .any(|up| up),
    )
}

/// One replica's fields in a `SENTINEL replicas` reply (a flat list of names and values in
/// RESP2, a map in RESP3).
fn fields(replica: Value) -> Option<Vec<(String, String)>> {
    let map: HashMap<String, String> = replica.convert().ok()?;
    Some(map.into_iter().collect())
}

/// The addresses of the replicas worth asking (see [`replicas_alive`]): listed, not held down,
/// not `master`, not reporting the role of a master.
fn candidates<'a>(
    listed: impl IntoIterator<Item = &'a Vec<(String, String)>>,
    master: &Master,
) -> Vec<(String, u16)> {
    let mut out: Vec<(String, u16)> = Vec::new();
    for replica in listed {
        let get = |name: &str| {
            replica
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let (Some(host), Some(port)) = (get("ip"), get("port").and_then(|p| p.parse().ok())) else {
            continue;
        };
        let down =
            get("flags").is_some_and(|f| f.split(',').any(|f| f == "s_down" || f == "o_down"));
        // A server listed as a replica that still says it is a master (the old master of a
        // graceful failover, until the sentinels reconfigure it, about 10 s later) can
        // acknowledge nothing before it has become a replica and synced: not waited for.
        let still_master = get("role-reported") == Some("master");
        let is_master = master
            .as_ref()
            .is_some_and(|m| &*m.host == host && m.port == port);
        if !down && !still_master && !is_master && !out.iter().any(|(h, p)| h == host && *p == port)
        {
            out.push((host.to_owned(), port));
        }
    }
    out
}

/// The replicas that can acknowledge a `WAIT`: the `slave<i>:` lines of `INFO replication` with
/// `state=online`. `connected_slaves` also counts replicas still in their full sync
/// (`wait_bgsave`, `send_bulk`), which acknowledge nothing until it ends; counting them would
/// make every acquisition wait out the sync timeout and fail `NotReplicated`.
pub(crate) fn online_replicas(info: &str) -> u64 {
    let online = info
        .lines()
        .filter_map(|l| {
            let (name, fields) = l.trim().split_once(':')?;
            let index = name.strip_prefix("slave")?;
            (!index.is_empty() && index.bytes().all(|b| b.is_ascii_digit())).then_some(fields)
        })
        .filter(|fields| fields.split(',').any(|f| f.trim() == "state=online"))
        .count();
    online as u64
}

#[cfg(test)]
mod tests {
    use fred::types::config::Server;

    use super::*;

    #[test]
    fn the_replica_count_is_read_from_info_replication() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:3\r\n\
            slave0:ip=127.0.0.1,port=7001,state=online,offset=42,lag=0\r\n\
            slave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0\r\n\
            slave2:ip=127.0.0.1,port=7003,state=send_bulk,offset=0,lag=1\r\n\
            slave_read_repl_offset:42\r\nmaster_repl_offset:42\r\n";
        assert_eq!(online_replicas(info), 1, "only the online replica");
        assert_eq!(online_replicas("role:master\r\nconnected_slaves:0\r\n"), 0);
        assert_eq!(
            online_replicas(
                "slave0:ip=a,port=1,state=online\r\nslave1:ip=b,port=2,state=online\r\n"
            ),
            2
        );
    }

    #[test]
    fn the_replicas_worth_asking_are_listed_up_and_not_the_master() {
        let replica = |host: &str, port: &str, flags: &str| {
            vec![
                ("name".to_owned(), format!("{host}:{port}")),
                ("ip".to_owned(), host.to_owned()),
                ("port".to_owned(), port.to_owned()),
                ("flags".to_owned(), flags.to_owned()),
            ]
        };
        let listed = [
            replica("127.0.0.1", "7001", "slave,disconnected"),
            replica("127.0.0.1", "7002", "slave"),
            replica("127.0.0.1", "7003", "s_down,slave,disconnected"),
            replica("127.0.0.1", "7004", "o_down,slave"),
            replica("127.0.0.1", "7001", "slave"),
            vec![("ip".to_owned(), "127.0.0.1".to_owned())],
        ];
        assert_eq!(
            candidates(&listed, &Some(Server::new("127.0.0.1", 7002))),
            vec![("127.0.0.1".to_owned(), 7001)]
        );
    }

    #[test]
    fn a_listed_replica_that_still_reports_the_master_role_is_not_worth_asking() {
        let replica = |port: &str, role: &str| {
            vec![
                ("ip".to_owned(), "127.0.0.1".to_owned()),
                ("port".to_owned(), port.to_owned()),
                ("flags".to_owned(), "slave".to_owned()),
                ("role-reported".to_owned(), role.to_owned()),
            ]
        };
        let listed = [replica("7001", "master"), replica("7002", "slave")];
        assert_eq!(
            candidates(&listed, &None),
            vec![("127.0.0.1".to_owned(), 7002)]
        );
    }
}
