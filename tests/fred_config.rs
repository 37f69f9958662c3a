//! A service already on fred connects the crate with its own fred configuration (feature
//! `fred-10`): the deployment, credentials and database are the fred configuration's, the
//! crate's own policies apply, and the locks are the same on the wire.
#![cfg(feature = "fred-10")]

use redisson_lock_test_kit as common;

use common::{Admin, RedisServer};
use redisson_lock::{fred, Client, Config, Error, TlsSettings};

#[tokio::test]
async fn a_services_fred_configuration_connects_the_crate() {
    let s = RedisServer::start();
    // A user of the service's own, with a password.
    let root = Admin::connect(&s.url()).await;
    let acl = ["SETUSER", "svc", "on", ">s3cret", "~*", "&*", "+@all"];
    root.cmd("ACL", acl.iter().map(|a| (*a).into()).collect())
        .await
        .unwrap();
    let url = format!("redis://svc:s3cret@127.0.0.1:{}/3", s.port());
    let service = fred::types::config::Config::from_url(&url).unwrap();
    let client = Client::connect_with_fred(&service, Config::default())
        .await
        .unwrap();
    let g = client.get_lock("fred:k").lock().await.unwrap();
    // The fred configuration's database and password: the lock is in database 3.
    let admin = Admin::connect(&url).await;
    assert_eq!(
        admin
            .hgetall("fred:k")
            .await
            .get(g.owner_field())
            .map(String::as_str),
        Some("1")
    );
    g.unlock().await.unwrap();
    assert!(!admin.exists("fred:k").await);
    client.shutdown().await;
}

#[tokio::test]
async fn tls_settings_beside_a_fred_configuration_are_refused() {
    let s = RedisServer::start();
    let service = fred::types::config::Config::from_url(&s.url()).unwrap();
    let refused =
        Client::connect_with_fred(&service, Config::default().tls(TlsSettings::default()))
            .await
            .unwrap_err();
    assert!(matches!(refused, Error::InvalidArgument(_)), "{refused:?}");
}
