//! Figures as people read them on a console or in a table.

/// A microsecond figure in the unit a reader takes in at a glance.
pub fn format_us(us: u64) -> String {
    match us {
        0..=999 => format!("{us}µs"),
        1_000..=999_999 => format!("{:.2}ms", us as f64 / 1e3),
        _ => format!("{:.2}s", us as f64 / 1e6),
    }
}
