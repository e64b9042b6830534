//! Forwarding one connection with a delay in each direction, stalled while its link is cut.
//!
//! A reader stamps every chunk it reads with its due time (read time + delay + jitter, but
//! never before the previous chunk's, so bytes keep their order) and queues it; a writer
//! sleeps until each chunk is due, waits at the link's [`Gate`] while the link is cut, and
//! writes it. The queue is bounded, so a receiver that stops reading, or a cut link, pushes
//! back on the sender as a real link would (its socket buffers fill, its writes block).
//! A half-close (end of stream) is passed on the same way, after the bytes before it.
//! tokio's timer has 1 ms granularity: delays are rounded up to the next millisecond.

use std::time::Duration;

use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::links::Gate;
use super::NetDelay;

/// Chunks in flight per direction (each up to `CHUNK` bytes).
const QUEUE: usize = 256;
const CHUNK: usize = 64 * 1024;

/// Forwards both directions until both have ended.
pub async fn forward(a: TcpStream, b: TcpStream, delay: NetDelay, gate: &Gate) {
    let (ar, aw) = a.into_split();
    let (br, bw) = b.into_split();
    tokio::join!(
        direction(ar, bw, delay, gate.clone()),
        direction(br, aw, delay, gate.clone())
    );
}

async fn direction(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    delay: NetDelay,
    mut gate: Gate,
) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(QUEUE);
    let read = async move {
        let mut last_due = Instant::now();
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            last_due = last_due.max(Instant::now() + one_way(delay));
            // A copy of its own size: a queue of small chunks stays small.
            if tx.send((last_due, buf[..n].to_vec())).await.is_err() {
                break; // the writer failed
            }
        }
        // Dropping `tx` lets the writer drain what is queued and then shut down.
    };
    let write = async move {
        while let Some((due, chunk)) = rx.recv().await {
            if due > Instant::now() {
                tokio::time::sleep_until(due).await;
            }
            gate.wait_up().await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        // The other side finished sending: pass its half-close on once the link is up.
        gate.wait_up().await;
        let _ = to.shutdown().await;
    };
    tokio::join!(read, write);
}

/// This chunk's one-way delay: the delay plus a uniform draw from ±jitter.
fn one_way(d: NetDelay) -> Duration {
    if d.jitter.is_zero() {
        return d.delay;
    }
    let j = d.jitter.as_nanos() as i64;
    let offset = rand::rng().random_range(-j..=j);
    Duration::from_nanos((d.delay.as_nanos() as i64 + offset).max(0) as u64)
}
