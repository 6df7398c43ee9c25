//! Named crash points for crash tests: the saga's step boundaries (named in
//! the gateway), the middle of a database group commit ([`MID_GROUP_COMMIT`]),
//! P's answer to a delete that took effect ([`AFTER_P_DELETE`]), a delete's
//! token check ([`DELETE_TOKEN_CHECKED`]) and the middle
//! of a sweeper's recovery ([`MID_RECOVERY`]).
//!
//! Compiled in only with `--cfg pastebin_failpoints` (set by `scripts/test`
//! through `RUSTFLAGS`); in every other build [`hit`] is an empty inline
//! function. A cfg rather than a cargo feature because cargo unifies features
//! across a workspace build, which put failpoints into the production binary. Armed at process start by
//! `PASTEBIN_FAILPOINTS`, a comma-separated list of `name` (abort the process
//! on the spot: no unwinding, no flushing, like a power cut) or
//! `name=sleep:MILLIS` (hold the saga there, to stage races) or
//! `name=chance:P` (abort with probability P, for randomized crash runs) or
//! `name=after:N` (abort on the Nth hit, to crash once work is under way) or
//! `name=wait:PATH` (write `PATH.reached`, then hold until `PATH` exists: a
//! test acts at that point for as long as it needs, on any machine speed) or
//! `name=fail:N` (where the code asks [`fails`]: its Nth hit fails, once, as
//! if an answer was lost after the fact).

/// A SQLite group has run every statement but has not committed yet.
pub const MID_GROUP_COMMIT: &str = "mid_group_commit";
/// A SQLite group of writes is collected and has not begun its transaction:
/// its writes are queued, and no lock is held (with `sleep:`, a write whose
/// caller went away meanwhile still lands later).
pub const BEFORE_GROUP_COMMIT: &str = "before_group_commit";

/// P has tombstoned a paste and not yet answered the delete: the caller's
/// answer is lost after the fact, the uncertain delete.
pub const AFTER_P_DELETE: &str = "after_p_delete";

/// A sweeper holds a page of stale pending keys and has not read P yet.
pub const MID_RECOVERY: &str = "mid_recovery";

/// P has checked a delete's token and not yet tombstoned the paste: an
/// adoption may rotate the token in between.
pub const DELETE_TOKEN_CHECKED: &str = "delete_token_checked";

#[cfg(pastebin_failpoints)]
mod armed {
    use std::{
        collections::HashMap,
        sync::{
            atomic::{AtomicU64, Ordering},
            OnceLock,
        },
        time::Duration,
    };

    pub enum Action {
        Crash,
        Sleep(Duration),
        Chance(f64),
        /// Crash on this hit; the counter holds the hits so far.
        After(u64, AtomicU64),
        WaitFor(std::path::PathBuf),
        /// Fail this hit of [`super::fails`]; the counter holds the hits so far.
        Fail(u64, AtomicU64),
    }

    fn parse(entry: &str) -> (String, Action) {
        let entry = entry.trim();
        match entry.split_once('=') {
            Some((name, spec)) => {
                let action = if let Some(ms) = spec.strip_prefix("sleep:") {
                    Action::Sleep(Duration::from_millis(ms.parse().unwrap_or(1000)))
                } else if let Some(p) = spec.strip_prefix("chance:") {
                    Action::Chance(p.parse().unwrap_or(0.0))
                } else if let Some(n) = spec.strip_prefix("after:") {
                    Action::After(n.parse().unwrap_or(1), AtomicU64::new(0))
                } else if let Some(path) = spec.strip_prefix("wait:") {
                    Action::WaitFor(path.into())
                } else if let Some(n) = spec.strip_prefix("fail:") {
                    Action::Fail(n.parse().unwrap_or(1), AtomicU64::new(0))
                } else {
                    Action::Crash
                };
                (name.to_owned(), action)
            }
            None => (entry.to_owned(), Action::Crash),
        }
    }

    fn armed() -> &'static HashMap<String, Action> {
        static ARMED: OnceLock<HashMap<String, Action>> = OnceLock::new();
        ARMED.get_or_init(|| {
            let raw = std::env::var("PASTEBIN_FAILPOINTS").unwrap_or_default();
            raw.split(',').filter(|entry| !entry.trim().is_empty()).map(parse).collect()
        })
    }

    fn crash(name: &str) -> ! {
        eprintln!("failpoint {name}: aborting the process");
        std::process::abort();
    }

    pub async fn hit(name: &str) {
        match armed().get(name) {
            None => {}
            Some(Action::Crash) => crash(name),
            Some(Action::Chance(p)) if rand::random::<f64>() < *p => crash(name),
            Some(Action::Chance(_)) => {}
            Some(Action::After(n, hits)) if hits.fetch_add(1, Ordering::SeqCst) + 1 >= *n => crash(name),
            Some(Action::After(..)) => {}
            Some(Action::Sleep(pause)) => {
                tracing::warn!(failpoint = name, ?pause, "failpoint: holding the saga");
                tokio::time::sleep(*pause).await;
            }
            Some(Action::Fail(..)) => {}
            Some(Action::WaitFor(go)) => {
                let mut reached = go.clone().into_os_string();
                reached.push(".reached");
                if let Err(error) = std::fs::write(&reached, name) {
                    eprintln!("failpoint {name}: cannot write {reached:?}: {error}");
                }
                while !go.exists() {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }

    pub fn fails(name: &str) -> bool {
        match armed().get(name) {
            Some(Action::Fail(n, hits)) => hits.fetch_add(1, Ordering::SeqCst) + 1 == *n,
            _ => false,
        }
    }
}

/// Whether this hit of `name` fails (armed `name=fail:N`: the Nth hit);
/// never in production builds.
#[inline]
pub fn fails(name: &str) -> bool {
    #[cfg(pastebin_failpoints)]
    return armed::fails(name);
    #[cfg(not(pastebin_failpoints))]
    {
        let _ = name;
        false
    }
}

/// Crash or pause here if `name` is armed; nothing in production builds.
#[inline]
pub async fn hit(name: &str) {
    #[cfg(pastebin_failpoints)]
    armed::hit(name).await;
    #[cfg(not(pastebin_failpoints))]
    let _ = name;
}
