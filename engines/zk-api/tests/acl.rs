//! ACLs and digest auth as ZooKeeper enforces them, driven by the zookeeper-client crate
//! against a real TCP server over a one-member replicator: a node created with
//! CREATOR_ALL by a digest-authenticated session is out of reach of sessions without the
//! credentials (NoAuth) and within reach of sessions with them; setACL and getACL; and
//! enforced authentication refusing an unauthenticated connection.

mod common;

use std::time::Duration;

use common::{within, TestServer};
use zookeeper_client::{Acl, Acls, AuthId, Client, CreateMode, Error, Permission};

const TIMEOUT: Duration = Duration::from_secs(2);

async fn client_as(server: &TestServer, user_password: Option<&str>) -> Client {
    let mut connector = Client::connector().with_session_timeout(TIMEOUT);
    if let Some(up) = user_password {
        connector = connector.with_auth("digest", up.as_bytes());
    }
    within("connect", 5, connector.connect(&server.endpoint()))
        .await
        .expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_creator_all_node_needs_the_creators_credentials() {
    let server = TestServer::start(common::fast_options()).await;
    let alice = client_as(&server, Some("alice:secret")).await;
    let creator = CreateMode::Persistent.with_acls(Acls::creator_all());
    alice.create("/private", b"v", &creator).await.unwrap();

    let (acl, _) = alice.get_acl("/private").await.unwrap();
    let digest = coordbench_zk_api::auth::digest_id("alice:secret").unwrap();
    assert_eq!(acl.len(), 1);
    assert_eq!((acl[0].scheme(), acl[0].id()), ("digest", digest.as_str()));

    let anonymous = client_as(&server, None).await;
    assert_eq!(
        anonymous.get_data("/private").await.unwrap_err(),
        Error::NoAuth
    );
    assert_eq!(
        anonymous
            .set_data("/private", b"x", None)
            .await
            .unwrap_err(),
        Error::NoAuth
    );
    let child = CreateMode::Persistent.with_acls(Acls::anyone_all());
    assert_eq!(
        anonymous
            .create("/private/c", b"", &child)
            .await
            .unwrap_err(),
        Error::NoAuth
    );
    alice.create("/private/open", b"", &child).await.unwrap();
    assert_eq!(
        anonymous.delete("/private/open", None).await.unwrap_err(),
        Error::NoAuth,
        "delete needs DELETE on the parent"
    );
    let mallory = client_as(&server, Some("alice:wrong")).await;
    assert_eq!(
        mallory.get_data("/private").await.unwrap_err(),
        Error::NoAuth
    );
    // CREATOR_ALL without an authenticated id is an invalid ACL.
    assert_eq!(
        anonymous.create("/mine", b"", &creator).await.unwrap_err(),
        Error::InvalidAcl
    );

    let again = client_as(&server, Some("alice:secret")).await;
    assert_eq!(again.get_data("/private").await.unwrap().0, b"v");
    again.set_data("/private", b"w", None).await.unwrap();

    // setACL needs ADMIN, and opening the node lets everyone read it.
    let open = [Acl::new(Permission::READ, AuthId::anyone())];
    assert_eq!(
        anonymous
            .set_acl("/private", &open, None)
            .await
            .unwrap_err(),
        Error::NoAuth
    );
    let stat = again.set_acl("/private", &open, Some(0)).await.unwrap();
    assert_eq!(stat.aversion, 1);
    assert_eq!(anonymous.get_data("/private").await.unwrap().0, b"w");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enforced_auth_refuses_unauthenticated_connections() {
    let options = coordbench_zk_api::ServeOptions {
        enforce_auth: true,
        ..common::fast_options()
    };
    let server = TestServer::start(options).await;
    let alice = client_as(&server, Some("alice:secret")).await;
    assert!(alice.check_stat("/").await.unwrap().is_some());

    // The client pings right after connecting, which an unauthenticated connection
    // gets answered with SESSION_CLOSED_REQUIRE_AUTH: the connect fails.
    let anonymous = within(
        "connect",
        5,
        Client::connector()
            .with_session_timeout(TIMEOUT)
            .connect(&server.endpoint()),
    )
    .await;
    assert_eq!(anonymous.err(), Some(Error::AuthFailed));
    server.stop().await;
}
