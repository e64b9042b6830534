//! The rate search, apart from running windows: grow the rate by a factor until a window
//! fails, then bisect between the highest passing and the lowest failing rate until they
//! are within the precision, then confirm the highest passing rate with a longer window
//! (OpenMessaging Benchmark's rate controller searches the same way).
//!
//! The first failing window bounds the whole search, and on a shared machine one window
//! can fail on a stall that has nothing to do with its rate; so the first failure is run
//! again (on a fresh cluster, by the fresh-cluster rule) and only the repeat's verdict
//! counts.
//!
//! A failed confirmation shows that the short windows are optimistic for this target (a
//! long window catches what recurs less often than a short one lasts: snapshots,
//! compactions, a history that grows with every write), so from then on only confirming
//! windows count: the search steps down from the failed rate by [`STEP_DOWN`] until one
//! passes, then bisects with confirming windows, within a bounded number of them. Any
//! confirming window that passed is an answer.

use serde::Serialize;

/// Why a window failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// The target did not meet an objective: its limit.
    Target,
    /// The load generator was saturated (`generator_saturated`): not the target's limit.
    Generator,
}

/// How the search proceeds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchPlan {
    pub start_rate: f64,
    pub max_rate: f64,
    /// Growth factor until the first failure.
    pub growth: f64,
    /// Bisection ends when (fail - pass) / pass is at most this.
    pub precision: f64,
    /// Confirmation windows at most.
    pub confirmations: usize,
}

/// What the search asks for next.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// A search window at this rate.
    Probe(f64),
    /// A confirmation (longer) window at this rate.
    Confirm(f64),
    /// Finished: the confirmed rate, if any passed.
    Done(Option<f64>),
}

/// The state of a search: the bounds found so far.
#[derive(Debug, Clone)]
pub struct Search {
    plan: SearchPlan,
    /// Bounds from search windows until a confirmation fails, from confirming windows after.
    highest_pass: Option<f64>,
    lowest_fail: Option<(f64, Limit)>,
    /// A confirmation failed: only confirming windows run and count from now on.
    confirming_only: bool,
    /// The first failing search window, being run again; whether that has happened.
    repeating: Option<f64>,
    repeated: bool,
    confirmations: usize,
    answer: Option<Option<f64>>,
}

/// Below this a search gives up: nothing passes.
const MIN_RATE: f64 = 0.1;
/// After a failed confirmation, the next confirming window runs at this fraction of the
/// lowest failing rate (until one passes).
pub const STEP_DOWN: f64 = 0.8;

impl Search {
    pub fn new(plan: SearchPlan) -> Self {
        Search {
            plan,
            highest_pass: None,
            lowest_fail: None,
            confirming_only: false,
            repeating: None,
            repeated: false,
            confirmations: 0,
            answer: None,
        }
    }

    /// The next window to run.
    pub fn next(&self) -> Step {
        if let Some(answer) = self.answer {
            return Step::Done(answer);
        }
        if self.confirming_only {
            return self.next_confirmation();
        }
        if let Some(rate) = self.repeating {
            return Step::Probe(rate);
        }
        let p = &self.plan;
        let rate = match (self.highest_pass, self.lowest_fail) {
            (None, None) => p.start_rate.min(p.max_rate),
            (Some(pass), None) if pass >= p.max_rate => return Step::Confirm(pass),
            (Some(pass), None) => (pass * p.growth).min(p.max_rate),
            (None, Some((fail, _))) if fail / p.growth < MIN_RATE => return Step::Done(None),
            (None, Some((fail, _))) => fail / p.growth,
            (Some(pass), Some((fail, _))) if (fail - pass) / pass <= p.precision => {
                return Step::Confirm(pass)
            }
            (Some(pass), Some((fail, _))) => (pass + fail) / 2.0,
        };
        Step::Probe(rate)
    }

    /// After a failed confirmation: step down until a confirming window passes, then bisect.
    fn next_confirmation(&self) -> Step {
        if self.confirmations >= self.plan.confirmations {
            return Step::Done(self.highest_pass);
        }
        match (self.highest_pass, self.lowest_fail) {
            (Some(pass), Some((fail, _))) if (fail - pass) / pass > self.plan.precision => {
                Step::Confirm((pass + fail) / 2.0)
            }
            (None, Some((fail, _))) if fail * STEP_DOWN >= MIN_RATE => {
                Step::Confirm(fail * STEP_DOWN)
            }
            (pass, _) => Step::Done(pass),
        }
    }

    /// Records a search window's verdict (`None`: passed).
    pub fn probed(&mut self, rate: f64, failed: Option<Limit>) {
        if self.repeating.take().is_none() && failed.is_some() && !self.repeated {
            self.repeated = true;
            self.repeating = Some(rate);
            return;
        }
        self.record(rate, failed);
        if let (Some(pass), Some((fail, _))) = (self.highest_pass, self.lowest_fail) {
            // A pass above a failure (noise): the failure bounds the search.
            if pass >= fail {
                self.highest_pass = Some(fail / self.plan.growth.sqrt());
            }
        }
    }

    fn record(&mut self, rate: f64, failed: Option<Limit>) {
        match failed {
            None => self.highest_pass = Some(self.highest_pass.map_or(rate, |p| p.max(rate))),
            Some(limit) => {
                if self.lowest_fail.is_none_or(|(f, _)| rate < f) {
                    self.lowest_fail = Some((rate, limit));
                }
            }
        }
    }

    /// Records a confirmation window's verdict. The first to pass ends the search; a
    /// failure switches it to confirming windows only, bounded by the failure.
    pub fn confirmed(&mut self, rate: f64, failed: Option<Limit>) {
        self.confirmations += 1;
        if !self.confirming_only {
            match failed {
                None => self.answer = Some(Some(rate)),
                Some(limit) => {
                    self.confirming_only = true;
                    self.highest_pass = None;
                    self.lowest_fail = Some((rate, limit));
                }
            }
            return;
        }
        self.record(rate, failed);
    }

    /// Why the lowest failing window failed (what limits the answer).
    pub fn limited_by(&self) -> Option<Limit> {
        self.lowest_fail.map(|(_, l)| l)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> SearchPlan {
        SearchPlan {
            start_rate: 100.0,
            max_rate: 1e6,
            growth: 2.0,
            precision: 0.05,
            confirmations: 3,
        }
    }

    /// Runs a search against a target that passes every rate up to `capacity`.
    fn search(capacity: f64, plan: SearchPlan) -> (Option<f64>, usize) {
        let mut s = Search::new(plan);
        for windows in 0..100 {
            match s.next() {
                Step::Probe(r) => s.probed(r, (r > capacity).then_some(Limit::Target)),
                Step::Confirm(r) => s.confirmed(r, (r > capacity).then_some(Limit::Target)),
                Step::Done(answer) => return (answer, windows),
            }
        }
        panic!("the search did not end");
    }

    #[test]
    fn finds_a_threshold_within_the_precision_in_few_windows() {
        for capacity in [37.0, 100.0, 750.0, 12_345.0, 99_000.0] {
            let (answer, windows) = search(capacity, plan());
            let found = answer.expect("a rate passes");
            assert!(
                found <= capacity && found >= capacity * 0.95,
                "{capacity}: {found}"
            );
            // Growth, the first failure repeated, bisection to 5%, one confirmation.
            assert!(windows <= 17, "{capacity}: {windows} windows");
        }
    }

    #[test]
    fn the_first_failure_is_run_again_and_only_the_repeat_counts() {
        // A stall fails the window at 800 once; the target takes 1,500.
        let mut s = Search::new(plan());
        let mut stalled = false;
        let mut rates = Vec::new();
        let found = loop {
            match s.next() {
                Step::Probe(r) => {
                    rates.push(r);
                    let stall = r == 800.0 && !stalled;
                    stalled |= stall;
                    s.probed(r, (stall || r > 1500.0).then_some(Limit::Target));
                }
                Step::Confirm(r) => s.confirmed(r, (r > 1500.0).then_some(Limit::Target)),
                Step::Done(answer) => break answer.expect("a rate is confirmed"),
            }
        };
        assert_eq!(&rates[..5], &[100.0, 200.0, 400.0, 800.0, 800.0]);
        assert!((1500.0 * 0.95..=1500.0).contains(&found), "{found}");
        // A real first failure is believed after its repeat: 3,200 fails twice.
        let mut s = Search::new(plan());
        for r in [100.0, 200.0, 400.0, 800.0, 1600.0] {
            assert_eq!(s.next(), Step::Probe(r));
            s.probed(r, None);
        }
        assert_eq!(s.next(), Step::Probe(3200.0));
        s.probed(3200.0, Some(Limit::Generator));
        assert_eq!(s.next(), Step::Probe(3200.0));
        s.probed(3200.0, Some(Limit::Target));
        assert_eq!(s.limited_by(), Some(Limit::Target));
        assert_eq!(s.next(), Step::Probe(2400.0));
    }

    #[test]
    fn stops_at_the_highest_rate_asked_for_and_gives_up_when_nothing_passes() {
        let capped = SearchPlan {
            max_rate: 1000.0,
            ..plan()
        };
        assert_eq!(search(5000.0, capped).0, Some(1000.0));
        assert_eq!(search(0.01, plan()).0, None);
    }

    #[test]
    fn a_failed_confirmation_goes_on_with_confirming_windows_only() {
        // Short windows pass up to 150, long ones only up to 118.
        let six = SearchPlan {
            confirmations: 6,
            ..plan()
        };
        let mut s = Search::new(six);
        s.probed(100.0, None);
        // The first failure, and its repeat.
        s.probed(200.0, Some(Limit::Generator));
        s.probed(200.0, Some(Limit::Generator));
        assert_eq!(s.limited_by(), Some(Limit::Generator));
        while let Step::Probe(r) = s.next() {
            s.probed(r, (r > 150.0).then_some(Limit::Target));
        }
        let Step::Confirm(first) = s.next() else {
            panic!("confirms")
        };
        assert!(first > 140.0 && first <= 150.0, "{first}");
        s.confirmed(first, Some(Limit::Target));
        assert_eq!(s.limited_by(), Some(Limit::Target));
        let mut rates = Vec::new();
        let found = loop {
            match s.next() {
                Step::Probe(r) => panic!("a search window at {r} after a failed confirmation"),
                Step::Confirm(r) => {
                    rates.push(r);
                    s.confirmed(r, (r > 118.0).then_some(Limit::Target));
                }
                Step::Done(answer) => break answer.expect("a lower rate is confirmed"),
            }
        };
        assert!((first * STEP_DOWN - rates[0]).abs() < 1e-9, "{rates:?}");
        assert!(
            (118.0 * 0.95..=118.0).contains(&found),
            "{found} after {rates:?}"
        );
        assert!(rates.len() < six.confirmations, "{rates:?}");
    }

    #[test]
    fn confirming_windows_are_bounded_and_a_passing_one_is_the_answer() {
        let mut s = Search::new(SearchPlan {
            confirmations: 3,
            ..plan()
        });
        s.probed(1000.0, None);
        s.probed(1040.0, Some(Limit::Target));
        s.probed(1040.0, Some(Limit::Target));
        assert_eq!(s.next(), Step::Confirm(1000.0));
        s.confirmed(1000.0, Some(Limit::Target));
        assert_eq!(s.next(), Step::Confirm(800.0));
        s.confirmed(800.0, None);
        assert_eq!(s.next(), Step::Confirm(900.0));
        s.confirmed(900.0, Some(Limit::Target));
        // Out of confirmations: 800 passed a whole confirming window.
        assert_eq!(s.next(), Step::Done(Some(800.0)));
        // Nothing passes long windows: the search gives up within its budget.
        let mut never = Search::new(SearchPlan {
            confirmations: 3,
            ..plan()
        });
        never.probed(1000.0, None);
        never.probed(1040.0, Some(Limit::Target));
        never.probed(1040.0, Some(Limit::Target));
        for _ in 0..3 {
            let Step::Confirm(r) = never.next() else {
                panic!("confirms")
            };
            never.confirmed(r, Some(Limit::Target));
        }
        assert_eq!(never.next(), Step::Done(None));
    }
}
