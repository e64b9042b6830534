//! The server's limits against a greedy client: the per-address connection cap
//! (ZooKeeper's maxClientCnxns) refuses connections beyond it and admits again once one
//! closes.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{fast_options, within, TestServer};
use coordbench_zk_api::jute::{Reader, Writer};
use coordbench_zk_api::proto::{ConnectRequest, ConnectResponse};
use coordbench_zk_api::ServeOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Connects and sends a ConnectRequest: the stream and the server's response, or `None`
/// if the server closed the connection instead of answering.
async fn try_session(addr: SocketAddr) -> (TcpStream, Option<ConnectResponse>) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    let mut w = Writer::new();
    ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        timeout_ms: 2000,
        session_id: 0,
        password: vec![0; 16],
        read_only: Some(false),
    }
    .encode(&mut w);
    let mut frame = (w.buf.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&w.buf);
    // A refused connection may already be closed: a failed write is a refusal too.
    if s.write_all(&frame).await.is_err() {
        return (s, None);
    }
    let mut len = [0u8; 4];
    if s.read_exact(&mut len).await.is_err() {
        return (s, None);
    }
    let mut payload = vec![0; i32::from_be_bytes(len) as usize];
    s.read_exact(&mut payload).await.expect("response payload");
    let resp = ConnectResponse::decode(&mut Reader::new(&payload)).expect("ConnectResponse");
    (s, Some(resp))
}

#[tokio::test]
async fn the_61st_connection_from_one_address_is_refused_until_one_closes() {
    let options = ServeOptions {
        // Sessions of the refused connections' neighbours must outlive the test.
        max_session_timeout: Some(Duration::from_secs(30)),
        ..fast_options()
    };
    assert_eq!(options.max_client_cnxns, 60, "ZooKeeper's default");
    let server = TestServer::start(options).await;
    let addr = server.addr();
    let mut open = Vec::new();
    for k in 0..60 {
        let (s, resp) = within("session", 5, try_session(addr)).await;
        assert!(resp.is_some(), "connection {} is admitted", k + 1);
        open.push(s);
    }
    let (_, resp) = within("61st", 5, try_session(addr)).await;
    assert!(resp.is_none(), "the 61st connection is closed unanswered");

    drop(open.pop());
    // The server frees the place once it has seen the close; retry within a bound.
    let mut admitted = false;
    for _ in 0..50 {
        if let (s, Some(_)) = within("retry", 5, try_session(addr)).await {
            open.push(s);
            admitted = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(admitted, "a connection is admitted again after one closed");
    let (_, resp) = within("again", 5, try_session(addr)).await;
    assert!(resp.is_none(), "and the cap holds again at 60");
    drop(open);
    server.stop().await;
}

#[tokio::test]
async fn zero_means_unlimited() {
    let server = TestServer::start(ServeOptions {
        max_client_cnxns: 0,
        ..fast_options()
    })
    .await;
    let mut open = Vec::new();
    for _ in 0..80 {
        let (s, resp) = within("session", 5, try_session(server.addr())).await;
        assert!(resp.is_some());
        open.push(s);
    }
    drop(open);
    server.stop().await;
}
