//! Credentials drawn per run for secured clusters.

use rand::Rng;

/// A fresh password for a `--secure` run (never written anywhere).
pub fn generated_password() -> String {
    let mut rng = rand::rng();
    (0..24)
        .map(|_| char::from_digit(rng.random_range(0..36), 36).unwrap_or('0'))
        .collect()
}
