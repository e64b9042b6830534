//! Distribution-free statistics for `compare` and `gate`.
//!
//! Benchmark figures (throughput, latency, error counts) from a handful of
//! repeated runs on a noisy machine are neither normal nor numerous, so this
//! module follows the approach of Go's benchstat and avoids assuming any
//! distribution:
//!
//! * [`mann_whitney`]: the two-sided Mann-Whitney U (Wilcoxon rank-sum) test.
//!   For up to [`EXACT_LIMIT`] pooled samples the p-value is exact: it comes
//!   from the permutation distribution of the rank sum, computed with ties
//!   (midranks) by dynamic programming. Larger samples use the normal
//!   approximation with tie and continuity corrections.
//! * [`ratio_interval`] / [`shift_interval`]: Hodges–Lehmann estimates of the
//!   ratio or shift between the two sides, with the confidence interval that
//!   inverts the same test (order statistics of the pairwise ratios or
//!   differences, chosen from the null distribution of U).
//! * [`min_p_value`] / [`min_samples`]: how small a p-value the sample sizes
//!   allow at all, so callers can say "too few runs" instead of "no change".
//!
//! Every function is pure and returns `None` (or a documented fallback)
//! instead of panicking on empty, non-finite or otherwise unusable input.

/// Largest pooled sample size `n + m` for which p-values and the null
/// distribution of U are computed exactly; above it the normal approximation
/// is used. At 60 the exact computation for `n = m = 30` takes about 1 ms
/// (optimised build), and the normal approximation is already within about
/// 0.01 of the exact p-value.
pub const EXACT_LIMIT: usize = 60;

/// Relative slack when comparing a p-value with `alpha`, so that a p-value
/// equal to `alpha` in exact arithmetic (e.g. 2/20 against 0.10) still counts
/// as reaching it despite rounding in the sums of probabilities.
const REL_TOL: f64 = 1e-9;

/// Result of a two-sided Mann-Whitney U (Wilcoxon rank-sum) test of `cand` against `base`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RankTest {
    /// U of `cand`: the number of pairs (b, c) with c > b, ties counting 1/2.
    /// It ranges from 0 (cand all below base) to `n * m` (cand all above).
    pub u: f64,
    /// Two-sided p-value: the probability under H0 (both sides drawn from the
    /// same distribution) of a rank sum at least as far from its mean as the
    /// observed one. Compare it with `alpha` using [`reaches_alpha`].
    pub p_value: f64,
    /// Whether `p_value` is exact (permutation distribution) rather than the
    /// normal approximation.
    pub exact: bool,
}

/// A point estimate with a distribution-free confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Interval {
    /// The Hodges–Lehmann estimate: the median of all pairwise ratios or differences.
    pub estimate: f64,
    /// Lower end of the confidence interval (inclusive).
    pub low: f64,
    /// Upper end of the confidence interval (inclusive).
    pub high: f64,
    /// The achieved confidence (e.g. 0.90), which is >= 1 - alpha.
    pub confidence: f64,
}

/// Whether `p` reaches significance level `alpha` (`p <= alpha`, with a
/// relative tolerance of 1e-9 for rounding). All functions here use this
/// comparison, so a gate using it agrees with [`ratio_interval`].
pub fn reaches_alpha(p: f64, alpha: f64) -> bool {
    p <= alpha * (1.0 + REL_TOL)
}

/// Two-sided Mann-Whitney U test of `cand` against `base`.
///
/// None if either side is empty or any value is non-finite. Exact (with ties)
/// when `base.len() + cand.len() <= EXACT_LIMIT`, else the normal
/// approximation. If every value is tied, the p-value is 1.
pub fn mann_whitney(base: &[f64], cand: &[f64]) -> Option<RankTest> {
    rank_test(base, cand, base.len() + cand.len() <= EXACT_LIMIT)
}

/// The smallest two-sided p-value a rank test can reach with n and m samples and no ties: 2 / C(n+m, n).
///
/// Returns 1 when either side is empty (no test is possible).
pub fn min_p_value(n: usize, m: usize) -> f64 {
    if n == 0 || m == 0 {
        return 1.0;
    }
    (2.0 / binomial(n + m, n)).min(1.0)
}

/// The smallest number of samples per side (equal sides) at which the two-sided test can reach `alpha`.
///
/// 0.10 -> 3, 0.05 -> 4, 0.01 -> 5. Returns `usize::MAX` when `alpha` is not
/// positive (or NaN), as no sample size suffices.
pub fn min_samples(alpha: f64) -> usize {
    if alpha.is_nan() || alpha <= 0.0 {
        return usize::MAX;
    }
    // Terminates: min_p_value falls to 0 once C(2n, n) overflows to infinity.
    (1..)
        .find(|&n| reaches_alpha(min_p_value(n, n), alpha))
        .unwrap_or(usize::MAX)
}

/// Exact null distribution helper: P(U <= k) for sample sizes n, m without ties.
///
/// Exact for `n + m <= EXACT_LIMIT`, else the normal approximation with
/// continuity correction. With an empty side U is always 0, so the result is 1.
pub fn u_cdf(n: usize, m: usize, k: usize) -> f64 {
    NullU::new(n, m).cdf(k)
}

/// Hodges–Lehmann estimate of the ratio cand/base (median of all pairwise ratios c_j / b_i) with the
/// confidence interval obtained by inverting the Mann-Whitney test on log values: the k-th smallest and
/// k-th largest pairwise log-ratios, where k is chosen from the exact null distribution of U (no ties)
/// so that the interval's confidence is >= 1 - alpha (normal approximation for large n+m).
/// None unless every value on both sides is > 0 and finite, or when the sides are too small for any
/// interval at that alpha (then the caller reports "no verdict").
///
/// The log is monotone, so the order statistics of the log-ratios are those
/// of the ratios; the ratios are used directly. `alpha` must lie in (0, 1).
/// Without ties, the interval excludes 1 exactly when [`mann_whitney`]'s
/// p-value reaches `alpha` (see [`reaches_alpha`]).
pub fn ratio_interval(base: &[f64], cand: &[f64], alpha: f64) -> Option<Interval> {
    let positive = |xs: &[f64]| xs.iter().all(|x| x.is_finite() && *x > 0.0);
    if !positive(base) || !positive(cand) {
        return None;
    }
    pairwise_interval(base, cand, alpha, |b, c| c / b)
}

/// The same for the shift cand - base (pairwise differences), for figures that can be zero (counts).
///
/// None if any value is non-finite, `alpha` is outside (0, 1), or the sides
/// are too small for any interval at that alpha. Without ties, the interval
/// excludes 0 exactly when [`mann_whitney`]'s p-value reaches `alpha`.
pub fn shift_interval(base: &[f64], cand: &[f64], alpha: f64) -> Option<Interval> {
    if !all_finite(base) || !all_finite(cand) {
        return None;
    }
    pairwise_interval(base, cand, alpha, |b, c| c - b)
}

/// The median of `xs` (mean of the two middle values for an even count).
/// None if `xs` is empty or holds a non-finite value.
pub fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() || !all_finite(xs) {
        return None;
    }
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some(median_sorted(&sorted))
}

pub(crate) fn all_finite(xs: &[f64]) -> bool {
    xs.iter().all(|x| x.is_finite())
}

/// Median of a non-empty sorted slice; halves before adding to avoid overflow.
pub(crate) fn median_sorted(sorted: &[f64]) -> f64 {
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 1 {
        sorted[mid]
    } else {
        sorted[mid - 1] / 2.0 + sorted[mid] / 2.0
    }
}

/// C(n, k) as f64 (may round for large values, or overflow to infinity).
fn binomial(n: usize, k: usize) -> f64 {
    let k = k.min(n.saturating_sub(k));
    (1..=k).fold(1.0, |acc, i| acc * (n - k + i) as f64 / i as f64)
}

/// Ranks of a pooled sample: doubled midranks (integers) and the tie term
/// sum(t^3 - t) over tie groups of size t, for the variance correction.
pub(crate) struct Ranking {
    pub(crate) doubled: Vec<usize>,
    pub(crate) tie_term: f64,
    pub(crate) groups: usize,
}

/// Doubled midranks: a tie group at 1-based positions a..=b gets (a + b),
/// twice its mean rank, so that all rank sums stay integers.
pub(crate) fn rank_pooled(pooled: &[f64]) -> Ranking {
    let mut order: Vec<usize> = (0..pooled.len()).collect();
    // Finite input: partial_cmp never fails, and -0.0 ties with 0.0.
    order.sort_by(|&i, &j| {
        pooled[i]
            .partial_cmp(&pooled[j])
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let mut ranking = Ranking {
        doubled: vec![0; pooled.len()],
        tie_term: 0.0,
        groups: 0,
    };
    let mut start = 0;
    while start < order.len() {
        let value = pooled[order[start]];
        let end = start
            + order[start..]
                .iter()
                .take_while(|&&i| pooled[i] == value)
                .count();
        for &i in &order[start..end] {
            ranking.doubled[i] = (start + 1) + end; // positions start+1 ..= end
        }
        let t = (end - start) as f64;
        ranking.tie_term += t * t * t - t;
        ranking.groups += 1;
        start = end;
    }
    ranking
}

/// The test itself, with the exact/approximate choice made by the caller (tests force either).
fn rank_test(base: &[f64], cand: &[f64], exact: bool) -> Option<RankTest> {
    if base.is_empty() || cand.is_empty() || !all_finite(base) || !all_finite(cand) {
        return None;
    }
    let (n, m) = (base.len(), cand.len());
    let pooled: Vec<f64> = base.iter().chain(cand).copied().collect();
    let ranking = rank_pooled(&pooled);
    let cand_sum: usize = ranking.doubled[n..].iter().sum();
    // U = R - m(m+1)/2 with R the (undoubled) rank sum of cand.
    let u = (cand_sum as f64 - (m * (m + 1)) as f64) / 2.0;
    let p_value = if ranking.groups <= 1 {
        1.0 // every value tied: no evidence either way
    } else if exact {
        exact_p(&ranking.doubled, n, cand_sum)
    } else {
        normal_p(n, m, u, ranking.tie_term)
    };
    Some(RankTest { u, p_value, exact })
}

/// Exact two-sided p-value of the rank sum, given the doubled midranks of the
/// pooled sample (base first, n of them) and cand's doubled rank sum.
fn exact_p(doubled: &[usize], n: usize, cand_sum: usize) -> f64 {
    let total_items = doubled.len();
    let m = total_items - n;
    // The two sides' sums are complementary, so enumerate the smaller side.
    let all_sum: usize = doubled.iter().sum();
    let (pick, observed) = if m <= n {
        (m, cand_sum)
    } else {
        (n, all_sum - cand_sum)
    };
    // Dividing by the common factor (2 without ties) shrinks the DP table.
    let g = doubled.iter().fold(0, |acc, &r| gcd(acc, r)).max(1);
    let weights: Vec<usize> = doubled.iter().map(|r| r / g).collect();
    let (observed, all_sum) = (observed / g, all_sum / g);
    let counts = subset_sum_counts(&weights, pick);
    // Distance from the mean pick * all_sum / N, scaled by N to stay integral.
    let distance = |s: usize| (total_items * s).abs_diff(pick * all_sum);
    let threshold = distance(observed);
    let total: f64 = counts.iter().sum();
    let tail: f64 = (0..counts.len())
        .filter(|&s| distance(s) >= threshold)
        .map(|s| counts[s])
        .sum();
    (tail / total).min(1.0)
}

pub(crate) fn gcd(a: usize, b: usize) -> usize {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Number of ways (as f64) to choose `pick` of the items so that their weights
/// sum to s, for every s; index s of the result.
///
/// DP over (items seen, items chosen, sum), keeping one row per items-chosen
/// count. Counts stay below C(EXACT_LIMIT, EXACT_LIMIT/2) ~ 1.2e17, far from
/// overflow; the caller normalises them to probabilities.
fn subset_sum_counts(weights: &[usize], pick: usize) -> Vec<f64> {
    let width = weights.iter().sum::<usize>() + 1;
    let mut table = vec![0.0; (pick + 1) * width];
    table[0] = 1.0;
    let mut reach = 0; // largest sum reachable so far
    for (seen, &w) in weights.iter().enumerate() {
        reach += w;
        // Rows that can no longer reach `pick` are dead; skip them. Going
        // down in chosen-count reads each previous row before it is updated.
        let needed = pick.saturating_sub(weights.len() - 1 - seen).max(1);
        for chosen in (needed..=pick.min(seen + 1)).rev() {
            let (lower, upper) = table.split_at_mut(chosen * width);
            let prev = &lower[(chosen - 1) * width..];
            let row = &mut upper[..width];
            for (dst, src) in row[w..=reach].iter_mut().zip(&prev[..=reach - w]) {
                *dst += *src;
            }
        }
    }
    table.split_off(pick * width)
}

/// Two-sided p-value from the normal approximation of U, with tie correction
/// of the variance and a continuity correction of 1/2.
fn normal_p(n: usize, m: usize, u: f64, tie_term: f64) -> f64 {
    let (nf, mf) = (n as f64, m as f64);
    let total = nf + mf;
    let variance = nf * mf / 12.0 * ((total + 1.0) - tie_term / (total * (total - 1.0)));
    if variance.is_nan() || variance <= 0.0 {
        return 1.0;
    }
    let z = ((u - nf * mf / 2.0).abs() - 0.5).max(0.0) / variance.sqrt();
    erfc(z / std::f64::consts::SQRT_2).min(1.0) // = 2 * (1 - Phi(z))
}

/// Null distribution of U without ties: exact cumulative table, or the
/// normal approximation beyond `EXACT_LIMIT`.
enum NullU {
    Exact(Vec<f64>),
    Normal { mean: f64, sd: f64, max: usize },
}

impl NullU {
    fn new(n: usize, m: usize) -> NullU {
        if n + m > EXACT_LIMIT || n == 0 || m == 0 {
            return NullU::normal(n, m);
        }
        // U of the smaller side = its rank sum minus pick(pick+1)/2.
        let pick = n.min(m);
        let ranks: Vec<usize> = (1..=n + m).collect();
        let counts = subset_sum_counts(&ranks, pick);
        let offset = pick * (pick + 1) / 2;
        let total: f64 = counts.iter().sum();
        let mut running = 0.0;
        let cdf = counts[offset..=offset + n * m]
            .iter()
            .map(|c| {
                running += c;
                (running / total).min(1.0)
            })
            .collect();
        NullU::Exact(cdf)
    }

    /// Normal approximation (mean nm/2, variance nm(n+m+1)/12).
    fn normal(n: usize, m: usize) -> NullU {
        let (nf, mf) = (n as f64, m as f64);
        let sd = (nf * mf * (nf + mf + 1.0) / 12.0).sqrt();
        NullU::Normal {
            mean: nf * mf / 2.0,
            sd,
            max: n * m,
        }
    }

    /// P(U <= k).
    fn cdf(&self, k: usize) -> f64 {
        match self {
            NullU::Exact(table) => table[k.min(table.len() - 1)],
            NullU::Normal { max, .. } if k >= *max => 1.0,
            NullU::Normal { mean, sd, .. } => normal_cdf((k as f64 + 0.5 - mean) / sd),
        }
    }
}

/// The largest k for which [k-th smallest, k-th largest] of `count` ordered statistics
/// covers with confidence 1 − 2·cdf(k − 1) >= 1 − alpha, `cdf` the test statistic's null
/// distribution function; None if even k = 1 (the full range) falls short. Shared by the
/// unpaired (pairwise ratios) and paired (Walsh averages) intervals.
pub(super) fn interval_rank(count: usize, cdf: impl Fn(usize) -> f64, alpha: f64) -> Option<usize> {
    let covers = |k: usize| reaches_alpha(2.0 * cdf(k - 1), alpha);
    if !covers(1) {
        return None;
    }
    // covers(k) is monotone (true, then false); k never passes the median.
    let (mut lo, mut hi) = (1, count.div_ceil(2));
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if covers(mid) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

/// The largest k such that [k-th smallest, k-th largest] pairwise statistic
/// has confidence 1 - 2 P(U <= k-1) >= 1 - alpha; with that confidence.
/// None if even k = 1 (the full range) falls short.
fn choose_k(n: usize, m: usize, alpha: f64) -> Option<(usize, f64)> {
    if n == 0 || m == 0 || !(alpha > 0.0 && alpha < 1.0) {
        return None;
    }
    let null = NullU::new(n, m);
    let k = interval_rank(n * m, |k| null.cdf(k), alpha)?;
    let confidence = (1.0 - 2.0 * null.cdf(k - 1)).clamp(0.0, 1.0);
    Some((k, confidence))
}

/// Hodges–Lehmann estimate and interval of `stat(b, c)` over all pairs.
fn pairwise_interval(
    base: &[f64],
    cand: &[f64],
    alpha: f64,
    stat: impl Fn(f64, f64) -> f64,
) -> Option<Interval> {
    let (k, confidence) = choose_k(base.len(), cand.len(), alpha)?;
    let stat = &stat;
    let mut values: Vec<f64> = base
        .iter()
        .flat_map(|&b| cand.iter().map(move |&c| stat(b, c)))
        .collect();
    values.sort_by(f64::total_cmp);
    Some(Interval {
        estimate: median_sorted(&values),
        low: values[k - 1],
        high: values[values.len() - k],
        confidence,
    })
}

/// Standard normal cumulative distribution function.
pub(crate) fn normal_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// Complementary error function, to about 1e-15 relative error for x < 3
/// and better than 1e-12 beyond.
///
/// Power series of erf (all terms positive, so no cancellation) below 3,
/// continued fraction of erfc above, where 1 - erf would lose precision.
fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x < 3.0 {
        // erf(x) = 2/sqrt(pi) e^{-x^2} sum_k (2x^2)^k x / (1*3*...*(2k+1))
        let (mut term, mut sum, mut k) = (x, x, 0.0);
        while term > sum * 1e-17 {
            k += 1.0;
            term *= 2.0 * x * x / (2.0 * k + 1.0);
            sum += term;
        }
        return 1.0 - 2.0 / std::f64::consts::PI.sqrt() * (-x * x).exp() * sum;
    }
    // erfc(x) = e^{-x^2}/sqrt(pi) / (x + (1/2)/(x + 1/(x + (3/2)/(x + ...))))
    let mut fraction = x;
    for k in (1..=60).rev() {
        fraction = x + (k as f64 / 2.0) / fraction;
    }
    (-x * x).exp() / std::f64::consts::PI.sqrt() / fraction
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The project's seeded PRNG, for reproducible random cases.
    use coordbench_splitmix::SplitMix64 as SplitMix;

    trait Draw {
        fn below(&mut self, n: u64) -> u64;
        /// Uniform in [0, 1).
        fn unit(&mut self) -> f64;
    }

    impl Draw for SplitMix {
        fn below(&mut self, n: u64) -> u64 {
            self.next_u64() % n
        }

        fn unit(&mut self) -> f64 {
            (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    /// Brute force: enumerate every split of the pooled sample into n base
    /// and m cand items, computing 2U directly from pairwise comparisons.
    fn brute_force(base: &[f64], cand: &[f64]) -> (f64, f64) {
        let pooled: Vec<f64> = base.iter().chain(cand).copied().collect();
        let (n, total) = (base.len(), pooled.len());
        let twice_u = |mask: u32| -> i64 {
            let mut sum = 0;
            for c in (0..total).filter(|i| mask >> i & 1 == 1) {
                for b in (0..total).filter(|i| mask >> i & 1 == 0) {
                    sum += match pooled[c].partial_cmp(&pooled[b]).unwrap() {
                        std::cmp::Ordering::Greater => 2,
                        std::cmp::Ordering::Equal => 1,
                        std::cmp::Ordering::Less => 0,
                    };
                }
            }
            sum
        };
        let m = (total - n) as u32;
        let pairs = (n * (total - n)) as i64; // mean of 2U
        let observed = twice_u(((1u32 << total) - 1) & !((1u32 << n) - 1));
        let (mut hits, mut splits) = (0u64, 0u64);
        for mask in (0u32..1 << total).filter(|mask| mask.count_ones() == m) {
            splits += 1;
            if (twice_u(mask) - pairs).abs() >= (observed - pairs).abs() {
                hits += 1;
            }
        }
        (observed as f64 / 2.0, hits as f64 / splits as f64)
    }

    fn sample(rng: &mut SplitMix, len: usize, f: impl Fn(&mut SplitMix) -> f64) -> Vec<f64> {
        (0..len).map(|_| f(rng)).collect()
    }

    #[test]
    fn separated_samples_reach_the_minimum_p() {
        for (n, expected) in [(3, 2.0 / 20.0), (4, 2.0 / 70.0), (5, 2.0 / 252.0)] {
            let base: Vec<f64> = (0..n).map(|i| 100.0 + i as f64).collect();
            let cand: Vec<f64> = (0..n).map(|i| 200.0 + i as f64).collect();
            let up = mann_whitney(&base, &cand).unwrap();
            assert!(close(up.p_value, expected, 1e-15), "{n}: {}", up.p_value);
            assert_eq!(up.u, (n * n) as f64);
            assert!(up.exact);
            let down = mann_whitney(&cand, &base).unwrap();
            assert!(close(down.p_value, expected, 1e-15));
            assert_eq!(down.u, 0.0);
            assert!(close(min_p_value(n, n), expected, 1e-15));
        }
    }

    #[test]
    fn identical_samples_give_p_one() {
        let all_tied = mann_whitney(&[5.0, 5.0, 5.0], &[5.0, 5.0, 5.0]).unwrap();
        assert_eq!((all_tied.p_value, all_tied.u), (1.0, 4.5));
        let zeros = mann_whitney(&[0.0; 5], &[0.0, -0.0, 0.0]).unwrap();
        assert_eq!(zeros.p_value, 1.0);
        let same = mann_whitney(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]).unwrap();
        assert!(close(same.p_value, 1.0, 1e-12));
        assert_eq!(same.u, 4.5);
        let big = mann_whitney(&[7.0; 40], &[7.0; 40]).unwrap();
        assert_eq!((big.p_value, big.exact), (1.0, false));
    }

    #[test]
    fn rejects_empty_and_non_finite_input() {
        assert!(mann_whitney(&[], &[1.0]).is_none());
        assert!(mann_whitney(&[1.0], &[]).is_none());
        assert!(mann_whitney(&[1.0, f64::NAN], &[2.0]).is_none());
        assert!(mann_whitney(&[1.0], &[f64::INFINITY]).is_none());
        assert!(ratio_interval(&[1.0, 2.0, 3.0], &[1.0, 2.0, f64::NAN], 0.1).is_none());
        assert!(shift_interval(&[1.0, 2.0, 3.0], &[1.0, 2.0, f64::NAN], 0.1).is_none());
        assert!(median(&[]).is_none());
        assert!(median(&[1.0, f64::NAN]).is_none());
    }

    #[test]
    fn exact_p_matches_brute_force_with_ties() {
        let mut rng = SplitMix::new(0x5eed);
        for case in 0..300 {
            let (n, m) = (1 + rng.below(6) as usize, 1 + rng.below(6) as usize);
            let levels = [1, 2, 3, 5, 1000][case % 5]; // few levels = many ties
            let base = sample(&mut rng, n, |r| r.below(levels) as f64);
            let cand = sample(&mut rng, m, |r| {
                r.below(levels) as f64 + 0.5 * r.below(2) as f64
            });
            let test = mann_whitney(&base, &cand).unwrap();
            let (u, p) = brute_force(&base, &cand);
            assert_eq!(test.u, u, "{base:?} vs {cand:?}");
            assert!(
                close(test.p_value, p, 1e-12),
                "{base:?} vs {cand:?}: {} != {p}",
                test.p_value
            );
        }
    }

    #[test]
    fn normal_approximation_agrees_with_exact_for_30_per_side() {
        let base: Vec<f64> = (0..30).map(|i| i as f64).collect();
        let cand: Vec<f64> = (0..30).map(|i| i as f64 + 4.5).collect();
        let exact = rank_test(&base, &cand, true).unwrap();
        let approx = rank_test(&base, &cand, false).unwrap();
        assert_eq!(exact.u, 575.0);
        assert!(
            exact.p_value > 0.02 && exact.p_value < 0.2,
            "{}",
            exact.p_value
        );
        assert!(
            close(exact.p_value, approx.p_value, 0.01),
            "{exact:?} vs {approx:?}"
        );
        // Also with heavy ties (integer counts 0..4).
        let mut rng = SplitMix::new(7);
        let base = sample(&mut rng, 30, |r| r.below(4) as f64);
        let cand = sample(&mut rng, 30, |r| (r.below(4) + r.below(2)) as f64);
        let exact = rank_test(&base, &cand, true).unwrap();
        let approx = rank_test(&base, &cand, false).unwrap();
        assert!(
            close(exact.p_value, approx.p_value, 0.01),
            "{exact:?} vs {approx:?}"
        );
        assert!(mann_whitney(&base, &cand).unwrap().exact);
        assert!(
            !mann_whitney(&base, &[cand.clone(), vec![1.0]].concat())
                .unwrap()
                .exact
        );
    }

    #[test]
    fn min_samples_and_min_p() {
        assert_eq!(min_samples(0.10), 3);
        assert_eq!(min_samples(0.05), 4);
        assert_eq!(min_samples(0.01), 5);
        assert_eq!(min_samples(1.0), 1);
        assert_eq!(min_samples(0.0), usize::MAX);
        assert_eq!(min_samples(f64::NAN), usize::MAX);
        assert!(min_samples(1e-300) < 1000);
        assert_eq!(min_p_value(0, 5), 1.0);
        assert_eq!(min_p_value(1, 1), 1.0);
        assert!(close(min_p_value(2, 3), 0.2, 1e-15));
    }

    #[test]
    fn u_cdf_exact_values_and_symmetry() {
        assert!(close(u_cdf(3, 3, 0), 0.05, 1e-15));
        assert!(close(u_cdf(3, 3, 1), 0.10, 1e-15));
        assert!(close(u_cdf(2, 2, 1), 2.0 / 6.0, 1e-15));
        assert_eq!(u_cdf(3, 3, 9), 1.0);
        assert_eq!(u_cdf(3, 3, 1000), 1.0);
        assert_eq!(u_cdf(0, 4, 0), 1.0);
        for (n, m) in [(3, 5), (7, 4), (10, 10), (30, 30)] {
            let (pairs, null) = (n * m, NullU::new(n, m));
            for k in 0..pairs {
                // P(U <= k) = P(U >= M - k) = 1 - P(U <= M - k - 1)
                let mirrored = 1.0 - null.cdf(pairs - k - 1);
                assert!(close(null.cdf(k), mirrored, 1e-12), "{n} {m} {k}");
            }
        }
        // The normal approximation used beyond EXACT_LIMIT is close at the limit.
        let normal = NullU::normal(30, 30);
        for k in (300..=600).step_by(20) {
            assert!(close(u_cdf(30, 30, k), normal.cdf(k), 0.005), "{k}");
        }
    }

    #[test]
    fn u_cdf_matches_brute_force() {
        for (n, m) in [(1, 1), (2, 5), (4, 5), (6, 6)] {
            // Histogram of U over every split of n + m distinct values.
            let total = n + m;
            let mut histogram = vec![0u64; n * m + 1];
            for mask in (0u32..1 << total).filter(|x| x.count_ones() == m as u32) {
                let pairs_above = (0..total)
                    .filter(|c| mask >> c & 1 == 1)
                    .map(|c| (0..c).filter(|b| mask >> b & 1 == 0).count())
                    .sum::<usize>();
                histogram[pairs_above] += 1;
            }
            let splits: u64 = histogram.iter().sum();
            let mut below = 0;
            for (k, count) in histogram.iter().enumerate() {
                below += count;
                assert!(
                    close(u_cdf(n, m, k), below as f64 / splits as f64, 1e-12),
                    "{n} {m} {k}"
                );
            }
        }
    }

    #[test]
    fn three_vs_three_interval_is_full_range() {
        let base = [10.0, 11.0, 12.5];
        let cand = [10.5, 13.0, 9.0];
        let iv = ratio_interval(&base, &cand, 0.10).unwrap();
        let ratios: Vec<f64> = base
            .iter()
            .flat_map(|b| cand.iter().map(move |c| c / b))
            .collect();
        let min = ratios.iter().copied().fold(f64::INFINITY, f64::min);
        let max = ratios.iter().copied().fold(0.0, f64::max);
        assert_eq!((iv.low, iv.high), (min, max));
        assert!(close(iv.confidence, 0.90, 1e-12));
    }

    #[test]
    fn ratio_interval_on_a_ten_percent_drop() {
        let iv = ratio_interval(&[100.0, 101.0, 102.0], &[90.0, 91.0, 92.0], 0.10).unwrap();
        assert!(close(iv.estimate, 0.9, 0.01), "{iv:?}");
        assert!(
            iv.low < iv.estimate && iv.estimate < iv.high && iv.high < 1.0,
            "{iv:?}"
        );
    }

    #[test]
    fn intervals_need_enough_samples_and_valid_input() {
        assert!(ratio_interval(&[1.0, 2.0], &[3.0, 4.0], 0.10).is_none());
        assert!(shift_interval(&[1.0, 2.0], &[3.0, 4.0], 0.10).is_none());
        assert!(ratio_interval(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], 0.05).is_none());
        assert!(ratio_interval(&[1.0, 2.0, 3.0, 4.0], &[4.0, 5.0, 6.0, 7.0], 0.05).is_some());
        assert!(ratio_interval(&[0.0, 2.0, 3.0], &[4.0, 5.0, 6.0], 0.10).is_none());
        assert!(ratio_interval(&[-1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], 0.10).is_none());
        assert!(ratio_interval(&[], &[4.0, 5.0, 6.0], 0.10).is_none());
        for alpha in [0.0, 1.0, -0.5, f64::NAN] {
            assert!(shift_interval(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], alpha).is_none());
        }
    }

    #[test]
    fn shift_interval_handles_zero_counts() {
        let iv = shift_interval(&[0.0; 4], &[0.0; 4], 0.05).unwrap();
        assert_eq!((iv.estimate, iv.low, iv.high), (0.0, 0.0, 0.0));
        let iv = shift_interval(&[0.0, 0.0, 1.0], &[3.0, 4.0, 5.0], 0.10).unwrap();
        assert_eq!((iv.estimate, iv.low, iv.high), (4.0, 2.0, 5.0));
    }

    /// Without ties, the interval excludes the null value exactly when the test rejects.
    fn check_duality(rng: &mut SplitMix, n: usize, m: usize, alpha: f64) -> Option<bool> {
        let factor = [0.5, 0.8, 0.95, 1.0, 1.05, 1.25, 2.0][rng.below(7) as usize];
        let base = sample(rng, n, |r| 1.0 + r.unit());
        let cand = sample(rng, m, |r| (1.0 + r.unit()) * factor);
        let rejects = reaches_alpha(mann_whitney(&base, &cand).unwrap().p_value, alpha);
        let ratio = ratio_interval(&base, &cand, alpha);
        let shift = shift_interval(&base, &cand, alpha);
        let (Some(ratio), Some(shift)) = (ratio, shift) else {
            assert!(!reaches_alpha(min_p_value(n, m), alpha), "{n} {m} {alpha}");
            assert!(ratio.is_none() && shift.is_none());
            return None;
        };
        assert_eq!(
            ratio.low > 1.0 || ratio.high < 1.0,
            rejects,
            "{base:?} {cand:?} {ratio:?}"
        );
        assert_eq!(
            shift.low > 0.0 || shift.high < 0.0,
            rejects,
            "{base:?} {cand:?} {shift:?}"
        );
        assert!(ratio.confidence >= 1.0 - alpha - 1e-9 && ratio.confidence <= 1.0);
        assert!(ratio.low <= ratio.estimate && ratio.estimate <= ratio.high);
        Some(rejects)
    }

    #[test]
    fn intervals_invert_the_test() {
        let mut rng = SplitMix::new(42);
        let (mut rejected, mut kept) = (0, 0);
        for alpha in [0.10, 0.05] {
            for _ in 0..2000 {
                let (n, m) = (3 + rng.below(6) as usize, 3 + rng.below(6) as usize);
                match check_duality(&mut rng, n, m, alpha) {
                    Some(true) => rejected += 1,
                    Some(false) => kept += 1,
                    None => {}
                }
            }
        }
        assert!(rejected > 300 && kept > 300, "{rejected} {kept}");
        // Normal-approximation regime (n + m > EXACT_LIMIT).
        for _ in 0..50 {
            check_duality(&mut rng, 40, 35, 0.05).unwrap();
        }
    }

    #[test]
    fn median_values() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[f64::MAX, f64::MAX]), Some(f64::MAX));
    }

    #[test]
    fn erfc_reference_values() {
        let cases = [
            (0.0, 1.0),
            (0.5, 0.479_500_122_186_953_5),
            (1.0, 0.157_299_207_050_285_13),
            (2.0, 0.004_677_734_981_047_266),
            (3.0, 2.209_049_699_858_544e-5),
            (5.0, 1.537_459_794_428_035e-12),
            (-1.0, 1.842_700_792_949_715),
        ];
        for (x, expected) in cases {
            assert!(
                close(erfc(x), expected, 1e-12 * expected.max(1e-3)),
                "{x}: {}",
                erfc(x)
            );
        }
        // The two methods meet at 3 without a jump (slope there is about -1.4e-4).
        assert!(close(erfc(3.0 - 1e-12), erfc(3.0), 1e-15));
    }
}
