//! Cumulative counters read at intervals (CPU seconds, bytes written): their value at any
//! instant, linear between the readings around it, so a window's share can be taken from
//! readings that do not fall on its edges.

use std::time::Instant;

/// The counter `value` of `readings` (in time order, each taken at `taken`) at `t`: linear
/// between the readings around it, the first or last reading outside them.
pub fn at<T>(
    readings: &[T],
    t: Instant,
    taken: impl Fn(&T) -> Instant,
    value: impl Fn(&T) -> f64,
) -> f64 {
    match readings.iter().position(|r| taken(r) >= t) {
        None => readings.last().map_or(0.0, &value),
        Some(0) => value(&readings[0]),
        Some(i) => {
            let (a, b) = (&readings[i - 1], &readings[i]);
            let span = (taken(b) - taken(a)).as_secs_f64();
            let frac = if span > 0.0 {
                (t - taken(a)).as_secs_f64() / span
            } else {
                1.0
            };
            value(a) + (value(b) - value(a)) * frac
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn between_readings_is_linear_outside_them_is_clamped() {
        let t0 = Instant::now();
        let r = [(t0, 0.0), (t0 + Duration::from_secs(2), 4.0)];
        let v = |t| at(&r, t, |r| r.0, |r| r.1);
        assert_eq!(v(t0 + Duration::from_millis(500)), 1.0);
        assert_eq!(v(t0 + Duration::from_secs(9)), 4.0);
        assert_eq!(at::<(Instant, f64)>(&[], t0, |r| r.0, |r| r.1), 0.0);
    }
}
