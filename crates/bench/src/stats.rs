//! Latency histograms, status counts and the report a run prints.
//!
//! Latencies are kept in an HDR histogram in microseconds (1 µs to 10 min,
//! three significant digits), so the tail is as precise as the median and
//! merging per-task recorders is exact.

use std::{collections::BTreeMap, time::Duration};

use hdrhistogram::Histogram;
use serde::Serialize;

/// The longest latency a histogram holds; anything above is clamped to it
/// (and would be a 10-minute stall, which the max still shows).
const HIGHEST_MICROS: u64 = 600_000_000;

/// One class of requests (e.g. `create`, `replay`, `get`): their latencies.
#[derive(Debug, Clone)]
pub struct Latencies(Histogram<u64>);

impl Default for Latencies {
    fn default() -> Self {
        // Bounds are constants that hdrhistogram accepts (low >= 1, high >= 2 * low, 3 digits).
        Self(Histogram::new_with_bounds(1, HIGHEST_MICROS, 3).expect("constant histogram bounds are valid"))
    }
}

impl Latencies {
    pub fn record(&mut self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX).clamp(1, HIGHEST_MICROS);
        // Cannot fail: the value was clamped into the histogram's range.
        let _ = self.0.record(micros);
    }

    pub fn merge(&mut self, other: &Latencies) {
        // Same bounds on both sides: adding cannot go out of range.
        let _ = self.0.add(&other.0);
    }

    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The latency below which `quantile` (0..=1) of the samples fall, in milliseconds.
    pub fn quantile_ms(&self, quantile: f64) -> f64 {
        self.0.value_at_quantile(quantile) as f64 / 1000.0
    }

    pub fn summary(&self) -> LatencySummary {
        LatencySummary {
            count: self.count(),
            mean_ms: self.0.mean() / 1000.0,
            p50_ms: self.quantile_ms(0.50),
            p90_ms: self.quantile_ms(0.90),
            p99_ms: self.quantile_ms(0.99),
            p999_ms: self.quantile_ms(0.999),
            max_ms: self.0.max() as f64 / 1000.0,
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct LatencySummary {
    pub count: u64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
}

/// What one task saw; recorders are merged at the end of a run.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    pub classes: BTreeMap<&'static str, Latencies>,
    pub statuses: BTreeMap<String, u64>,
    /// Latencies per status: a fast 503 and a slow 201 must not blur into one tail.
    pub by_status: BTreeMap<String, Latencies>,
}

impl Recorder {
    pub fn record(&mut self, class: &'static str, status: &str, latency: Duration) {
        self.classes.entry(class).or_default().record(latency);
        self.classes.entry("all").or_default().record(latency);
        *self.statuses.entry(status.to_owned()).or_default() += 1;
        self.by_status.entry(status.to_owned()).or_default().record(latency);
    }

    /// A sample for `class` alone: the per-step harness, where an `all` line would mean nothing.
    pub fn record_class(&mut self, class: &'static str, latency: Duration) {
        self.classes.entry(class).or_default().record(latency);
    }

    pub fn count_status(&mut self, status: &str) {
        *self.statuses.entry(status.to_owned()).or_default() += 1;
    }

    pub fn merge(&mut self, other: &Recorder) {
        for (class, latencies) in &other.classes {
            self.classes.entry(class).or_default().merge(latencies);
        }
        for (status, count) in &other.statuses {
            *self.statuses.entry(status.clone()).or_default() += count;
        }
        for (status, latencies) in &other.by_status {
            self.by_status.entry(status.clone()).or_default().merge(latencies);
        }
    }

    /// Requests answered: every status counted once.
    pub fn completed(&self) -> u64 {
        self.statuses.values().sum()
    }
}

/// Where and when a figure was taken: every number is printed with it.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub date_utc: String,
    pub nproc: usize,
    pub mem_total_kib: u64,
    /// `/proc/loadavg`'s first three fields at the end of the run.
    pub loadavg: String,
}

impl Machine {
    pub fn now() -> Self {
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let mem_total_kib = meminfo
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        let loadavg = std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" ");
        Self {
            date_utc: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            nproc: std::thread::available_parallelism().map_or(0, usize::from),
            mem_total_kib,
            loadavg,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ReplaySummary {
    /// Keys answered 201 at least once.
    pub keys: u64,
    /// 201 answers compared with the first 201 for their key.
    pub compared: u64,
    pub mismatches: u64,
}

/// The result of one run, printed as a table or as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub workload: String,
    pub protocol: String,
    /// `closed c=16` or `open rate=350/s`.
    pub mode: String,
    pub elapsed_s: f64,
    pub requests: u64,
    pub throughput_rps: f64,
    /// Answers that were 2xx (gRPC OK), per second.
    pub ok_rps: f64,
    pub latency: BTreeMap<String, LatencySummary>,
    /// The same latencies split by answer (`201`, `503`, ...).
    pub latency_by_status: BTreeMap<String, LatencySummary>,
    pub statuses: BTreeMap<String, u64>,
    pub replay_check: ReplaySummary,
    pub machine: Machine,
}

impl Report {
    pub fn new(
        workload: &str,
        protocol: &str,
        mode: String,
        elapsed: Duration,
        recorder: &Recorder,
        replay_check: ReplaySummary,
    ) -> Self {
        let secs = elapsed.as_secs_f64().max(1e-9);
        let requests = recorder.completed();
        let ok: u64 = recorder.statuses.iter().filter(|(s, _)| is_ok(s)).map(|(_, n)| n).sum();
        Self {
            workload: workload.to_owned(),
            protocol: protocol.to_owned(),
            mode,
            elapsed_s: secs,
            requests,
            throughput_rps: requests as f64 / secs,
            ok_rps: ok as f64 / secs,
            latency: recorder.classes.iter().map(|(c, l)| ((*c).to_owned(), l.summary())).collect(),
            latency_by_status: recorder.by_status.iter().map(|(s, l)| (s.clone(), l.summary())).collect(),
            statuses: recorder.statuses.clone(),
            replay_check,
            machine: Machine::now(),
        }
    }

    pub fn table(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let m = &self.machine;
        let _ = writeln!(
            out,
            "{} over {} ({}), {:.1} s, {} requests: {:.1} req/s ({:.1} ok/s)",
            self.workload, self.protocol, self.mode, self.elapsed_s, self.requests, self.throughput_rps, self.ok_rps
        );
        let _ = writeln!(
            out,
            "machine: {} cores, {} MiB, load {} at {}",
            m.nproc,
            m.mem_total_kib / 1024,
            m.loadavg,
            m.date_utc
        );
        let _ = writeln!(
            out,
            "{:<10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "class", "count", "mean ms", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "max ms"
        );
        let by_status = self.latency_by_status.iter().map(|(status, l)| (format!("= {status}"), l));
        for (class, l) in self.latency.iter().map(|(c, l)| (c.clone(), l)).chain(by_status) {
            let _ = writeln!(
                out,
                "{:<10} {:>9} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
                class, l.count, l.mean_ms, l.p50_ms, l.p90_ms, l.p99_ms, l.p999_ms, l.max_ms
            );
        }
        let statuses: Vec<String> = self.statuses.iter().map(|(s, n)| format!("{s}: {n}")).collect();
        let _ = writeln!(out, "statuses: {}", statuses.join(", "));
        let r = &self.replay_check;
        let _ = writeln!(
            out,
            "replay check: {} keys, {} answers compared, {} mismatches",
            r.keys, r.compared, r.mismatches
        );
        out
    }
}

/// `201`, `201 replayed`, `200`, gRPC `Ok`, or a step harness `ok`.
pub fn is_ok(status: &str) -> bool {
    status.starts_with('2') || status == "grpc Ok" || status == "ok"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn percentiles_of_a_uniform_ramp() {
        let mut l = Latencies::default();
        for n in 1..=1000 {
            l.record(ms(n));
        }
        let s = l.summary();
        assert_eq!(s.count, 1000);
        // Three significant digits: within 0.1 % of the exact order statistic.
        let close = |got: f64, want: f64| (got - want).abs() <= want * 0.001 + 0.001;
        assert!(close(s.p50_ms, 500.0), "p50 {}", s.p50_ms);
        assert!(close(s.p90_ms, 900.0), "p90 {}", s.p90_ms);
        assert!(close(s.p99_ms, 990.0), "p99 {}", s.p99_ms);
        assert!(close(s.p999_ms, 999.0), "p99.9 {}", s.p999_ms);
        assert!(close(s.max_ms, 1000.0), "max {}", s.max_ms);
        assert!(close(s.mean_ms, 500.5), "mean {}", s.mean_ms);
    }

    #[test]
    fn one_stall_shows_in_the_tail_not_the_median() {
        let mut l = Latencies::default();
        for _ in 0..999 {
            l.record(ms(2));
        }
        l.record(Duration::from_secs(3));
        let s = l.summary();
        assert!((s.p50_ms - 2.0).abs() < 0.01);
        assert!((s.p99_ms - 2.0).abs() < 0.01);
        assert!((s.max_ms - 3000.0).abs() < 3.0);
        assert!(s.p999_ms >= 2.0);
    }

    #[test]
    fn merging_recorders_adds_counts_and_samples() {
        let mut a = Recorder::default();
        let mut b = Recorder::default();
        a.record("create", "201", ms(1));
        b.record("create", "201", ms(3));
        b.record("get", "404", ms(5));
        a.merge(&b);
        assert_eq!(a.completed(), 3);
        assert_eq!(a.classes["create"].count(), 2);
        assert_eq!(a.statuses["201"], 2);
        assert_eq!(a.statuses["404"], 1);
        assert!((a.classes["all"].summary().max_ms - 5.0).abs() < 0.01);
    }

    #[test]
    fn each_status_keeps_its_own_latencies() {
        let mut a = Recorder::default();
        let mut b = Recorder::default();
        for _ in 0..99 {
            a.record("create", "503", ms(1));
        }
        b.record("create", "201", ms(40));
        a.merge(&b);
        let report = Report::new("create", "http", "open".into(), ms(1000), &a, ReplaySummary::default());
        assert_eq!(report.latency_by_status["503"].count, 99);
        assert!((report.latency_by_status["503"].max_ms - 1.0).abs() < 0.01);
        assert!((report.latency_by_status["201"].p50_ms - 40.0).abs() < 0.05);
        // Blurred together, the one slow 201 hides below the p99.
        assert!(report.latency["all"].p99_ms < 2.0);
        assert!(report.table().contains("= 503"), "{}", report.table());
    }

    #[test]
    fn sub_microsecond_and_huge_samples_are_clamped_not_lost() {
        let mut l = Latencies::default();
        l.record(Duration::from_nanos(10));
        l.record(Duration::from_secs(100_000));
        assert_eq!(l.count(), 2);
    }

    #[test]
    fn ok_statuses() {
        assert!(is_ok("201"));
        assert!(is_ok("201 replayed"));
        assert!(is_ok("grpc Ok"));
        assert!(!is_ok("503"));
        assert!(!is_ok("grpc Unavailable"));
        assert!(!is_ok("error: connect"));
    }
}
