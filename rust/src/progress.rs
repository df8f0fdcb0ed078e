//! Progress reporting and cancellation for long work (counting, training).
//!
//! Long loops call [`Progress::update`] often; it forwards to the caller's
//! callback at most every [`REPORT_INTERVAL`], so the callback (which, from
//! Python, has to take the GIL) costs nothing measurable. The callback returns
//! `false` to stop the work: that is how Ctrl-C reaches a training run.

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

/// `(stage, done, total) -> keep going?`
pub type Callback<'a> = &'a (dyn Fn(Stage, u64, u64) -> bool + Sync);

const REPORT_INTERVAL: Duration = Duration::from_millis(100);

pub struct Progress<'a> {
    callback: Option<Callback<'a>>,
    last_report: Mutex<Option<Instant>>,
}

impl<'a> Progress<'a> {
    pub fn new(callback: Option<Callback<'a>>) -> Self {
        Progress {
            callback,
            last_report: Mutex::new(None),
        }
    }

    /// No reporting, no cancellation.
    pub fn silent() -> Self {
        Progress::new(None)
    }

    /// Reports if the last report is old enough; `Err(Interrupted)` if the
    /// callback asks to stop.
    pub fn update(&self, stage: Stage, done: u64, total: u64) -> Result<()> {
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
        if callback(stage, done, total) {
            Ok(())
        } else {
            Err(Error::Interrupted)
        }
    }

    /// Reports unconditionally (start and end of a stage).
    pub fn force(&self, stage: Stage, done: u64, total: u64) -> Result<()> {
        *self.last_report.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.update(stage, done, total)
    }
}
