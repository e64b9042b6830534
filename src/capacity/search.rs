//! The rate search, apart from running windows: grow the rate by a factor until a window
//! fails, then bisect between the highest passing and the lowest failing rate until they
//! are within the precision, then confirm the highest passing rate with a longer window. A
//! failed confirmation is a failure at that rate: the search bisects again below it and
//! confirms again, a bounded number of times. OpenMessaging Benchmark's rate controller
//! searches the same way.

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
    highest_pass: Option<f64>,
    lowest_fail: Option<(f64, Limit)>,
    /// The rate being confirmed, and confirmations run.
    confirming: Option<f64>,
    confirmations: usize,
    confirmed: Option<Option<f64>>,
}

/// Below this a search gives up: nothing passes.
const MIN_RATE: f64 = 0.1;

impl Search {
    pub fn new(plan: SearchPlan) -> Self {
        Search {
            plan,
            highest_pass: None,
            lowest_fail: None,
            confirming: None,
            confirmations: 0,
            confirmed: None,
        }
    }

    /// The next window to run.
    pub fn next(&self) -> Step {
        if let Some(answer) = self.confirmed {
            return Step::Done(answer);
        }
        if let Some(rate) = self.confirming {
            return Step::Confirm(rate);
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

    /// Records a search window's verdict (`None`: passed).
    pub fn probed(&mut self, rate: f64, failed: Option<Limit>) {
        match failed {
            None => self.highest_pass = Some(self.highest_pass.map_or(rate, |p| p.max(rate))),
            Some(limit) => {
                if self.lowest_fail.is_none_or(|(f, _)| rate < f) {
                    self.lowest_fail = Some((rate, limit));
                }
            }
        }
        if let (Some(pass), Some((fail, _))) = (self.highest_pass, self.lowest_fail) {
            // A pass above a failure (noise): the failure bounds the search.
            if pass >= fail {
                self.highest_pass = Some(fail / self.plan.growth.sqrt());
            }
        }
        if let Step::Confirm(rate) = self.next() {
            self.confirming = Some(rate);
        }
    }

    /// Records a confirmation window's verdict: a pass ends the search; a failure bounds it
    /// from above, and the search goes on below, until the confirmations run out.
    pub fn confirmed(&mut self, rate: f64, failed: Option<Limit>) {
        self.confirmations += 1;
        self.confirming = None;
        match failed {
            None => self.confirmed = Some(Some(rate)),
            Some(_) if self.confirmations >= self.plan.confirmations => {
                self.confirmed = Some(None);
            }
            Some(limit) => self.probed(rate, Some(limit)),
        }
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
            assert!(windows <= 16, "{capacity}: {windows} windows");
        }
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
    fn a_failed_confirmation_bisects_again_below_it_and_the_limit_is_the_lowest_failures() {
        let mut s = Search::new(plan());
        s.probed(100.0, None);
        s.probed(200.0, Some(Limit::Generator));
        assert_eq!(s.limited_by(), Some(Limit::Generator));
        // Bisect to within 5%, then confirm.
        while let Step::Probe(r) = s.next() {
            s.probed(r, (r > 150.0).then_some(Limit::Target));
        }
        let Step::Confirm(r) = s.next() else {
            panic!("confirms")
        };
        assert!(r > 140.0 && r <= 150.0, "{r}");
        s.confirmed(r, Some(Limit::Target));
        let Step::Probe(below) = s.next() else {
            panic!("searches again")
        };
        assert!(below < r, "{below} below the failed confirmation {r}");
        let mut windows = 0;
        loop {
            match s.next() {
                Step::Probe(x) => s.probed(x, (x > 130.0).then_some(Limit::Target)),
                Step::Confirm(x) => s.confirmed(x, (x > 130.0).then_some(Limit::Target)),
                Step::Done(answer) => {
                    let found = answer.expect("a lower rate is confirmed");
                    assert!(found <= 130.0 && found > 120.0, "{found}");
                    break;
                }
            }
            windows += 1;
            assert!(windows < 20);
        }
    }
}
