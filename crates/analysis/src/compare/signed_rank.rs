//! The paired test: Wilcoxon's signed-rank test and the paired Hodges–Lehmann interval,
//! for samples that come in pairs (a gate's baseline and candidate run back to back, one
//! pair per repeat). Runs of a pair share the machine's drift, so their log-ratio varies
//! less than either side does, and a test of the pairs' differences has more power than
//! the unpaired rank-sum test of [`super::stats`] on the same runs.
//!
//! * [`signed_rank`]: one-sided p-values of the differences' median against 0. Zeros are
//!   dropped (Wilcoxon's convention); tied magnitudes get midranks. Up to [`EXACT_LIMIT`]
//!   non-zero differences the p-values are exact (every sign assignment, counted by
//!   dynamic programming, ties included); beyond, the normal approximation with tie and
//!   continuity corrections.
//! * [`walsh_interval`] / [`ratio_walsh_interval`]: the Hodges–Lehmann estimate of the
//!   differences' centre (the median of the Walsh averages (d_i + d_j) / 2, i <= j) with the
//!   confidence interval that inverts the same test.
//!
//! A limit is tested by shifting: "at most a 5% drop" asks whether the median log-ratio is
//! below ln 0.95, i.e. runs [`signed_rank`] on ln(c/b) − ln 0.95.

use super::stats::{self, Interval};

/// Largest number of non-zero differences for which p-values and the null distribution
/// are exact (2^50 sign assignments, counted in a table of at most 2,551 sums).
pub const EXACT_LIMIT: usize = 50;

/// Result of a signed-rank test of differences against a median of 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SignedRankTest {
    /// Non-zero differences: the pairs the test used.
    pub n: usize,
    /// W+: the sum of the ranks of |d| over the positive differences (midranks for ties).
    pub w_plus: f64,
    /// P(W+ <= observed) under H0 (differences symmetric about 0): the one-sided p-value
    /// for "the median is below 0".
    pub p_below: f64,
    /// P(W+ >= observed): the one-sided p-value for "the median is above 0".
    pub p_above: f64,
    /// Whether the p-values are exact rather than the normal approximation.
    pub exact: bool,
}

impl SignedRankTest {
    /// The two-sided p-value: twice the smaller tail, at most 1.
    pub fn p_two_sided(&self) -> f64 {
        (2.0 * self.p_below.min(self.p_above)).min(1.0)
    }
}

/// Wilcoxon's signed-rank test of `d` (differences, e.g. log-ratios minus a shift)
/// against a median of 0. None if `d` is empty or holds a non-finite value; when every
/// difference is 0 both p-values are 1.
pub fn signed_rank(d: &[f64]) -> Option<SignedRankTest> {
    let nonzero = d.iter().filter(|v| **v != 0.0).count();
    test(d, nonzero <= EXACT_LIMIT)
}

/// The smallest one-sided p-value `n` pairs can reach: every difference on one side, 2^-n.
pub fn min_p_one_sided(n: usize) -> f64 {
    0.5f64.powi(n.min(i32::MAX as usize) as i32)
}

/// The test with the exact/approximate choice made by the caller (tests force either).
fn test(d: &[f64], exact: bool) -> Option<SignedRankTest> {
    if d.is_empty() || !stats::all_finite(d) {
        return None;
    }
    let nonzero: Vec<f64> = d.iter().copied().filter(|v| *v != 0.0).collect();
    let n = nonzero.len();
    if n == 0 {
        return Some(SignedRankTest {
            n,
            w_plus: 0.0,
            p_below: 1.0,
            p_above: 1.0,
            exact,
        });
    }
    let magnitudes: Vec<f64> = nonzero.iter().map(|v| v.abs()).collect();
    let ranking = stats::rank_pooled(&magnitudes);
    let observed: usize = ranking
        .doubled
        .iter()
        .zip(&nonzero)
        .filter(|(_, v)| **v > 0.0)
        .map(|(r, _)| r)
        .sum();
    let (p_below, p_above) = if exact {
        exact_tails(&ranking.doubled, observed)
    } else {
        normal_tails(n, observed as f64 / 2.0, ranking.tie_term)
    };
    Some(SignedRankTest {
        n,
        w_plus: observed as f64 / 2.0,
        p_below,
        p_above,
        exact,
    })
}

/// P(sum <= observed) and P(sum >= observed) when each doubled rank joins the sum with
/// probability 1/2, independently: every sign assignment counted by sum.
fn exact_tails(doubled: &[usize], observed: usize) -> (f64, f64) {
    // Dividing by the common factor (2 without ties) shrinks the table.
    let g = doubled.iter().fold(0, |acc, &r| stats::gcd(acc, r)).max(1);
    let weights: Vec<usize> = doubled.iter().map(|r| r / g).collect();
    let counts = sign_counts(&weights);
    let observed = observed / g;
    let total: f64 = counts.iter().sum();
    let below: f64 = counts[..=observed].iter().sum();
    let above: f64 = counts[observed..].iter().sum();
    ((below / total).min(1.0), (above / total).min(1.0))
}

/// Number of subsets of `weights` (as f64) with each sum s, at index s.
fn sign_counts(weights: &[usize]) -> Vec<f64> {
    let mut counts = vec![0.0; weights.iter().sum::<usize>() + 1];
    counts[0] = 1.0;
    let mut reach = 0;
    for &w in weights {
        reach += w;
        // Downwards, so each weight is used at most once.
        for s in (w..=reach).rev() {
            counts[s] += counts[s - w];
        }
    }
    counts
}

/// Both tails from the normal approximation of W+: mean n(n+1)/4, variance
/// n(n+1)(2n+1)/24 less sum(t^3 - t)/48 over tie groups, continuity correction 1/2.
fn normal_tails(n: usize, w_plus: f64, tie_term: f64) -> (f64, f64) {
    let nf = n as f64;
    let mean = nf * (nf + 1.0) / 4.0;
    let variance = nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0 - tie_term / 48.0;
    if variance.is_nan() || variance <= 0.0 {
        return (1.0, 1.0);
    }
    let sd = variance.sqrt();
    let below = stats::normal_cdf((w_plus - mean + 0.5) / sd);
    let above = stats::normal_cdf((mean - w_plus + 0.5) / sd);
    (below.min(1.0), above.min(1.0))
}

/// P(W+ <= k) for n differences without ties or zeros: exact table up to
/// [`EXACT_LIMIT`], else the normal approximation with continuity correction.
fn null_cdf(n: usize) -> impl Fn(usize) -> f64 {
    let exact = (n <= EXACT_LIMIT).then(|| {
        let ranks: Vec<usize> = (1..=n).collect();
        let counts = sign_counts(&ranks);
        let total: f64 = counts.iter().sum();
        let mut running = 0.0;
        counts
            .iter()
            .map(|c| {
                running += c;
                (running / total).min(1.0)
            })
            .collect::<Vec<f64>>()
    });
    let nf = n as f64;
    let mean = nf * (nf + 1.0) / 4.0;
    let sd = (nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0).sqrt();
    move |k| match &exact {
        Some(table) => table[k.min(table.len() - 1)],
        None => stats::normal_cdf((k as f64 + 0.5 - mean) / sd),
    }
}

/// Hodges–Lehmann estimate of the centre of the differences `d` (the median of the Walsh
/// averages) with the confidence interval [k-th smallest, k-th largest Walsh average],
/// k the largest with 1 − 2 P(W+ <= k − 1) >= 1 − alpha. None if `d` is empty or
/// non-finite, `alpha` is outside (0, 1), or there are too few pairs for any interval at
/// that alpha. Without ties or zeros, the interval excludes 0 exactly when
/// [`signed_rank`]'s two-sided p-value reaches `alpha`.
pub fn walsh_interval(d: &[f64], alpha: f64) -> Option<Interval> {
    if d.is_empty() || !stats::all_finite(d) || !(alpha > 0.0 && alpha < 1.0) {
        return None;
    }
    let n = d.len();
    let averages_count = n * (n + 1) / 2;
    let cdf = null_cdf(n);
    let lo = stats::interval_rank(averages_count, &cdf, alpha)?;
    let mut averages = Vec::with_capacity(averages_count);
    for i in 0..n {
        for j in i..n {
            averages.push(d[i] / 2.0 + d[j] / 2.0);
        }
    }
    averages.sort_by(f64::total_cmp);
    Some(Interval {
        estimate: stats::median_sorted(&averages),
        low: averages[lo - 1],
        high: averages[averages_count - lo],
        confidence: (1.0 - 2.0 * cdf(lo - 1)).clamp(0.0, 1.0),
    })
}

/// The paired ratio cand/base: [`walsh_interval`] of the pairs' log-ratios, exponentiated.
/// None unless both sides have the same length and every value is positive and finite.
pub fn ratio_walsh_interval(base: &[f64], cand: &[f64], alpha: f64) -> Option<Interval> {
    let logs = log_ratios(base, cand)?;
    let i = walsh_interval(&logs, alpha)?;
    Some(Interval {
        estimate: i.estimate.exp(),
        low: i.low.exp(),
        high: i.high.exp(),
        confidence: i.confidence,
    })
}

/// ln(c_i / b_i) for each pair; None unless the sides pair up and every value is positive
/// and finite.
pub fn log_ratios(base: &[f64], cand: &[f64]) -> Option<Vec<f64>> {
    let positive = |xs: &[f64]| xs.iter().all(|x| x.is_finite() && *x > 0.0);
    if base.len() != cand.len() || !positive(base) || !positive(cand) {
        return None;
    }
    Some(base.iter().zip(cand).map(|(b, c)| (c / b).ln()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordbench_splitmix::SplitMix64 as SplitMix;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    fn unit(rng: &mut SplitMix) -> f64 {
        (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Brute force: ranks by counting (midranks for ties), then every one of the 2^n sign
    /// assignments of the magnitudes, tallying the tails of W+ (doubled, to stay integral).
    fn brute_force(d: &[f64]) -> (f64, f64) {
        let nonzero: Vec<f64> = d.iter().copied().filter(|v| *v != 0.0).collect();
        let n = nonzero.len();
        let doubled_rank = |x: f64| -> u64 {
            let less = nonzero.iter().filter(|v| v.abs() < x.abs()).count() as u64;
            let equal = nonzero.iter().filter(|v| v.abs() == x.abs()).count() as u64;
            2 * less + equal + 1
        };
        let ranks: Vec<u64> = nonzero.iter().map(|v| doubled_rank(*v)).collect();
        let observed: u64 = (0..n).filter(|&i| nonzero[i] > 0.0).map(|i| ranks[i]).sum();
        let (mut below, mut above) = (0u64, 0u64);
        for mask in 0u64..1 << n {
            let w: u64 = (0..n)
                .filter(|i| mask >> i & 1 == 1)
                .map(|i| ranks[i])
                .sum();
            below += u64::from(w <= observed);
            above += u64::from(w >= observed);
        }
        let total = (1u64 << n) as f64;
        (below as f64 / total, above as f64 / total)
    }

    #[test]
    fn textbook_values_for_ten_pairs() {
        // The exact null distribution of W+ for n = 10 (every table of it):
        // P(W+ <= 3) = 5/1024, <= 5: 10/1024, <= 8: 25/1024, <= 10: 43/1024.
        for (w, count) in [(3usize, 5.0), (5, 10.0), (8, 25.0), (10, 43.0)] {
            // Ranks 1..=10; give the positive signs to a set of ranks summing to w.
            let mut positive = Vec::new();
            let mut left = w;
            for r in (1..=10).rev() {
                if r <= left {
                    positive.push(r);
                    left -= r;
                }
            }
            let d: Vec<f64> = (1..=10)
                .map(|r| {
                    if positive.contains(&r) {
                        r as f64
                    } else {
                        -(r as f64)
                    }
                })
                .collect();
            let t = signed_rank(&d).unwrap();
            assert_eq!((t.n, t.w_plus, t.exact), (10, w as f64, true));
            assert!(close(t.p_below, count / 1024.0, 1e-15), "{w}: {t:?}");
            assert!(close(t.p_two_sided(), 2.0 * count / 1024.0, 1e-15));
        }
        let all_up = signed_rank(&[0.1, 0.2, 0.3, 0.4, 0.5]).unwrap();
        assert_eq!((all_up.p_above, all_up.p_below), (1.0 / 32.0, 1.0));
        assert_eq!(min_p_one_sided(5), 1.0 / 32.0);
    }

    #[test]
    fn exact_p_matches_enumeration_with_ties_and_zeros() {
        let mut rng = SplitMix::new(0x51a7);
        for case in 0..400 {
            let n = 1 + (rng.next_u64() % 12) as usize;
            let levels = [2, 3, 5, 1000][case % 4]; // few levels = many ties
                                                    // Symmetric integer levels: ties of equal and opposite values, and zeros.
            let d: Vec<f64> = (0..n)
                .map(|_| (rng.next_u64() % (2 * levels + 1)) as f64 - levels as f64)
                .collect();
            let t = signed_rank(&d).unwrap();
            let (below, above) = brute_force(&d);
            assert!(close(t.p_below, below, 1e-12), "{d:?}: {t:?} vs {below}");
            assert!(close(t.p_above, above, 1e-12), "{d:?}: {t:?} vs {above}");
        }
    }

    #[test]
    fn zeros_are_dropped_and_bad_input_refused() {
        let t = signed_rank(&[0.0, 0.0, 1.0, 2.0, -0.5]).unwrap();
        assert_eq!((t.n, t.w_plus), (3, 5.0));
        let none = signed_rank(&[0.0, -0.0]).unwrap();
        assert_eq!((none.n, none.p_below, none.p_above), (0, 1.0, 1.0));
        assert!(signed_rank(&[]).is_none());
        assert!(signed_rank(&[1.0, f64::NAN]).is_none());
        assert!(walsh_interval(&[1.0, f64::INFINITY], 0.5).is_none());
        assert!(walsh_interval(&[1.0, 2.0, 3.0], 0.0).is_none());
        assert!(ratio_walsh_interval(&[1.0, 2.0], &[1.0], 0.5).is_none());
        assert!(ratio_walsh_interval(&[1.0, 0.0], &[1.0, 1.0], 0.5).is_none());
    }

    #[test]
    fn normal_approximation_agrees_with_exact_at_the_limit() {
        let mut rng = SplitMix::new(11);
        for shift in [0.0, 0.1, 0.3] {
            let d: Vec<f64> = (0..EXACT_LIMIT)
                .map(|_| unit(&mut rng) - 0.5 + shift)
                .collect();
            let exact = test(&d, true).unwrap();
            let approx = test(&d, false).unwrap();
            assert!(
                close(exact.p_below, approx.p_below, 0.005),
                "{exact:?} {approx:?}"
            );
            assert!(
                close(exact.p_above, approx.p_above, 0.005),
                "{exact:?} {approx:?}"
            );
        }
        // Heavy ties: the variance's tie correction keeps them close too.
        let d: Vec<f64> = (0..EXACT_LIMIT)
            .map(|_| (rng.next_u64() % 5) as f64 - 1.5)
            .collect();
        let (exact, approx) = (test(&d, true).unwrap(), test(&d, false).unwrap());
        assert!(
            close(exact.p_below, approx.p_below, 0.01),
            "{exact:?} {approx:?}"
        );
        assert!(!signed_rank(&vec![1.0; EXACT_LIMIT + 1]).unwrap().exact);
    }

    #[test]
    fn walsh_averages_of_a_small_sample() {
        // Walsh averages of 1, 2, 3: 1, 1.5, 2, 2, 2.5, 3; median 2. Three pairs reach a
        // two-sided p of 2/8 at best: alpha 0.25 allows the full range, 0.10 nothing.
        let i = walsh_interval(&[3.0, 1.0, 2.0], 0.25).unwrap();
        assert_eq!((i.estimate, i.low, i.high), (2.0, 1.0, 3.0));
        assert!(close(i.confidence, 0.75, 1e-15));
        assert!(walsh_interval(&[3.0, 1.0, 2.0], 0.10).is_none());
        let r = ratio_walsh_interval(&[100.0, 100.0, 100.0], &[90.0, 90.0, 90.0], 0.25).unwrap();
        assert!(
            close(r.estimate, 0.9, 1e-12) && close(r.low, 0.9, 1e-12),
            "{r:?}"
        );
    }

    #[test]
    fn walsh_interval_of_one_to_ten_by_hand() {
        // 1..=10: 55 Walsh averages (i + j) / 2, i <= j; sums 2, 3, 4, 5, 6 occur 1, 1, 2,
        // 2, 3 times, so the 9th smallest is 6 / 2 = 3 and, by symmetry, the 9th largest 8.
        // At alpha 0.05: P(W+ <= 8) = 25/1024 <= 0.025 < P(W+ <= 9) = 33/1024, so k = 9,
        // with confidence 1 - 50/1024.
        let d: Vec<f64> = (1..=10).map(f64::from).collect();
        let i = walsh_interval(&d, 0.05).unwrap();
        assert_eq!((i.estimate, i.low, i.high), (5.5, 3.0, 8.0));
        assert!(close(i.confidence, 1.0 - 50.0 / 1024.0, 1e-15), "{i:?}");
    }

    #[test]
    fn the_interval_inverts_the_test() {
        let mut rng = SplitMix::new(42);
        let (mut rejected, mut kept) = (0, 0);
        for alpha in [0.10, 0.05] {
            for _ in 0..2000 {
                let n = 3 + (rng.next_u64() % 12) as usize;
                let shift = [-0.6, -0.2, 0.0, 0.1, 0.5][(rng.next_u64() % 5) as usize];
                let d: Vec<f64> = (0..n).map(|_| unit(&mut rng) - 0.5 + shift).collect();
                let p = signed_rank(&d).unwrap().p_two_sided();
                let Some(i) = walsh_interval(&d, alpha) else {
                    assert!(!stats::reaches_alpha(2.0 * min_p_one_sided(n), alpha));
                    continue;
                };
                let excludes = i.low > 0.0 || i.high < 0.0;
                assert_eq!(excludes, stats::reaches_alpha(p, alpha), "{d:?} {i:?} {p}");
                assert!(i.low <= i.estimate && i.estimate <= i.high);
                assert!(i.confidence >= 1.0 - alpha - 1e-9);
                if excludes {
                    rejected += 1
                } else {
                    kept += 1
                }
            }
        }
        assert!(rejected > 300 && kept > 300, "{rejected} {kept}");
    }
}
