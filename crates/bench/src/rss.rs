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

/// CPU time (user + system) this process used so far, in seconds, from `/proc/self/stat`; `None`
/// where `/proc` is unavailable. Resolution: one clock tick (`USER_HZ`, 100 per second on Linux).
pub fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_cpu_ticks(&stat).map(|ticks| ticks as f64 / 100.0)
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line; the command name (field 2) may
/// hold spaces and parentheses, so fields are counted after its last `)`.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
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
    fn reads_the_cpu_ticks_after_the_command_name() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 31 0 0 20 0 3 0 99";
        assert_eq!(parse_cpu_ticks(stat), Some(281));
        assert_eq!(parse_cpu_ticks("42 (x) S 1"), None);
        assert!(cpu_seconds().unwrap() >= 0.0);
    }

    #[test]
    fn this_process_has_a_peak() {
        let peak = peak_rss_bytes().unwrap();
        assert!(peak >= current_rss_bytes().unwrap() / 2);
        assert!(peak > 1024 * 1024);
    }
}
