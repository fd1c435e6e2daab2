//! What the lab's Rust peers (bench/scenarios.md) share: the command line, the failed-self-check exit,
//! the tokio runtime a cell runs on, and the resident memory reading.

use std::collections::HashMap;
use std::process::exit;

/// Prints why the run failed its self-check to stderr and exits with status 1 (the run prints no row).
pub fn fail(why: &str) -> ! {
    eprintln!("self-check failed: {why}");
    exit(1);
}

/// `--name value` (or `-name value`) options; a name not in the allowed list fails the run, so a typo
/// in the driver cannot silently run the wrong cell.
pub struct Options {
    values: HashMap<String, String>,
}

impl Options {
    /// Reads the process arguments, accepting only the option names in `allowed`.
    pub fn parse(allowed: &[&str]) -> Options {
        let mut values = HashMap::new();
        let mut argv = std::env::args().skip(1);
        while let Some(option) = argv.next() {
            let name = option.trim_start_matches('-');
            if !option.starts_with('-') || !allowed.contains(&name) {
                fail(&format!("unknown option: {option}"));
            }
            let value = argv.next().unwrap_or_else(|| fail(&format!("missing value for {option}")));
            values.insert(name.to_string(), value);
        }
        Options { values }
    }

    /// The value of the option, or `fallback` when it was not given.
    pub fn text(&self, name: &str, fallback: &str) -> String {
        self.values.get(name).cloned().unwrap_or_else(|| fallback.to_string())
    }

    /// The value as an unsigned integer (digits, `_` and `,`), or `fallback` when it was not given.
    pub fn number(&self, name: &str, fallback: u64) -> u64 {
        match self.values.get(name) {
            None => fallback,
            Some(raw) => raw
                .replace(['_', ','], "")
                .parse()
                .unwrap_or_else(|_| fail(&format!("--{name} wants a number, got {raw}"))),
        }
    }
}

/// The tokio runtime of a cell: `threads` = 1 is the current_thread runtime; any other value a
/// multi_thread runtime with that many workers, 0 meaning tokio's default (one per core). No I/O or
/// time driver: no scenario uses them.
pub fn runtime(threads: usize) -> tokio::runtime::Runtime {
    let built = match threads {
        1 => tokio::runtime::Builder::new_current_thread().build(),
        0 => tokio::runtime::Builder::new_multi_thread().build(),
        workers => tokio::runtime::Builder::new_multi_thread().worker_threads(workers).build(),
    };
    built.unwrap_or_else(|error| fail(&format!("cannot build the tokio runtime: {error}")))
}

/// Anonymous resident bytes: (resident - shared) pages of /proc/self/statm times the page size.
/// File-backed pages (code faulted in on first use) are left out. Fails the run if unreadable.
pub fn anonymous_resident_bytes() -> i64 {
    let raw = std::fs::read_to_string("/proc/self/statm").unwrap_or_else(|error| fail(&format!("statm: {error}")));
    let fields: Vec<i64> = raw.split_whitespace().take(3).filter_map(|field| field.parse().ok()).collect();
    if fields.len() != 3 {
        fail(&format!("cannot parse /proc/self/statm: {raw:?}"));
    }
    (fields[1] - fields[2]) * page_size()
}

/// The page size statm counts in: AT_PAGESZ from the auxiliary vector (pairs of native-endian words).
fn page_size() -> i64 {
    const AT_PAGESZ: u64 = 6;
    let auxv = std::fs::read("/proc/self/auxv").unwrap_or_else(|error| fail(&format!("auxv: {error}")));
    let word = |bytes: &[u8]| u64::from_ne_bytes(bytes.try_into().expect("an 8-byte word"));
    auxv.chunks_exact(16)
        .find(|pair| word(&pair[..8]) == AT_PAGESZ)
        .map(|pair| word(&pair[8..]) as i64)
        .unwrap_or_else(|| fail("no AT_PAGESZ in /proc/self/auxv"))
}
