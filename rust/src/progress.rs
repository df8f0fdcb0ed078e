//! Progress reporting and cancellation for long work (counting, training).
//!
//! Long loops call [`Progress::update`] often; it forwards to the caller's
//! callback at most every [`REPORT_INTERVAL`], so the callback (which, from
//! Python, has to take the GIL) costs nothing measurable. The callback returns
//! `false` to stop the work: that is how Ctrl-C reaches a training run.
//! Work that runs long without a place to report (a parallel sort, an EM
//! step over a large corpus) runs under [`Progress::watch`]: the calling
//! thread keeps reporting while another does the work, and sets a flag that
//! the work checks when the callback asks to stop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// What the long work is doing now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Reading and pre-tokenizing the corpus; units are bytes.
    Counting,
    /// Learning merges; units are merges.
    Merging,
    /// Finding seed pieces (Unigram); 0 then 1.
    Seeding,
    /// Unigram EM rounds (EM then pruning); the total is an estimate.
    Em,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Counting => "counting",
            Stage::Merging => "merging",
            Stage::Seeding => "seeding",
            Stage::Em => "EM rounds",
        }
    }
}

/// `(stage, done, total, note) -> keep going?`; the note says what the
/// work serves now, where that changes (the language parity-aware training
/// merges for).
pub type Callback<'a> = &'a (dyn Fn(Stage, u64, u64, Option<&str>) -> bool + Sync);

const REPORT_INTERVAL: Duration = Duration::from_millis(100);

pub struct Progress<'a> {
    callback: Option<Callback<'a>>,
    last_report: Mutex<Option<Instant>>,
    /// Set by `watch` when the callback asks to stop.
    cancelled: AtomicBool,
}

/// How often `watch` reports while the work runs.
const WATCH_INTERVAL: Duration = Duration::from_millis(20);

impl<'a> Progress<'a> {
    pub fn new(callback: Option<Callback<'a>>) -> Self {
        Progress {
            callback,
            last_report: Mutex::new(None),
            cancelled: AtomicBool::new(false),
        }
    }

    /// No reporting, no cancellation.
    pub fn silent() -> Self {
        Progress::new(None)
    }

    /// Reports if the last report is old enough; `Err(Interrupted)` if the
    /// callback asks to stop.
    pub fn update(&self, stage: Stage, done: u64, total: u64) -> Result<()> {
        self.update_noted(stage, done, total, || None)
    }

    /// `update` with a note, made only when a report is due.
    pub fn update_noted(
        &self,
        stage: Stage,
        done: u64,
        total: u64,
        note: impl FnOnce() -> Option<String>,
    ) -> Result<()> {
        let Some(callback) = self.callback else {
            return Ok(());
        };
        {
            let mut last = self.last_report.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            if matches!(*last, Some(t) if now.duration_since(t) < REPORT_INTERVAL) {
                return Ok(());
            }
            *last = Some(now);
        }
        if callback(stage, done, total, note().as_deref()) {
            Ok(())
        } else {
            Err(Error::Interrupted)
        }
    }

    /// Whether the work under `watch` should stop (and return anything: its
    /// result is dropped).
    pub fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// The flag behind `cancelled`, for a hot loop to read directly.
    pub fn cancel_flag(&self) -> &AtomicBool {
        &self.cancelled
    }

    /// Runs `work` on another thread while this one reports `(stage, done,
    /// total)` every `WATCH_INTERVAL` (and so notices Ctrl-C); when the
    /// callback asks to stop, `cancelled()` turns true, and this returns
    /// `Err(Interrupted)` as soon as `work` does.
    pub fn watch<T: Send>(
        &self,
        stage: Stage,
        done: u64,
        total: u64,
        work: impl FnOnce() -> Result<T> + Send,
    ) -> Result<T> {
        if self.callback.is_none() {
            return work();
        }
        std::thread::scope(|scope| {
            let worker = scope.spawn(work);
            while !worker.is_finished() {
                std::thread::sleep(WATCH_INTERVAL);
                if !self.cancelled() && self.update(stage, done, total).is_err() {
                    self.cancelled.store(true, Ordering::Relaxed);
                }
            }
            let result = worker
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            if self.cancelled() {
                Err(Error::Interrupted)
            } else {
                result
            }
        })
    }

    /// Reports unconditionally (start and end of a stage).
    pub fn force(&self, stage: Stage, done: u64, total: u64) -> Result<()> {
        self.force_noted(stage, done, total, || None)
    }

    /// `force` with a note (see `update_noted`).
    pub fn force_noted(
        &self,
        stage: Stage,
        done: u64,
        total: u64,
        note: impl FnOnce() -> Option<String>,
    ) -> Result<()> {
        *self.last_report.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.update_noted(stage, done, total, note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn watch_stops_work_that_checks_the_flag() {
        let calls = AtomicUsize::new(0);
        let callback =
            |_: Stage, _: u64, _: u64, _: Option<&str>| calls.fetch_add(1, Ordering::Relaxed) < 2;
        let progress = Progress::new(Some(&callback));
        let started = Instant::now();
        let result = progress.watch(Stage::Em, 0, 1, || {
            while !progress.cancelled() {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        });
        assert!(matches!(result, Err(Error::Interrupted)));
        assert!(started.elapsed() < Duration::from_secs(2));
        // Work that finishes first keeps its result.
        let quiet = Progress::new(Some(&|_: Stage, _: u64, _: u64, _: Option<&str>| true));
        assert_eq!(quiet.watch(Stage::Em, 0, 1, || Ok(7)).unwrap(), 7);
    }
}
