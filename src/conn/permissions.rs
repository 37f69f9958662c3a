//! What this client's Redis user may not do, learned once at connect.
//!
//! Where the server allows it (Redis ≥ 7 and a user granted `ACL DRYRUN`), the client asks the
//! server, for its own user, whether the commands the locks need would run: `EVALSHA` (every lock
//! operation), `SUBSCRIBE`/`SSUBSCRIBE` (waiting for an unlock message) and
//! `PUBLISH`/`SPUBLISH` (announcing a release). A command refused *outright* ("no permissions
//! to run the 'publish' command") is refused for every lock, so the operations that need it
//! fail at once with [`Error::PermissionDenied`], before anything is sent. A refusal that
//! depends on the key or channel (ACL key and channel patterns) is not known for a lock until
//! its name is: those are checked per lock, by the server, before anything is written (the
//! publishing scripts call `check_notify` first; the subscription registry asks
//! `can_subscribe.lua` before it subscribes).
//!
//! The findings are logged once, at connect. A user that may not run `ACL DRYRUN` (the usual
//! narrow user: it is an `@dangerous` command), or a server older than 7, gives no findings;
//! then every check is the per-lock one.

use fred::{
    interfaces::ClientLike,
    types::{ClusterHash, CustomCommand, Value},
};

use crate::{conn::cluster::Messaging, error::Error};

/// What a lock operation needs from the server's ACL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Running the lock scripts (`EVALSHA`).
    Scripts,
    /// Listening for unlock messages (`SUBSCRIBE` or `SSUBSCRIBE`).
    Listen,
    /// Announcing a release (`PUBLISH` or `SPUBLISH`).
    Announce,
}

impl Need {
    fn what(self) -> &'static str {
        match self {
            Need::Scripts => "run the lock scripts",
            Need::Listen => "wait for unlock messages",
            Need::Announce => "announce a release to waiters",
        }
    }
}

/// One probed command and the server's answer to `ACL DRYRUN` for it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Answer {
    /// The command would run.
    Allowed,
    /// The user may not run the command at all, whatever the arguments.
    Refused(String),
    /// The command is allowed, but not for the probe's key or channel: whether it runs for a
    /// given lock depends on that lock's name.
    DependsOnName(String),
}

/// Reads one `ACL DRYRUN` reply: `OK`, or a sentence saying why the command would be refused.
fn answer(reply: &str) -> Answer {
    if reply.eq_ignore_ascii_case("OK") {
        Answer::Allowed
    } else if reply.contains("permissions to run") {
        Answer::Refused(reply.to_owned())
    } else {
        Answer::DependsOnName(reply.to_owned())
    }
}

/// The commands refused outright to this client's user, as far as the server told.
#[derive(Debug, Clone, Default)]
pub(crate) struct Permissions {
    /// `(need, command, the server's sentence)` for every refusal.
    refused: Vec<(Need, &'static str, String)>,
}

impl Permissions {
    /// Nothing known to be refused (no probe, or everything allowed).
    pub(crate) fn unknown() -> Self {
        Self::default()
    }

    /// Fails with [`Error::PermissionDenied`] when the server said the user may not run a
    /// command that `need` requires; `lock` names the lock in the message.
    pub(crate) fn check(&self, need: Need, lock: &str) -> crate::error::Result<()> {
        match self.refused.iter().find(|(n, _, _)| *n == need) {
            None => Ok(()),
            Some((_, command, sentence)) => Err(Error::PermissionDenied(
                format!(
                    "lock {lock}: this Redis user may not {} (ACL DRYRUN at connect: {sentence}; \
                     the user needs the {command} command)",
                    need.what()
                )
                .into(),
            )),
        }
    }

    /// Asks the server with `ACL DRYRUN`, for the user this client authenticated as, about every
    /// command the locks need; logs what it learns once. Never fails: a user that may not ask,
    /// or a server that does not know the command, yields [`Permissions::unknown`].
    pub(crate) async fn probe<C: ClientLike>(
        redis: &C,
        messaging: Messaging,
        sha1: &str,
    ) -> Permissions {
        let user = match custom(redis, "ACL", vec!["WHOAMI".into()]).await {
            Ok(v) => match v.as_string() {
                Some(u) => u,
                None => return Permissions::unknown(),
            },
            Err(e) => {
                log::debug!("ACL WHOAMI refused ({e:#}); permissions are checked per lock");
                return Permissions::unknown();
            }
        };
        // A key and a channel the way a lock named `redisson-lock:acl-probe` would use them.
        let key = "redisson-lock:acl-probe";
        let channel = crate::types::names::lock_channel(key);
        let mut probes: Vec<(Need, &'static str, Vec<Value>)> = vec![(
            Need::Scripts,
            "EVALSHA",
            vec![sha1.into(), 1.into(), key.into()],
        )];
        if messaging.classic {
            probes.push((Need::Listen, "SUBSCRIBE", vec![channel.as_str().into()]));
            probes.push((
                Need::Announce,
                "PUBLISH",
                vec![channel.as_str().into(), "0".into()],
            ));
        }
        if messaging.sharded {
            probes.push((Need::Listen, "SSUBSCRIBE", vec![channel.as_str().into()]));
            probes.push((
                Need::Announce,
                "SPUBLISH",
                vec![channel.as_str().into(), "0".into()],
            ));
        }
        let mut permissions = Permissions::unknown();
        let mut depends = Vec::new();
        // All at once: one round trip's wait, whatever the number of probes.
        let replies = futures::future::join_all(probes.into_iter().map(|(need, command, args)| {
            let mut line: Vec<Value> = vec!["DRYRUN".into(), user.as_str().into(), command.into()];
            line.extend(args);
            async move { (need, command, custom(redis, "ACL", line).await) }
        }))
        .await;
        for (need, command, reply) in replies {
            let reply = match reply {
                Ok(v) => v.as_string().unwrap_or_default(),
                Err(e) => {
                    // NOPERM for ACL DRYRUN itself, or a server older than 7.
                    log::debug!(
                        "ACL DRYRUN is not available to this client ({e:#}); permissions are \
                         checked per lock"
                    );
                    return Permissions::unknown();
                }
            };
            match answer(&reply) {
                Answer::Allowed => {}
                Answer::Refused(sentence) => permissions.refused.push((need, command, sentence)),
                Answer::DependsOnName(sentence) => depends.push(format!("{command}: {sentence}")),
            }
        }
        if !permissions.refused.is_empty() {
            let what: Vec<String> = permissions
                .refused
                .iter()
                .map(|(need, command, _)| format!("{command} (to {})", need.what()))
                .collect();
            log::warn!(
                "Redis user {user} may not run {}; lock operations that need it are refused at \
                 once with PermissionDenied",
                what.join(", ")
            );
        }
        if !depends.is_empty() {
            log::info!(
                "Redis user {user} is limited to some keys or channels ({}); each lock is \
                 checked by the server before anything is written",
                depends.join("; ")
            );
        }
        permissions
    }
}

/// A command fred has no typed method for, sent to any node.
async fn custom<C: ClientLike>(
    redis: &C,
    command: &'static str,
    args: Vec<Value>,
) -> std::result::Result<Value, fred::error::Error> {
    redis
        .custom(
            CustomCommand::new_static(command, ClusterHash::Random, false),
            args,
        )
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dryrun_sentences_read_as_refused_outright_or_per_name() {
        assert_eq!(answer("OK"), Answer::Allowed);
        assert!(matches!(
            answer("This user has no permissions to run the 'publish' command"),
            Answer::Refused(_)
        ));
        assert!(matches!(
            answer("This user has no permissions to access the 'x' channel"),
            Answer::DependsOnName(_)
        ));
        assert!(matches!(
            answer("This user has no permissions to access the 'k' key"),
            Answer::DependsOnName(_)
        ));
    }

    #[test]
    fn a_refused_need_fails_with_permission_denied_naming_the_lock_and_command() {
        let p = Permissions {
            refused: vec![(
                Need::Announce,
                "PUBLISH",
                "This user has no permissions to run the 'publish' command".into(),
            )],
        };
        assert!(p.check(Need::Scripts, "a").is_ok());
        assert!(p.check(Need::Listen, "a").is_ok());
        let e = p.check(Need::Announce, "orders:1").unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::PermissionDenied);
        let text = e.to_string();
        assert!(
            text.contains("orders:1") && text.contains("PUBLISH"),
            "{text}"
        );
        assert!(Permissions::unknown().check(Need::Announce, "a").is_ok());
    }
}
