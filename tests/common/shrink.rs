//! Shrinking a sequence that shows a difference between two servers to a short one that
//! still shows it: delta debugging over the steps (drop chunks of half the sequence, then
//! of a quarter, ..., then single steps, keeping every removal after which the same
//! difference persists), then simpler forms of the steps that are left (the caller says
//! what is simpler: a txn without one of its ops, a range without one of its options),
//! each candidate rerun by the caller on fresh names so that earlier runs cannot interfere,
//! within a bounded number of reruns. Generic over the step type: the etcd differential
//! shrinks its steps, the ZooKeeper one the indexes of its random steps (regenerated under
//! a new root for each rerun, with nothing simpler to offer).

use std::future::Future;

/// Reruns candidate sequences for [`shrink`].
pub trait Rerun<S> {
    /// Runs `steps` on both servers afresh; the signature of their first difference (what
    /// kind of step differs), or `None` when they agree.
    fn rerun(&mut self, steps: &[S]) -> impl Future<Output = Option<String>>;
}

/// What [`shrink`] found.
#[derive(Debug, Clone)]
pub struct Shrunk<S> {
    /// The shortest sequence found that still shows the difference.
    pub steps: Vec<S>,
    /// Reruns spent.
    pub runs: usize,
    /// True when the bound on reruns stopped the search before no single step could go.
    pub bounded: bool,
}

/// Shrinks `steps`, whose first difference has `signature`, with at most `max_runs` reruns;
/// `simpler` lists simpler forms of a step (none: steps are only dropped). A candidate is
/// kept only if its first difference has the same signature, so that the search does not
/// drift to another difference.
pub async fn shrink<S: Clone>(
    steps: Vec<S>,
    signature: &str,
    max_runs: usize,
    simpler: impl Fn(&S) -> Vec<S>,
    oracle: &mut impl Rerun<S>,
) -> Shrunk<S> {
    let mut out = Shrunk {
        steps,
        runs: 0,
        bounded: false,
    };
    // A simpler step may need fewer others: removal runs again after simplifying.
    loop {
        if !remove(&mut out, signature, max_runs, oracle).await {
            out.bounded = true;
            return out;
        }
        match simplify(&mut out, signature, max_runs, &simpler, oracle).await {
            Some(true) => {}
            Some(false) => return out,
            None => {
                out.bounded = true;
                return out;
            }
        }
    }
}

/// Removal passes down to single steps, until one removes none; false when the bound
/// stopped them.
async fn remove<S: Clone>(
    out: &mut Shrunk<S>,
    signature: &str,
    max_runs: usize,
    oracle: &mut impl Rerun<S>,
) -> bool {
    let mut chunk = (out.steps.len() / 2).max(1);
    loop {
        let Some(removed) = pass(out, chunk, signature, max_runs, oracle).await else {
            return false;
        };
        if chunk == 1 && !removed {
            return true;
        }
        // Single steps are retried until a whole pass removes none: dropping one can make
        // an earlier one removable.
        chunk = (chunk / 2).clamp(1, (out.steps.len() / 2).max(1));
    }
}

/// Replaces steps by simpler forms while the difference persists: whether any was
/// replaced, or `None` when the bound stopped it.
async fn simplify<S: Clone>(
    out: &mut Shrunk<S>,
    signature: &str,
    max_runs: usize,
    simpler: &impl Fn(&S) -> Vec<S>,
    oracle: &mut impl Rerun<S>,
) -> Option<bool> {
    let mut simplified = false;
    let mut i = 0;
    'steps: while i < out.steps.len() {
        for candidate in simpler(&out.steps[i]) {
            if out.runs >= max_runs {
                return None;
            }
            let mut steps = out.steps.clone();
            steps[i] = candidate;
            out.runs += 1;
            if oracle.rerun(&steps).await.as_deref() == Some(signature) {
                out.steps = steps;
                simplified = true;
                // The simpler step may simplify further.
                continue 'steps;
            }
        }
        i += 1;
    }
    Some(simplified)
}

/// One pass of removals of `chunk` consecutive steps; whether any was removed, or `None`
/// when the bound was reached.
async fn pass<S: Clone>(
    out: &mut Shrunk<S>,
    chunk: usize,
    signature: &str,
    max_runs: usize,
    oracle: &mut impl Rerun<S>,
) -> Option<bool> {
    let mut removed = false;
    let mut at = 0;
    while at < out.steps.len() && out.steps.len() > 1 {
        if out.runs >= max_runs {
            return None;
        }
        let end = (at + chunk).min(out.steps.len());
        let candidate: Vec<S> = out.steps[..at]
            .iter()
            .chain(&out.steps[end..])
            .cloned()
            .collect();
        out.runs += 1;
        if oracle.rerun(&candidate).await.as_deref() == Some(signature) {
            out.steps = candidate;
            removed = true;
        } else {
            at = end;
        }
    }
    Some(removed)
}
