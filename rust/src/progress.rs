//! Progress reporting and cancellation for long work (counting, training).
//!
//! Long loops call [`Progress::update`] often; it forwards to the caller's
//! callback at most every [`REPORT_INTERVAL`], so the callback (which, from
//! Python, has to take the GIL) costs nothing measurable. The callback returns
//! `false` to stop the work: that is how Ctrl-C reaches a training run.
//! Work that runs long without a place to report (a parallel sort, an EM
//! step over a large corpus) runs under [`Progress::watch`]: the calling
//! thread keeps reporting while another does the work, and sets a flag that
//! the work checks when the callback asks to stop. Work that reports but
//! must run on rayon's pool (a trainer's merge loop) runs under
//! [`Progress::on_pool`]: its updates are recorded, and the calling thread
//! reports them, since only Python's main thread sees Ctrl-C.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    /// Set during `on_pool`: updates record `done` instead of reporting.
    deferred: AtomicBool,
    done: AtomicU64,
}

/// How often `watch` reports while the work runs.
const WATCH_INTERVAL: Duration = Duration::from_millis(20);

impl<'a> Progress<'a> {
    pub fn new(callback: Option<Callback<'a>>) -> Self {
        Progress {
            callback,
            last_report: Mutex::new(None),
            cancelled: AtomicBool::new(false),
            deferred: AtomicBool::new(false),
            done: AtomicU64::new(0),
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
        if self.deferred.load(Ordering::Relaxed) {
            self.done.store(done, Ordering::Relaxed);
            return if self.cancelled() {
                Err(Error::Interrupted)
            } else {
                Ok(())
            };
        }
        self.report(stage, done, total, note)
    }

    /// Calls the callback if the last report is old enough.
    fn report(
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
        self.watch_reporting(work, || (stage, done, total))
    }

    /// Runs `work` on a thread of rayon's pool, the calling thread waiting
    /// and reporting `stage` with the `done` that `work`'s updates record
    /// (they report nothing themselves, and fail with `Interrupted` once
    /// the callback asks to stop); the last `done` is reported at the end.
    /// For loops that share work out with rayon at each step: from a
    /// worker, a step starts on its own part at once, where from a thread
    /// outside the pool it waits for a worker to wake and take the job;
    /// and the calling thread, Python's main thread, is the one that sees
    /// Ctrl-C.
    pub fn on_pool<T: Send>(
        &self,
        stage: Stage,
        total: u64,
        work: impl FnOnce() -> Result<T> + Send,
    ) -> Result<T> {
        let on_pool = || rayon::scope(|_| work());
        // Called on a pool, the work stays there: this thread waiting for
        // a worker while being one would wait forever in a pool of one (and
        // the work would leave the caller's pool).
        if self.callback.is_none() || rayon::current_thread_index().is_some() {
            return on_pool();
        }
        self.done.store(0, Ordering::Relaxed);
        self.deferred.store(true, Ordering::Relaxed);
        let result = self.watch_reporting(on_pool, || {
            (stage, self.done.load(Ordering::Relaxed), total)
        });
        self.deferred.store(false, Ordering::Relaxed);
        let result = result?;
        self.force(stage, self.done.load(Ordering::Relaxed), total)?;
        Ok(result)
    }

    /// Runs `work` on a thread of its own while this one reports what
    /// `now` says every `WATCH_INTERVAL` (see `watch`).
    fn watch_reporting<T: Send>(
        &self,
        work: impl FnOnce() -> Result<T> + Send,
        now: impl Fn() -> (Stage, u64, u64),
    ) -> Result<T> {
        // The worker wakes this thread when it is done: a sleep of a whole
        // interval would add up to 20 ms to every call.
        let finished = AtomicBool::new(false);
        let watcher = std::thread::current();
        std::thread::scope(|scope| {
            let worker = scope.spawn(|| {
                let result = work();
                finished.store(true, Ordering::Release);
                watcher.unpark();
                result
            });
            loop {
                std::thread::park_timeout(WATCH_INTERVAL);
                // (A worker that panicked sets no flag, but is finished.)
                if finished.load(Ordering::Acquire) || worker.is_finished() {
                    break;
                }
                let (stage, done, total) = now();
                if !self.cancelled() && self.report(stage, done, total, || None).is_err() {
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

    #[test]
    fn work_on_the_pool_is_reported_from_the_calling_thread() {
        let caller = std::thread::current().id();
        let reports = Mutex::new(Vec::new());
        let callback = |_: Stage, done: u64, _: u64, _: Option<&str>| {
            reports
                .lock()
                .unwrap()
                .push((std::thread::current().id(), done));
            true
        };
        let progress = Progress::new(Some(&callback));
        let result = progress.on_pool(Stage::Merging, 30, || {
            assert!(rayon::current_thread_index().is_some(), "not on the pool");
            for done in 1..=30 {
                std::thread::sleep(Duration::from_millis(5));
                progress.update(Stage::Merging, done, 30)?;
            }
            Ok(7)
        });
        assert_eq!(result.unwrap(), 7);
        let reports = reports.into_inner().unwrap();
        // Python sees Ctrl-C on its main thread only: every report is made
        // there, with what the work recorded, and the last one at the end.
        assert!(reports.iter().all(|&(thread, _)| thread == caller));
        assert!(reports.iter().any(|&(_, done)| done > 0 && done < 30));
        assert_eq!(reports.last().map(|&(_, done)| done), Some(30));
    }

    #[test]
    fn work_on_the_pool_stops_when_the_callback_says_so() {
        let calls = AtomicUsize::new(0);
        let callback =
            |_: Stage, _: u64, _: u64, _: Option<&str>| calls.fetch_add(1, Ordering::Relaxed) < 2;
        let progress = Progress::new(Some(&callback));
        let started = Instant::now();
        let result: Result<()> = progress.on_pool(Stage::Merging, u64::MAX, || {
            for done in 0.. {
                std::thread::sleep(Duration::from_millis(1));
                progress.update(Stage::Merging, done, u64::MAX)?;
            }
            unreachable!()
        });
        assert!(matches!(result, Err(Error::Interrupted)));
        assert!(started.elapsed() < Duration::from_secs(2));
        // Afterwards, updates call the callback again.
        let before = calls.load(Ordering::Relaxed);
        let _ = progress.force(Stage::Merging, 1, 1);
        assert_eq!(calls.load(Ordering::Relaxed), before + 1);
    }

    #[test]
    fn work_on_the_pool_called_from_a_worker_runs_there() {
        // A pool of one: waiting there for another worker would never end.
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .thread_name(|_| "the one worker".to_owned())
            .build()
            .unwrap();
        let progress = Progress::new(Some(&|_: Stage, _: u64, _: u64, _: Option<&str>| true));
        let worker = pool.install(|| {
            progress.on_pool(Stage::Merging, 1, || {
                Ok(std::thread::current().name().map(str::to_owned))
            })
        });
        assert_eq!(worker.unwrap().as_deref(), Some("the one worker"));
    }
}
