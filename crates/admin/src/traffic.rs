//! Traffic and storage beside the saga, for the dashboard: what this
//! process's own metrics say (`pastebin up` holds every part, so every number
//! is there; a lone sweeper has none of them). Read from the rendered
//! exposition, so the dashboard shows exactly what `/metrics` does.

use chrono::{DateTime, Utc};
use pastebin_runtime::metrics as names;
use serde::Serialize;

/// Requests answered so far by status class (`2xx` … `5xx`), and 429s apart.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Answered {
    pub success: u64,
    pub client_error: u64,
    pub rate_limited: u64,
    pub server_error: u64,
    /// 507: the storage is full.
    pub storage_full: u64,
}

/// What the storage holds and has left, as last exported; `None` where no
/// part of this process exports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Storage {
    pub free_bytes: Option<f64>,
    pub min_free_bytes: Option<f64>,
    pub live_pastes: Option<f64>,
    pub stored_bytes: Option<f64>,
}

/// One reading of the exposition.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Reading {
    pub answered: Answered,
    /// Whether this process answers HTTP at all (it counted some route).
    pub serves_http: bool,
    pub storage: Storage,
}

/// The value of a line `name{labels} value` or `name value`, with its labels.
fn sample<'a>(line: &'a str, name: &str) -> Option<(&'a str, f64)> {
    let rest = line.strip_prefix(name)?;
    let (labels, value) = match rest.strip_prefix('{') {
        Some(labelled) => labelled.split_once("} ")?,
        None => ("", rest.strip_prefix(' ')?),
    };
    Some((labels, value.trim().parse().ok()?))
}

/// The status code in labels such as `route="/api/v1/pastes",status="429"`.
fn status_of(labels: &str) -> Option<u16> {
    let (_, after) = labels.split_once("status=\"")?;
    after.split('"').next()?.parse().ok()
}

impl Reading {
    pub fn of(exposition: &str) -> Self {
        let mut reading = Self::default();
        for line in exposition.lines() {
            if let Some((labels, count)) = sample(line, names::REQUESTS) {
                reading.serves_http = true;
                let count = count as u64;
                let answered = &mut reading.answered;
                match status_of(labels) {
                    Some(429) => answered.rate_limited += count,
                    Some(507) => answered.storage_full += count,
                    Some(400..=499) => answered.client_error += count,
                    Some(500..=599) => answered.server_error += count,
                    Some(_) => answered.success += count,
                    None => {}
                }
            }
            let storage = &mut reading.storage;
            for (name, slot) in [
                (names::STORAGE_FREE_BYTES, &mut storage.free_bytes),
                (names::STORAGE_MIN_FREE_BYTES, &mut storage.min_free_bytes),
                (names::LIVE_PASTES, &mut storage.live_pastes),
                (names::STORED_BYTES, &mut storage.stored_bytes),
            ] {
                if let Some((_, value)) = sample(line, name) {
                    *slot = Some(value);
                }
            }
        }
        reading
    }
}

/// What the dashboard shows of traffic and storage.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TrafficStatus {
    /// False when this process answers no HTTP (a lone sweeper).
    pub serves_http: bool,
    /// Requests answered since the process started.
    pub total: Answered,
    /// Requests answered over the last minute of readings; `None` until a
    /// minute's worth (or at least two readings) is known.
    pub last_minute: Option<Answered>,
    pub storage: Storage,
    /// Free space under twice the watermark: creates will soon be refused.
    pub storage_low: bool,
}

/// The status from the readings, oldest first.
pub fn traffic_status(readings: &[(DateTime<Utc>, Reading)]) -> TrafficStatus {
    let Some((newest_at, newest)) = readings.last() else { return TrafficStatus::default() };
    let minute_ago = *newest_at - chrono::Duration::seconds(60);
    let last_minute =
        readings.iter().find(|(at, _)| *at >= minute_ago).filter(|(at, _)| at != newest_at).map(|(_, then)| {
            let (now, then) = (newest.answered, then.answered);
            Answered {
                success: now.success.saturating_sub(then.success),
                client_error: now.client_error.saturating_sub(then.client_error),
                rate_limited: now.rate_limited.saturating_sub(then.rate_limited),
                server_error: now.server_error.saturating_sub(then.server_error),
                storage_full: now.storage_full.saturating_sub(then.storage_full),
            }
        });
    let storage = newest.storage;
    let storage_low =
        matches!((storage.free_bytes, storage.min_free_bytes), (Some(free), Some(min)) if free < 2.0 * min);
    TrafficStatus { serves_http: newest.serves_http, total: newest.answered, last_minute, storage, storage_low }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPOSITION: &str = "# TYPE pastebin_requests_total counter\n\
        pastebin_requests_total{route=\"/api/v1/pastes\",status=\"201\"} 5\n\
        pastebin_requests_total{route=\"/api/v1/pastes/{id}\",status=\"200\"} 7\n\
        pastebin_requests_total{route=\"/api/v1/pastes\",status=\"429\"} 2\n\
        pastebin_requests_total{route=\"unmatched\",status=\"404\"} 1\n\
        pastebin_requests_total{route=\"/api/v1/pastes\",status=\"507\"} 3\n\
        pastebin_requests_total{route=\"/api/v1/pastes\",status=\"503\"} 1\n\
        pastebin_storage_free_bytes 100000000\n\
        pastebin_storage_min_free_bytes 67108864\n\
        pastebin_live_pastes 12\n\
        pastebin_stored_bytes 4096\n";

    #[test]
    fn the_exposition_reads_as_answers_by_class_and_the_storage() {
        let reading = Reading::of(EXPOSITION);
        let answered = Answered { success: 12, client_error: 1, rate_limited: 2, server_error: 1, storage_full: 3 };
        assert_eq!(reading.answered, answered);
        assert!(reading.serves_http);
        assert_eq!(reading.storage.live_pastes, Some(12.0));
        assert_eq!(reading.storage.stored_bytes, Some(4096.0));
        assert_eq!(Reading::of("pastebin_live_pastes_other 3\n"), Reading::default(), "names match whole");
    }

    #[test]
    fn the_last_minute_is_the_difference_over_the_readings_within_it() {
        let at = |s: i64| DateTime::from_timestamp(1_700_000_000 + s, 0).unwrap();
        let mut early = Reading::of(EXPOSITION);
        early.answered.success = 2;
        let readings = [(at(0), Reading::default()), (at(30), early), (at(80), Reading::of(EXPOSITION))];
        let status = traffic_status(&readings);
        assert_eq!(status.last_minute.map(|a| a.success), Some(10), "from the reading 50 s before, not 80 s");
        assert!(status.storage_low, "100 MB free is under twice the 64 MiB watermark");
        assert_eq!(traffic_status(&readings[2..]).last_minute, None, "one reading tells no rate");
    }
}
