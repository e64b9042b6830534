//! Ctrl-C and SIGTERM: both cancel the run's stop token, so the runner ends the window,
//! results are written with `complete: false`, and started servers are torn down.

use tokio::signal::unix::{signal, SignalKind};
use tokio_util::sync::CancellationToken;

/// A token cancelled on the first SIGINT or SIGTERM. A second Ctrl-C is left to the
/// default handler only after teardown, so the first one always gets a clean exit.
pub fn stop_on_signals() -> std::io::Result<CancellationToken> {
    let token = CancellationToken::new();
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let cancel = token.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        cancel.cancel();
    });
    Ok(token)
}
