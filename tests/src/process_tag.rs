//! Every process a test starts ends with the test, pass or fail, whatever it started in turn.
//!
//! Killing a child, or its process group, misses what the child started in a group or
//! session of its own: `pg_autoctl` runs PostgreSQL and its keeper that way, and a node
//! of the failover test outlived the suite by an hour. An environment variable does not
//! move with the group: everything a tagged process starts inherits it. So the parts a
//! test starts carry `PASTEBIN_TEST_TAG=<tag>`, and [`ProcessTag::kill_all`] (on drop, and
//! from a watchdog if the test process itself is killed) ends every process that carries it.
//! `scripts/test` checks the same way, with the suite's own variable, that nothing is left.

use std::sync::atomic::{AtomicU64, Ordering};

/// The variable every tagged process carries.
pub const TAG_VARIABLE: &str = "PASTEBIN_TEST_TAG";

/// A tag for the processes of one fixture; dropping it kills them all.
#[derive(Debug)]
pub struct ProcessTag {
    value: String,
}

impl Default for ProcessTag {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcessTag {
    /// Unique in this test process (and across test processes: it starts with our pid).
    pub fn new() -> ProcessTag {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        ProcessTag { value: format!("{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)) }
    }

    /// `PASTEBIN_TEST_TAG=<tag>`, for a command line that sets its environment (`env`).
    pub fn assignment(&self) -> String {
        format!("{TAG_VARIABLE}={}", self.value)
    }

    /// `(name, value)` for `Command::env`.
    pub fn env(&self) -> (&'static str, &str) {
        (TAG_VARIABLE, &self.value)
    }

    /// SIGKILL to every process that carries the tag, again until none is left (a
    /// process may start another while the first round is under way). Returns how many.
    pub fn kill_all(&self) -> usize {
        let mut killed = 0;
        for _ in 0..20 {
            let tagged = processes_with(&self.assignment());
            if tagged.is_empty() {
                break;
            }
            killed += tagged.len();
            let _ = std::process::Command::new("kill")
                .arg("-KILL")
                .args(tagged.iter().map(u32::to_string))
                .stderr(std::process::Stdio::null())
                .status();
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        killed
    }

    /// A `sh` command that does what [`ProcessTag::kill_all`] does, for a watchdog that
    /// runs after this process is gone.
    pub fn kill_all_script(&self) -> String {
        format!(
            "for environ in /proc/[0-9]*/environ; do \
               if tr '\\0' '\\n' < \"$environ\" 2>/dev/null | grep -qx '{}'; then \
                 pid=${{environ#/proc/}}; kill -KILL \"${{pid%/environ}}\" 2>/dev/null; \
               fi; \
             done",
            self.assignment()
        )
    }
}

impl ProcessTag {
    /// A detached watchdog that ends every tagged process once this test process has
    /// exited: a killed test process drops nothing, and Rust statics are never dropped.
    pub fn kill_all_when_this_process_exits(&self) {
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {kill_all}",
            pid = std::process::id(),
            kill_all = self.kill_all_script()
        );
        crate::postgres::spawn_detached_shell(&script).expect("the watchdog starts");
    }
}

impl Drop for ProcessTag {
    fn drop(&mut self) {
        self.kill_all();
    }
}

/// Pids (not ours) whose environment holds `assignment` exactly.
fn processes_with(assignment: &str) -> Vec<u32> {
    let ours = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != ours)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|environ| environ.split(|b| *b == 0).any(|entry| entry == assignment.as_bytes()))
        })
        .collect()
}
