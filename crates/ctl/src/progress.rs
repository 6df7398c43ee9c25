//! Progress of a long command: a bar on a terminal, plain lines on the
//! error stream otherwise, so a log or a test reads the same facts.
//! [`SlotProgress`] counts slots (reconcile, repair), [`RowProgress`] rows
//! (the copy of a slot move) or objects (a backup).

use std::{io::Write, time::Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Where progress goes; chosen once by the process entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressTo {
    /// The process's stderr is a terminal: draw a bar there.
    Terminal,
    /// One plain line every [`LINE_EVERY`] slots, on the command's error writer.
    Lines,
}

/// Slots between two plain progress lines (16 lines for a full pass).
const LINE_EVERY: u64 = 16;

pub(crate) struct SlotProgress {
    bar: Option<ProgressBar>,
    what: &'static str,
    total: u64,
    done: u64,
    rows: u64,
    started: Instant,
}

impl SlotProgress {
    pub(crate) fn new(to: ProgressTo, what: &'static str, total: u64) -> Self {
        let bar = (to == ProgressTo::Terminal).then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} slots, {msg}, {eta} left")
                    .expect("the template is valid")
                    .progress_chars("=> "),
            );
            bar.set_prefix(what);
            bar
        });
        Self { bar, what, total, done: 0, rows: 0, started: Instant::now() }
    }

    /// One more slot done, having read `rows` rows and objects.
    pub(crate) fn slot_done(&mut self, rows: u64, err: &mut (dyn Write + Send)) -> std::io::Result<()> {
        self.done += 1;
        self.rows += rows;
        match &self.bar {
            Some(bar) => {
                bar.set_message(format!("{} rows read", self.rows));
                bar.inc(1);
            }
            None if self.done.is_multiple_of(LINE_EVERY) || self.done == self.total => {
                writeln!(err, "{}", self.line())?;
            }
            None => {}
        }
        Ok(())
    }

    fn line(&self) -> String {
        let elapsed = self.started.elapsed().as_secs_f64();
        let left = elapsed / self.done as f64 * (self.total - self.done) as f64;
        format!(
            "{}: {}/{} slots, {} rows read, {} left",
            self.what,
            self.done,
            self.total,
            self.rows,
            crate::format::age(left)
        )
    }

    pub(crate) fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Progress of a command that copies rows (or objects): a bar on a
/// terminal (how many done, rate, time left, and what they are), a plain
/// line per step otherwise.
pub(crate) struct RowProgress {
    bar: Option<ProgressBar>,
    what: &'static str,
    unit: &'static str,
    total: u64,
    started: Instant,
}

impl RowProgress {
    pub(crate) fn new(to: ProgressTo, what: &'static str, total: u64) -> Self {
        Self::counting(to, what, "rows", total)
    }

    /// Counting `unit` instead of rows.
    pub(crate) fn counting(to: ProgressTo, what: &'static str, unit: &'static str, total: u64) -> Self {
        let bar = (to == ProgressTo::Terminal).then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            let template =
                format!("{{prefix}} [{{bar:30}}] {{pos}}/{{len}} {unit}, {{per_sec}}, {{eta}} left: {{msg}}");
            bar.set_style(
                ProgressStyle::with_template(&template).expect("the template is valid").progress_chars("=> "),
            );
            bar.set_prefix(what);
            bar
        });
        Self { bar, what, unit, total, started: Instant::now() }
    }

    /// `done` rows so far, described by `detail` (e.g. rows per state).
    pub(crate) fn rows_done(&self, done: u64, detail: &str, err: &mut (dyn Write + Send)) -> std::io::Result<()> {
        match &self.bar {
            Some(bar) => {
                bar.set_position(done);
                bar.set_message(detail.to_owned());
                Ok(())
            }
            None => {
                let rate = done as f64 / self.started.elapsed().as_secs_f64().max(0.001);
                let (what, unit, total) = (self.what, self.unit, self.total);
                writeln!(err, "{what}: {done}/{total} {unit} ({detail}), {rate:.0} {unit}/s")
            }
        }
    }

    pub(crate) fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}
