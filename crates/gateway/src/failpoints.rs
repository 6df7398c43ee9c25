//! Named crash points at the saga's step boundaries, for crash tests.
//!
//! Compiled in only with the `failpoints` cargo feature; in a production
//! build [`hit`] is an empty inline function. Armed at process start by
//! `PASTEBIN_FAILPOINTS`, a comma-separated list of `name` (abort the process
//! on the spot: no unwinding, no flushing, like a power cut) or
//! `name=sleep:MILLIS` (hold the saga there, to stage races).

/// The step boundaries, in saga order.
pub const AFTER_K_BEGIN: &str = "after_k_begin";
pub const AFTER_PUT: &str = "after_put";
pub const AFTER_P_INSERT: &str = "after_p_insert";
pub const BEFORE_DONE: &str = "before_done";
pub const AFTER_DONE: &str = "after_done";

#[cfg(feature = "failpoints")]
mod armed {
    use std::{collections::HashMap, sync::OnceLock, time::Duration};

    pub enum Action {
        Crash,
        Sleep(Duration),
    }

    fn armed() -> &'static HashMap<String, Action> {
        static ARMED: OnceLock<HashMap<String, Action>> = OnceLock::new();
        ARMED.get_or_init(|| {
            let raw = std::env::var("PASTEBIN_FAILPOINTS").unwrap_or_default();
            raw.split(',')
                .filter(|entry| !entry.trim().is_empty())
                .map(|entry| match entry.trim().split_once("=sleep:") {
                    Some((name, ms)) => {
                        (name.to_owned(), Action::Sleep(Duration::from_millis(ms.parse().unwrap_or(1000))))
                    }
                    None => (entry.trim().to_owned(), Action::Crash),
                })
                .collect()
        })
    }

    pub async fn hit(name: &str) {
        match armed().get(name) {
            None => {}
            Some(Action::Crash) => {
                eprintln!("failpoint {name}: aborting the process");
                std::process::abort();
            }
            Some(Action::Sleep(pause)) => {
                tracing::warn!(failpoint = name, ?pause, "failpoint: holding the saga");
                tokio::time::sleep(*pause).await;
            }
        }
    }
}

/// Crash or pause here if `name` is armed; nothing in production builds.
#[inline]
pub async fn hit(name: &str) {
    #[cfg(feature = "failpoints")]
    armed::hit(name).await;
    #[cfg(not(feature = "failpoints"))]
    let _ = name;
}
