//! Percentiles and the units figures are printed in.

use std::time::Duration;

/// Nearest-rank percentile `p` (in per mille, 500 = p50, 999 = p99.9) of a
/// sorted sample (None: empty).
pub(crate) fn permille(sorted: &[Duration], p: usize) -> Option<Duration> {
    let rank = (sorted.len() * p).div_ceil(1000).max(1);
    sorted.get(rank - 1).copied()
}

/// Nearest-rank percentile `p` (in percent) of a sorted sample.
pub(crate) fn pct(sorted: &[Duration], p: usize) -> Option<Duration> {
    permille(sorted, p * 10)
}

/// The sample, sorted.
pub(crate) fn sorted(mut sample: Vec<Duration>) -> Vec<Duration> {
    sample.sort_unstable();
    sample
}

/// Microseconds for a JSON line ("null": no value).
pub(crate) fn us(d: Option<Duration>) -> String {
    d.map_or("null".to_owned(), |d| d.as_micros().to_string())
}

/// Milliseconds to the microsecond, for tables ("-": no value).
pub(crate) fn ms(d: Option<Duration>) -> String {
    d.map_or("-".to_owned(), |d| {
        format!("{:.3} ms", d.as_secs_f64() * 1e3)
    })
}

/// A label safe inside a hand-written JSON string.
pub(crate) fn label(text: &str) -> String {
    text.replace(['"', '\\'], "_")
}

/// Prints a table: one column per run, one row per figure.
pub(crate) fn print_columns(title: &str, heads: &[String], rows: &[(&str, Vec<String>)]) {
    let width = 2 + heads
        .iter()
        .chain(rows.iter().flat_map(|(_, cells)| cells))
        .map(String::len)
        .fold(10, usize::max);
    let mut out = format!("\n{title}\n{:<28}", "");
    for head in heads {
        out.push_str(&format!("{head:>width$}"));
    }
    for (name, cells) in rows {
        out.push_str(&format!("\n{name:<28}"));
        for cell in cells {
            out.push_str(&format!("{cell:>width$}"));
        }
    }
    println!("{out}");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nearest rank: p50 of 1..=10 is 5, p99.9 the largest.
    #[test]
    fn nearest_rank() {
        let sample: Vec<_> = (1..=10).map(Duration::from_millis).collect();
        assert_eq!(pct(&sample, 50), Some(Duration::from_millis(5)));
        assert_eq!(permille(&sample, 999), Some(Duration::from_millis(10)));
        assert_eq!(pct(&[], 50), None);
    }
}
