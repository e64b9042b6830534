//! Forwarding one connection with a delay in each direction.
//!
//! A reader stamps every chunk it reads with its due time (read time + delay + jitter, but
//! never before the previous chunk's, so bytes keep their order) and queues it; a writer
//! sleeps until each chunk is due and writes it. The queue is bounded, so a receiver that
//! stops reading pushes back on the sender as a real link would. tokio's timer has 1 ms
//! granularity: delays are rounded up to the next millisecond.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::NetDelay;

/// Chunks in flight per direction (each up to `CHUNK` bytes).
const QUEUE: usize = 256;
const CHUNK: usize = 64 * 1024;

/// Forwards both directions until both have ended (or the link is cut).
pub async fn forward(a: TcpStream, b: TcpStream, delay: NetDelay, up: &AtomicBool) {
    let (ar, aw) = a.into_split();
    let (br, bw) = b.into_split();
    tokio::join!(direction(ar, bw, delay, up), direction(br, aw, delay, up));
}

async fn direction(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    delay: NetDelay,
    up: &AtomicBool,
) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(QUEUE);
    let read = async move {
        let mut last_due = Instant::now();
        loop {
            let mut buf = vec![0u8; CHUNK];
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if !up.load(Ordering::SeqCst) {
                break;
            }
            buf.truncate(n);
            last_due = last_due.max(Instant::now() + one_way(delay));
            if tx.send((last_due, buf)).await.is_err() {
                break; // the writer failed
            }
        }
        // Dropping `tx` lets the writer drain what is queued and then shut down.
    };
    let write = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if !up.load(Ordering::SeqCst) || to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        // The other side finished sending: pass its half-close on.
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
