//! Peak resident memory of this process, from `/proc/self/status`.

/// Peak resident set size (`VmHWM`) in bytes, or `None` where `/proc` is unavailable.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_kib(&status, "VmHWM:").map(|kib| kib * 1024)
}

/// Current resident set size (`VmRSS`) in bytes, or `None` where `/proc` is unavailable.
pub fn current_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_kib(&status, "VmRSS:").map(|kib| kib * 1024)
}

fn parse_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kib_fields() {
        let status = "Name:\tx\nVmHWM:\t   12345 kB\nVmRSS:\t  100 kB\n";
        assert_eq!(parse_kib(status, "VmHWM:"), Some(12_345));
        assert_eq!(parse_kib(status, "VmRSS:"), Some(100));
        assert_eq!(parse_kib(status, "VmSwap:"), None);
    }

    #[test]
    fn this_process_has_a_peak() {
        let peak = peak_rss_bytes().unwrap();
        assert!(peak >= current_rss_bytes().unwrap() / 2);
        assert!(peak > 1024 * 1024);
    }
}
