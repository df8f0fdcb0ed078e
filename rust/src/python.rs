//! The PyO3 layer: `polytok._core`. Thin by design: it converts arguments,
//! releases the GIL around Rust work and maps errors to Python exceptions.
//! Everything else lives in the Python package (`python/polytok/`) or in the
//! Rust modules.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use numpy::{IntoPyArray, PyArray1};
use pyo3::buffer::PyUntypedBuffer;
use pyo3::create_exception;
use pyo3::exceptions::{
    PyFileNotFoundError, PyKeyboardInterrupt, PyOSError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyModule};
use rayon::prelude::*;

use crate::batch::{self, FlatChunk, IdRuns};
use crate::bpe::{self, BpeModel, TrainerSettings};
use crate::corpus::BadBytes;
use crate::counting::{self, Counter, PieceCounts};
use crate::decoders::{DecodeStream, Decoder};
use crate::error::Error;
use crate::parity;
use crate::progress::{Progress, Stage};
use crate::text::bert::BertNormalizer;
use crate::text::pattern::{Pattern, PreTokenizer};
use crate::text::widths::FixedWidth;
use crate::text_stats;
use crate::tokenizer::CUT_BYTES;
use crate::unigram::{self, PieceRules, UnigramModel, UnigramTrainerSettings, Whitespace};
use crate::vocab::AllowedSpecial;
use crate::wordpiece::{self, WordPieceModel, WordPieceSettings, WordPieceTrainerSettings};

mod pipeline;
mod texts;

use texts::{read_items, with_utf8, Texts};

create_exception!(
    polytok,
    PolytokError,
    PyValueError,
    "Base class of polytok's errors."
);
create_exception!(
    polytok,
    CorpusError,
    PolytokError,
    "The training corpus cannot be used."
);
create_exception!(
    polytok,
    TokenizerFileError,
    PolytokError,
    "A tokenizer file is damaged or not understood."
);

fn to_py(err: Error) -> PyErr {
    match err {
        Error::InvalidArgument(msg) => PyValueError::new_err(msg),
        Error::UnknownTokenId { .. } => PyValueError::new_err(err.to_string()),
        Error::Corpus(msg) => CorpusError::new_err(msg),
        Error::TokenizerFile(msg) => TokenizerFileError::new_err(msg),
        Error::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
            PyFileNotFoundError::new_err(err.to_string())
        }
        Error::Io { .. } => PyOSError::new_err(err.to_string()),
        Error::Interrupted => PyKeyboardInterrupt::new_err("interrupted"),
    }
}

/// Runs `work`, without the GIL when `detach`, and turns a Rust panic
/// (a bug, never an answer) into a `RuntimeError` that `except Exception`
/// catches: pyo3's own `PanicException` is a `BaseException`. Every call
/// into the core that does real work goes through here.
fn guarded<T: Send>(py: Python<'_>, detach: bool, work: impl FnOnce() -> T + Send) -> PyResult<T> {
    let run = || std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
    let outcome = if detach { py.detach(run) } else { run() };
    outcome.map_err(panic_error)
}

/// The `RuntimeError` of a Rust panic (see `guarded`).
fn panic_error(payload: Box<dyn std::any::Any + Send>) -> PyErr {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned());
    PyRuntimeError::new_err(format!(
        "polytok internal error ({message}); please report it"
    ))
}

/// Runs `work` like `guarded`, without the GIL, in polytok's thread pool:
/// its parallel loops run there rather than in rayon's global pool. A
/// child made by `fork` inherits the global pool without its threads, so
/// its first parallel call would wait forever; polytok's pool is made anew
/// in each process. (Training keeps the calling thread, which must see
/// Ctrl-C, and so rayon's global pool.)
fn in_pool<T: Send>(py: Python<'_>, work: impl FnOnce() -> T + Send) -> PyResult<T> {
    let pool = thread_pool()?;
    guarded(py, true, || pool.install(work))
}

/// This process's pool (see `in_pool`).
fn thread_pool() -> PyResult<Arc<rayon::ThreadPool>> {
    static POOL: Mutex<Option<(u32, Arc<rayon::ThreadPool>)>> = Mutex::new(None);
    let pid = std::process::id();
    let mut slot = POOL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((owner, pool)) = &*slot {
        if *owner == pid {
            return Ok(pool.clone());
        }
    }
    // A pool inherited through fork has no threads to stop: forget it.
    if let Some((_, inherited)) = slot.take() {
        std::mem::forget(inherited);
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("polytok-{i}"))
        .build()
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start polytok's threads: {e}")))?;
    let pool = Arc::new(pool);
    *slot = Some((pid, pool.clone()));
    Ok(pool)
}

/// Runs `work` without the GIL, with a progress callback that re-takes the
/// GIL to report and to check for Ctrl-C; an exception raised there (or a
/// KeyboardInterrupt) stops the work and is re-raised.
fn with_progress<T: Send>(
    py: Python<'_>,
    callback: Option<Py<PyAny>>,
    work: impl FnOnce(&Progress) -> Result<T, Error> + Send,
) -> PyResult<T> {
    let raised: Mutex<Option<PyErr>> = Mutex::new(None);
    let report = |stage: Stage, done: u64, total: u64, note: Option<&str>| -> bool {
        Python::attach(|py| {
            let result = py.check_signals().and_then(|()| match (&callback, note) {
                (Some(cb), None) => cb.call1(py, (stage.name(), done, total)).map(drop),
                (Some(cb), Some(note)) => cb.call1(py, (stage.name(), done, total, note)).map(drop),
                (None, _) => Ok(()),
            });
            match result {
                Ok(()) => true,
                Err(e) => {
                    *raised.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                    false
                }
            }
        })
    };
    let result = guarded(py, true, || work(&Progress::new(Some(&report))))?;
    result.map_err(
        |err| match (err, raised.into_inner().unwrap_or_else(|e| e.into_inner())) {
            (Error::Interrupted, Some(raised)) => raised,
            (err, _) => to_py(err),
        },
    )
}

fn parse_bad_bytes(errors: &str) -> PyResult<BadBytes> {
    match errors {
        "strict" => Ok(BadBytes::Error),
        "replace" => Ok(BadBytes::Replace),
        other => Err(PyValueError::new_err(format!(
            "errors must be \"strict\" or \"replace\", not {other:?}"
        ))),
    }
}

/// Counts the pieces of a corpus (files or batches of strings), for training.
#[pyclass(module = "polytok._core")]
struct PieceCounter {
    counter: Counter,
    counts: Mutex<PieceCounts>,
}

#[pymethods]
impl PieceCounter {
    #[new]
    #[pyo3(signature = (pattern, special_tokens = Vec::new()))]
    fn new(pattern: &str, special_tokens: Vec<String>) -> PyResult<Self> {
        Ok(PieceCounter {
            counter: Counter::new(Pattern::parse(pattern).map_err(to_py)?, special_tokens)
                .map_err(to_py)?,
            counts: Mutex::new(PieceCounts::default()),
        })
    }

    /// A counter of BERT words (normalized, cut at white space and
    /// punctuation), for WordPiece.
    #[staticmethod]
    fn bert(
        clean_text: bool,
        handle_chinese_chars: bool,
        strip_accents: bool,
        lowercase: bool,
        special_tokens: Vec<String>,
    ) -> PyResult<Self> {
        let normalizer = BertNormalizer {
            clean_text,
            handle_chinese_chars,
            strip_accents,
            lowercase,
        };
        Ok(PieceCounter {
            counter: Counter::bert(normalizer, special_tokens).map_err(to_py)?,
            counts: Mutex::new(PieceCounts::default()),
        })
    }

    /// A counter of SentencePiece words (spaces handled as SentencePiece
    /// does, line by line; a word starts at each `▁`), for Unigram.
    #[staticmethod]
    fn sentencepiece(
        remove_extra_whitespaces: bool,
        add_dummy_prefix: bool,
        special_tokens: Vec<String>,
    ) -> PyResult<Self> {
        let whitespace = Whitespace {
            remove_extra: remove_extra_whitespaces,
            add_dummy_prefix,
            ..Whitespace::default()
        };
        Ok(PieceCounter {
            counter: Counter::sentencepiece(whitespace, special_tokens).map_err(to_py)?,
            counts: Mutex::new(PieceCounts::default()),
        })
    }

    /// Counts a batch of texts on all cores (each text on its own: pieces
    /// never span two texts; lone surrogates read as U+FFFD).
    fn add_texts(&self, py: Python<'_>, texts: &Bound<'_, PyList>) -> PyResult<()> {
        let texts = Texts::of(texts)?;
        let texts = texts.texts();
        let counts = in_pool(py, || self.counter.count_texts(texts))?.map_err(to_py)?;
        self.lock().merge(counts);
        Ok(())
    }

    /// Counts the strings of an Arrow `string` or `large_string` array,
    /// given as its offsets and data buffers (`offset_width` 4 or 8 bytes;
    /// rows `first..first + rows`), without a Python string per row. On all
    /// cores, or (`parallel=False`: one of many workers, a core each) on
    /// this thread, straight into these counts.
    #[pyo3(signature = (offsets, data, offset_width, first, rows, parallel = true))]
    #[allow(clippy::too_many_arguments)]
    fn add_arrow_strings(
        &self,
        py: Python<'_>,
        offsets: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        offset_width: usize,
        first: usize,
        rows: usize,
        parallel: bool,
    ) -> PyResult<()> {
        let offsets = PyUntypedBuffer::get(offsets)?;
        let data = PyUntypedBuffer::get(data)?;
        let strings = ArrowStrings::new(
            contiguous_bytes(&offsets, "offsets")?,
            contiguous_bytes(&data, "data")?,
            offset_width,
            first,
            rows,
        )?;
        if parallel {
            let counts = in_pool(py, || self.counter.count_rows(rows, |i| strings.row(i)))?
                .map_err(to_py)?;
            self.lock().merge(counts);
            return Ok(());
        }
        let mut guard = self.lock();
        let total: &mut PieceCounts = &mut guard;
        in_pool(py, || {
            self.counter
                .count_many((0..rows).map(|i| strings.row(i)), total)
        })?
        .map_err(to_py)
    }

    /// Counts files (UTF-8; `errors="replace"` replaces bad bytes); with
    /// `max_pieces`, in bounded memory (see `Counter::count_files`), and
    /// the whole pruned to `max_pieces` afterwards.
    #[pyo3(signature = (paths, total_bytes, errors = "strict", progress = None, max_pieces = None))]
    fn add_files(
        &self,
        py: Python<'_>,
        paths: Vec<PathBuf>,
        total_bytes: u64,
        errors: &str,
        progress: Option<Py<PyAny>>,
        max_pieces: Option<usize>,
    ) -> PyResult<()> {
        let bad_bytes = parse_bad_bytes(errors)?;
        let counts = with_progress(py, progress, |p| {
            self.counter
                .count_files(&paths, bad_bytes, total_bytes, max_pieces, p)
        })?;
        let mut guard = self.lock();
        let total: &mut PieceCounts = &mut guard;
        in_pool(py, || {
            total.merge(counts);
            if let Some(max) = max_pieces {
                total.prune(max);
            }
        })
    }

    /// Distinct pieces counted so far.
    #[getter]
    fn distinct_pieces(&self) -> usize {
        self.lock().len()
    }

    /// Bytes of text counted so far.
    #[getter]
    fn text_bytes(&self) -> u64 {
        self.lock().text_bytes
    }

    /// Occurrences of the pieces kept.
    #[getter]
    fn occurrences(&self, py: Python<'_>) -> PyResult<u64> {
        let counts = self.lock();
        in_pool(py, || counts.occurrences())
    }

    /// `(pieces, occurrences)` left out by pruning.
    #[getter]
    fn dropped(&self) -> (u64, u64) {
        let dropped = self.lock().dropped;
        (dropped.pieces, dropped.occurrences)
    }

    /// How this counter cuts text, as JSON.
    #[getter]
    fn description(&self) -> String {
        self.counter.description().to_string()
    }

    /// The key this counter's table hashes with (see `table_key` of
    /// `copy`).
    #[getter]
    fn table_key(&self) -> u64 {
        self.lock().pieces.key()
    }

    /// A counter that cuts text as this one does, holding a copy of its
    /// counts (`with_counts`) or none, in a table hashing with the same
    /// key, or with `table_key`: the counting workers of one job take the
    /// driver's key, so that their tables add into its table shard by
    /// shard (`to_transfer_bytes`).
    #[pyo3(signature = (with_counts = true, table_key = None))]
    fn copy(&self, py: Python<'_>, with_counts: bool, table_key: Option<u64>) -> PyResult<Self> {
        let ours = self.lock();
        let key = table_key.unwrap_or(ours.pieces.key());
        let counts = if with_counts && key == ours.pieces.key() {
            in_pool(py, || ours.clone())?
        } else {
            let mut empty = PieceCounts {
                pieces: counting::PieceTable::with_key(key, 0),
                ..PieceCounts::default()
            };
            if with_counts {
                in_pool(py, || empty.add(&ours))?;
            }
            empty
        };
        Ok(PieceCounter {
            counter: Counter::from_description(&self.counter.description()).map_err(to_py)?,
            counts: Mutex::new(counts),
        })
    }

    /// Adds `other`'s counts into this one's; a `ValueError` names the
    /// setting that differs when they cut text differently.
    fn add(&self, py: Python<'_>, other: &PieceCounter) -> PyResult<()> {
        if let Some(difference) = self.counter.difference(&other.counter) {
            return Err(PyValueError::new_err(difference));
        }
        if std::ptr::eq(self, other) {
            let theirs = {
                let ours = self.lock();
                in_pool(py, || ours.clone())?
            };
            let mut guard = self.lock();
            let ours: &mut PieceCounts = &mut guard;
            return in_pool(py, || ours.add(&theirs));
        }
        let theirs = other.lock();
        let mut guard = self.lock();
        let (ours, theirs): (&mut PieceCounts, &PieceCounts) = (&mut guard, &theirs);
        in_pool(py, || ours.add(theirs))
    }

    /// The counts as bytes for another process of this job
    /// (`counting/transfer.rs`): unsorted, fast to write and to add, not to
    /// be kept.
    fn to_transfer_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let counts = self.lock();
        let data = in_pool(py, || counting::transfer::write(&self.counter, &counts))?;
        Ok(PyBytes::new(py, &data))
    }

    /// The sum of the counts of `to_transfer_bytes` parts (`source`
    /// names them in errors), as a counter; a `ValueError` when they were
    /// made differently.
    #[staticmethod]
    fn from_transfer_bytes(py: Python<'_>, parts: Vec<Vec<u8>>, source: &str) -> PyResult<Self> {
        let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let (counter, counts) =
            in_pool(py, || counting::transfer::read(&parts, source))?.map_err(to_py)?;
        Ok(PieceCounter {
            counter,
            counts: Mutex::new(counts),
        })
    }

    /// Adds the counts of `to_transfer_bytes` parts (the workers' counts):
    /// those hashed with this counter's key shard by shard on all cores.
    /// `source` names them in errors; a part made another way is a
    /// `ValueError`. Nothing is added unless every part is sound.
    fn add_transfer_bytes(
        &self,
        py: Python<'_>,
        parts: Vec<Vec<u8>>,
        source: &str,
    ) -> PyResult<()> {
        let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        let mut guard = self.lock();
        let total: &mut PieceCounts = &mut guard;
        in_pool(py, || {
            counting::transfer::add(total, &self.counter, &parts, source)
        })?
        .map_err(to_py)
    }

    /// Adds `other`'s counts, each multiplied by `factor` (at least 1) and
    /// rounded, never below 1 (language-balanced training); a `ValueError`
    /// when they cut text differently or the factor is below 1.
    fn add_scaled(&self, py: Python<'_>, other: &PieceCounter, factor: f64) -> PyResult<()> {
        if let Some(difference) = self.counter.difference(&other.counter) {
            return Err(PyValueError::new_err(difference));
        }
        if !(factor.is_finite() && factor >= 1.0) {
            return Err(PyValueError::new_err(format!(
                "a scale factor must be at least 1, not {factor}"
            )));
        }
        if std::ptr::eq(self, other) {
            return Err(PyValueError::new_err(
                "counts cannot be scaled into themselves",
            ));
        }
        let theirs = other.lock();
        let mut guard = self.lock();
        let (ours, theirs): (&mut PieceCounts, &PieceCounts) = (&mut guard, &theirs);
        in_pool(py, || ours.add_scaled(theirs, factor))
    }

    /// Keeps the `max_pieces` most frequent pieces; the others are
    /// recorded in `dropped`.
    fn prune(&self, py: Python<'_>, max_pieces: usize) -> PyResult<()> {
        let mut guard = self.lock();
        let counts: &mut PieceCounts = &mut guard;
        in_pool(py, || counts.prune(max_pieces))
    }

    /// The `n` most frequent pieces (all without `n`) as `(bytes, count)`,
    /// most frequent first, ties in byte order.
    #[pyo3(signature = (n = None))]
    fn most_common<'py>(
        &self,
        py: Python<'py>,
        n: Option<usize>,
    ) -> Vec<(Bound<'py, PyBytes>, u64)> {
        let counts = self.lock();
        let mut entries: Vec<(&[u8], u64)> = counts.pieces.iter().collect();
        entries.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        entries.truncate(n.unwrap_or(usize::MAX));
        entries
            .into_iter()
            .map(|(piece, count)| (PyBytes::new(py, piece), count))
            .collect()
    }

    /// The counts as the bytes of a count file (`counting/file.rs`).
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let counts = self.lock();
        let data = in_pool(py, || counting::file::write(&self.counter, &counts))?;
        Ok(PyBytes::new(py, &data))
    }

    /// The counter and counts of a count file's bytes; `source` names the
    /// file in errors.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8], source: &str) -> PyResult<Self> {
        let (counter, counts) =
            in_pool(py, || counting::file::read(data, source))?.map_err(to_py)?;
        Ok(PieceCounter {
            counter,
            counts: Mutex::new(counts),
        })
    }
}

impl PieceCounter {
    fn lock(&self) -> std::sync::MutexGuard<'_, PieceCounts> {
        self.counts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The bytes of a buffer (pyarrow's, a `memoryview`, `bytes`), which
/// must be contiguous. They stay valid while `buffer` is held: an exported
/// buffer is neither freed nor moved.
fn contiguous_bytes<'a>(buffer: &'a PyUntypedBuffer, name: &str) -> PyResult<&'a [u8]> {
    if !buffer.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "the {name} buffer is not contiguous"
        )));
    }
    // SAFETY: a contiguous buffer of `len_bytes` bytes from `buf_ptr`, kept
    // alive by `buffer`; Arrow buffers are never written after they are made.
    Ok(unsafe { std::slice::from_raw_parts(buffer.buf_ptr() as *const u8, buffer.len_bytes()) })
}

/// The rows of an Arrow string array, read from its buffers: offsets of
/// `width` bytes into `data`, the array's rows starting at offset `first`.
struct ArrowStrings<'a> {
    offsets: &'a [u8],
    data: &'a [u8],
    width: usize,
    first: usize,
}

impl<'a> ArrowStrings<'a> {
    /// The array of `rows` rows; a `ValueError` if the offsets buffer is too
    /// short for them or the width is not Arrow's.
    fn new(
        offsets: &'a [u8],
        data: &'a [u8],
        width: usize,
        first: usize,
        rows: usize,
    ) -> PyResult<Self> {
        if width != 4 && width != 8 {
            return Err(PyValueError::new_err(format!(
                "Arrow string offsets are 4 or 8 bytes wide, not {width}"
            )));
        }
        let needed = first
            .checked_add(rows)
            .and_then(|n| n.checked_add(1))
            .and_then(|n| n.checked_mul(width));
        if needed.is_none_or(|needed| needed > offsets.len()) {
            return Err(PyValueError::new_err(format!(
                "the offsets buffer ({} bytes) is too short for rows {first}..{}",
                offsets.len(),
                first.saturating_add(rows)
            )));
        }
        Ok(ArrowStrings {
            offsets,
            data,
            width,
            first,
        })
    }

    fn offset(&self, row: usize) -> i64 {
        let at = (self.first + row) * self.width;
        let bytes = &self.offsets[at..at + self.width];
        match self.width {
            4 => i32::from_ne_bytes(bytes.try_into().unwrap()) as i64,
            _ => i64::from_ne_bytes(bytes.try_into().unwrap()),
        }
    }

    /// Row `row` (`new` checked that its offsets exist), which must lie in
    /// the data buffer and be UTF-8: an error names it otherwise.
    fn row(&self, row: usize) -> Result<&'a str, Error> {
        let (start, end) = (self.offset(row), self.offset(row + 1));
        if start < 0 || end < start || end as u64 > self.data.len() as u64 {
            return Err(Error::invalid(format!(
                "row {row} of the Arrow array spans bytes {start}..{end} of a {}-byte data buffer",
                self.data.len()
            )));
        }
        std::str::from_utf8(&self.data[start as usize..end as usize])
            .map_err(|e| Error::invalid(format!("row {row} of the Arrow array is not UTF-8: {e}")))
    }
}

/// Which special tokens to recognize: None, "all", or a list of texts.
fn allowed_special_tokens(allowed: Option<&Bound<'_, PyAny>>) -> PyResult<AllowedSpecial> {
    let Some(allowed) = allowed else {
        return Ok(AllowedSpecial::None);
    };
    if let Ok(text) = allowed.extract::<String>() {
        return if text == "all" {
            Ok(AllowedSpecial::All)
        } else {
            Err(PyValueError::new_err(format!(
                "allowed_special must be \"all\" or a collection of special tokens, not {text:?}"
            )))
        };
    }
    let texts: Vec<String> = allowed
        .try_iter()?
        .map(|item| item?.extract::<String>())
        .collect::<PyResult<_>>()?;
    Ok(if texts.is_empty() {
        AllowedSpecial::None
    } else {
        AllowedSpecial::Only(texts)
    })
}

/// Python's cyclic garbage collector, paused while a batch's result lists
/// are made: hundreds of thousands of new lists would otherwise trigger
/// collections that traverse them all (a fifth of the batch's time), though
/// lists of ints can hold no cycle.
struct GcPause<'py> {
    gc: Option<Bound<'py, PyModule>>,
}

impl<'py> GcPause<'py> {
    fn new(py: Python<'py>) -> PyResult<Self> {
        let gc = py.import("gc")?;
        if gc.call_method0("isenabled")?.is_truthy()? {
            gc.call_method0("disable")?;
            Ok(GcPause { gc: Some(gc) })
        } else {
            Ok(GcPause { gc: None })
        }
    }
}

impl Drop for GcPause<'_> {
    fn drop(&mut self) {
        if let Some(gc) = &self.gc {
            // Re-enabling cannot fail in practice; there is nowhere to report it.
            let _ = gc.call_method0("enable");
        }
    }
}

/// Texts shorter than this are encoded without releasing the GIL (releasing
/// costs more than the work).
const DETACH_BYTES: usize = 1 << 14;

/// The Python int of every id of a vocabulary, made once: building the
/// result lists then costs a reference count per id instead of an
/// allocation, which would otherwise take about as long as encoding itself.
/// (Ids beyond, such as far special ids, are made when needed.)
struct Ints(Vec<Py<PyAny>>);

impl Ints {
    fn new(py: Python<'_>, n: usize) -> PyResult<Self> {
        let ints = (0..n)
            .map(|id| Ok(id.into_pyobject(py)?.into_any().unbind()))
            .collect::<PyResult<_>>()?;
        Ok(Ints(ints))
    }

    /// The list of the ints of `ids`.
    fn list<'py>(&self, py: Python<'py>, ids: &[u32]) -> PyResult<Bound<'py, PyList>> {
        self.list_of(py, ids, 0..ids.len())
    }

    /// The list of the ints of `all[range]`, the ids that follow the range
    /// in `all` fetched ahead as if in it. Each int's reference count is
    /// written, and after encoding a long text (or a chunk of a batch) the
    /// ints of a large vocabulary (cl100k's: 3.2 MB, and 0.8 MB of pointers
    /// to them) have left the caches: each id's slot, then its int, is
    /// fetched a fixed number of ids ahead. On 10 MB of English in 1 MB
    /// documents, building the lists went from about as long as the
    /// lookups of `flush` to 0.4 of them (perf, one thread); 32 and 16
    /// ahead gave 0.65, 256 and 128 no better than these.
    fn list_of<'py>(
        &self,
        py: Python<'py>,
        all: &[u32],
        range: std::ops::Range<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        const SLOT_AHEAD: usize = 128;
        const INT_AHEAD: usize = 64;
        let int_of = |id: u32| self.0.get(id as usize);
        PyList::new(
            py,
            all[range.clone()].iter().zip(range).map(|(&id, at)| {
                if let Some(slot) = all.get(at + SLOT_AHEAD).and_then(|&ahead| int_of(ahead)) {
                    crate::prefetch::line(slot);
                }
                if let Some(int) = all.get(at + INT_AHEAD).and_then(|&ahead| int_of(ahead)) {
                    crate::prefetch::address(int.as_ptr());
                }
                match int_of(id) {
                    Some(int) => int.bind(py).clone(),
                    None => id.into_pyobject(py).expect("ints convert").into_any(),
                }
            }),
        )
    }

    /// The list of each text's ids in `runs`, fetched ahead across texts:
    /// a batch's texts are often shorter than the distance ahead.
    fn lists(&self, py: Python<'_>, runs: &IdRuns) -> PyResult<Vec<Py<PyList>>> {
        runs.ranges()
            .map(|range| Ok(self.list_of(py, runs.all(), range)?.unbind()))
            .collect()
    }
}

/// What a polytok JSON file holds besides the model: its training record
/// and its pipeline.
type Record = Option<serde_json::Value>;

/// A model read from polytok JSON without the GIL, with its training
/// record and pipeline as JSON text.
fn read_json<M: Send>(
    py: Python<'_>,
    json: &str,
    source: &str,
    read: impl FnOnce(&str, &str) -> Result<(M, Record, Record), Error> + Send,
) -> PyResult<(M, Option<String>, Option<String>)> {
    let (model, training, pipeline) = guarded(py, true, || read(json, source))?.map_err(to_py)?;
    Ok((
        model,
        training.map(|t| t.to_string()),
        pipeline.map(|p| p.to_string()),
    ))
}

/// A record (training, pipeline) given as JSON text by the Python side.
fn parse_record(record: Option<&str>, what: &str) -> PyResult<Record> {
    record
        .map(serde_json::from_str::<serde_json::Value>)
        .transpose()
        .map_err(|e| PyValueError::new_err(format!("{what} record is not JSON: {e}")))
}

/// A trainer's settings as the Python side gives them: a dict of its
/// keyword arguments by name. Each setting is read once, with a `ValueError`
/// naming it when it is missing or of the wrong type; `finish` refuses the
/// keys no setting read (a misspelled or unknown setting).
struct Settings<'a, 'py> {
    dict: &'a Bound<'py, PyDict>,
    read: Vec<&'static str>,
}

impl<'a, 'py> Settings<'a, 'py> {
    fn new(dict: &'a Bound<'py, PyDict>) -> Self {
        Settings {
            dict,
            read: Vec::new(),
        }
    }

    /// The setting `name`, which must be given.
    fn required<T: FromPyObjectOwned<'py>>(&mut self, name: &'static str) -> PyResult<T> {
        self.get(name)?
            .ok_or_else(|| PyValueError::new_err(format!("the training setting {name} is missing")))
    }

    /// The setting `name`, or `default` when it is not given.
    fn or<T: FromPyObjectOwned<'py>>(&mut self, name: &'static str, default: T) -> PyResult<T> {
        Ok(self.get(name)?.unwrap_or(default))
    }

    fn get<T: FromPyObjectOwned<'py>>(&mut self, name: &'static str) -> PyResult<Option<T>> {
        self.read.push(name);
        self.dict
            .get_item(name)?
            .map(|value| {
                value.extract::<T>().map_err(|err| {
                    let err: PyErr = err.into();
                    PyValueError::new_err(format!("the training setting {name}: {err}"))
                })
            })
            .transpose()
    }

    /// Refuses a key that is not one of the settings read.
    fn finish(self) -> PyResult<()> {
        for key in self.dict.keys() {
            if !key
                .extract::<&str>()
                .is_ok_and(|key| self.read.contains(&key))
            {
                return Err(PyValueError::new_err(format!(
                    "unknown training setting {}; the settings are {}",
                    key.repr()?,
                    self.read.join(", ")
                )));
            }
        }
        Ok(())
    }
}

/// Runs the encoding of one input of `len` bytes: a short one on this
/// thread with the GIL (releasing it costs more than such an encoding), a
/// longer one without it, and one long enough to be cut in the pool, whose
/// threads share it (`Tokenizer::encode_ids_into`), if the pool has more
/// than one. A pool of one thread would only move the work to another
/// thread, with caches of its own (the BPE memo of merged pieces, the ids'
/// and UTF-8 buffers): a thread encoding short and long texts alike on one
/// core filled two sets.
fn run_encoding<T: Send>(
    py: Python<'_>,
    len: usize,
    work: impl FnOnce() -> T + Send,
) -> PyResult<T> {
    if len >= CUT_BYTES && thread_pool()?.current_num_threads() > 1 {
        in_pool(py, work)
    } else {
        guarded(py, len >= DETACH_BYTES, work)
    }
}

/// The ids of `text` (by `encode`) as a Python list, the GIL
/// released for long texts.
fn encode_list<'py>(
    py: Python<'py>,
    ints: &Ints,
    text: &str,
    allowed_special: Option<&Bound<'_, PyAny>>,
    encode: impl Fn(&str, &AllowedSpecial, &mut Vec<u32>) -> Result<(), Error> + Sync,
) -> PyResult<Bound<'py, PyList>> {
    let allowed = allowed_special_tokens(allowed_special)?;
    with_ids(py, text, &allowed, encode, |ids| ints.list(py, ids))?
}

/// `then` of the ids of `text` (by `encode`), the GIL released for long
/// texts.
fn with_ids<R>(
    py: Python<'_>,
    text: &str,
    allowed: &AllowedSpecial,
    encode: impl Fn(&str, &AllowedSpecial, &mut Vec<u32>) -> Result<(), Error> + Sync,
    then: impl FnOnce(&[u32]) -> R,
) -> PyResult<R> {
    thread_local! {
        /// The ids of the text being encoded, reused: a fresh megabyte of
        /// ids per document would cost page faults.
        static IDS: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    IDS.with(|ids| {
        let ids = &mut *ids.borrow_mut();
        ids.clear();
        run_encoding(py, text.len(), || encode(text, allowed, ids))?.map_err(to_py)?;
        let result = then(ids);
        if ids.capacity() > 1 << 22 {
            *ids = Vec::new();
        }
        Ok(result)
    })
}

/// A batch's ids as Python lists, without the GIL: chunks of texts are
/// encoded on all cores (`encode_texts`, see `for_chunks_while_reading`),
/// and the thread that encoded a chunk then takes the GIL to turn it into
/// Python lists, while the other threads go on encoding. The list
/// building, which only one thread can do at a time, overlaps the encoding
/// instead of following it.
fn encode_batch_lists<'py>(
    py: Python<'py>,
    ints: &Ints,
    list: &Bound<'_, PyList>,
    allowed_special: Option<&Bound<'_, PyAny>>,
    encode_texts: impl Fn(&[&str], &AllowedSpecial, &mut IdRuns) -> Result<(), Error> + Sync,
) -> PyResult<Bound<'py, PyList>> {
    let allowed = allowed_special_tokens(allowed_special)?;
    let _paused = GcPause::new(py)?;
    // Read before the GIL is released: another thread may change the list.
    let texts = list.len();
    let chunks = for_chunks_while_reading(
        py,
        list,
        |chunk| {
            batch::encode_chunk(
                chunk,
                |chunk, runs| encode_texts(chunk, &allowed, runs),
                |runs| Python::attach(|py| ints.lists(py, runs)),
            )
        },
        |chunks| chunks,
    )?;
    let mut lists = Vec::with_capacity(texts);
    for chunk in chunks {
        lists.extend(chunk.map_err(to_py)??);
    }
    PyList::new(py, lists)
}

/// Every id of a batch and where each text's start (see `encode_batch_flat`).
type FlatArrays<'py> = (Bound<'py, PyArray1<u32>>, Bound<'py, PyArray1<i64>>);

/// A batch's ids as two NumPy arrays, built without the GIL (see
/// `batch::join_flat`): every id, one text after another (`uint32`), and
/// the `n + 1` offsets where each text's ids start and the last one's end
/// (`int64`). The arrays own the vectors the pool wrote: no copy under the
/// GIL, no Python object per id.
fn encode_batch_flat<'py>(
    py: Python<'py>,
    list: &Bound<'_, PyList>,
    encode_texts: impl Fn(&[&str], &mut IdRuns) -> Result<(), Error> + Sync,
) -> PyResult<FlatArrays<'py>> {
    // Read before the GIL is released: another thread may change the list.
    let texts = list.len();
    let join = |chunks: Vec<Result<FlatChunk, Error>>| {
        let chunks = chunks.into_iter().collect::<Result<Vec<_>, _>>()?;
        Ok(match <[_; 1]>::try_from(chunks) {
            Ok([chunk]) => batch::flat_of_one(chunk),
            Err(chunks) => batch::join_flat(&chunks, texts),
        })
    };
    let (ids, offsets) = for_chunks_while_reading(
        py,
        list,
        |chunk| batch::encode_chunk(chunk, &encode_texts, batch::flat_chunk),
        join,
    )?
    .map_err(to_py)?;
    Ok((ids.into_pyarray(py), offsets.into_pyarray(py)))
}

/// Batches of fewer texts are read whole before the pool starts: reading
/// them takes less than 0.15 ms, and a scope with a job per chunk and a
/// wait cost a call of 8 or 150 short texts 25 to 40 µs more than one trip
/// to the pool (2 threads).
const STREAMED_TEXTS: usize = 1 << 14;

/// What `then` makes of what `work` gives for each chunk of the texts of
/// `list` (in order), both run in polytok's pool (see `in_pool`).
///
/// A list of `STREAMED_TEXTS` texts or more is read a chunk at a time on
/// this thread (with the GIL: `texts::read_items`), and each chunk goes to
/// the pool as soon as it is read, so that reading, the one part of the
/// work that needs the GIL, overlaps the work on the chunks before it
/// instead of preceding it all (2.5 ms of each call on the 284,000 lines
/// of 10 MB of English). This thread then waits without the GIL. The
/// texts' references are dropped here, once every chunk is done.
fn for_chunks_while_reading<R: Send + Sync, T: Send>(
    py: Python<'_>,
    list: &Bound<'_, PyList>,
    work: impl Fn(&[FixedWidth<'_>]) -> R + Sync,
    then: impl FnOnce(Vec<R>) -> T + Send,
) -> PyResult<T> {
    let pool = thread_pool()?;
    let n = list.len();
    let chunk_len = batch::chunk_len(n, pool.current_num_threads());
    if n < STREAMED_TEXTS {
        let texts = Texts::of(list)?;
        let texts = texts.texts();
        return in_pool(py, || {
            then(texts.par_chunks(chunk_len).map(&work).collect())
        });
    }
    let mut held = Vec::with_capacity(n);
    let mut characters: Vec<FixedWidth<'static>> = Vec::with_capacity(n);
    let unread = &mut characters.spare_capacity_mut()[..n];
    let results: Vec<OnceLock<R>> = (0..n.div_ceil(chunk_len))
        .map(|_| OnceLock::new())
        .collect();
    let unfinished = Countdown::default();
    let read = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.in_place_scope(|scope| -> PyResult<()> {
            let mut read = Ok(());
            for ((i, out), result) in unread.chunks_mut(chunk_len).enumerate().zip(&results) {
                if let Err(err) = read_items(list, i * chunk_len, &mut held, out) {
                    read = Err(err);
                    break;
                }
                // SAFETY: `read_items` wrote every item of `out`; `held`
                // and `characters` outlive the scope.
                let chunk = unsafe { &*(out as *const [_] as *const [FixedWidth<'_>]) };
                let (work, started) = (&work, unfinished.start());
                scope.spawn(move |_| {
                    let _started = started;
                    let _ = result.set(work(chunk));
                });
            }
            // Also after an error, without the GIL: the chunks under way
            // may need it (their Python lists), and the scope's end would
            // wait for them holding it.
            py.detach(|| unfinished.wait());
            read
        })
    }));
    read.map_err(panic_error)??;
    let results = results
        .into_iter()
        .map(|result| result.into_inner().expect("every chunk was worked on"))
        .collect();
    in_pool(py, || then(results))
}

/// Jobs started and not finished yet, and a way to wait until none is left.
#[derive(Default)]
struct Countdown {
    left: Mutex<usize>,
    none_left: Condvar,
}

impl Countdown {
    /// Counts one job started; the guard counts it finished when dropped:
    /// at the job's end, or as it unwinds from a panic (which would
    /// otherwise leave `wait` waiting forever).
    fn start(&self) -> impl Drop + Send + '_ {
        *self.left.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        struct Finished<'a>(&'a Countdown);
        impl Drop for Finished<'_> {
            fn drop(&mut self) {
                let mut left = self.0.left.lock().unwrap_or_else(|e| e.into_inner());
                *left -= 1;
                if *left == 0 {
                    self.0.none_left.notify_all();
                }
            }
        }
        Finished(self)
    }

    fn wait(&self) {
        let mut left = self.left.lock().unwrap_or_else(|e| e.into_inner());
        while *left > 0 {
            left = self.none_left.wait(left).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A BPE trainer's settings: the keyword arguments in `settings`, the
/// pattern and special tokens of the `counter` it trains from.
fn bpe_trainer_settings(
    settings: &Bound<'_, PyDict>,
    counter: &PieceCounter,
) -> PyResult<TrainerSettings> {
    let mut s = Settings::new(settings);
    let settings = TrainerSettings {
        vocab_size: s.required("vocab_size")?,
        min_frequency: s.or("min_frequency", 2)?,
        special_tokens: counter.counter.special_tokens().to_vec(),
        max_token_bytes: s.or("max_token_bytes", None)?,
        pattern: counter
            .counter
            .pattern()
            .ok_or_else(|| PyValueError::new_err("BPE trains on a counter of pattern pieces"))?
            .clone(),
    };
    s.finish()?;
    settings.validate().map_err(to_py)?;
    Ok(settings)
}

/// What parity-aware training takes besides the languages' counters and
/// the model's settings, as a dict from Python: a counter per language of a
/// parallel development set (`dev`, emptied) or target ratios (`ratios`),
/// the variants (`global_merges`, `window`) and the languages' `names`.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
struct ParityArgs<'py> {
    #[pyo3(default)]
    dev: Option<Vec<PyRef<'py, PieceCounter>>>,
    #[pyo3(default)]
    ratios: Option<Vec<f64>>,
    #[pyo3(default)]
    global_merges: usize,
    #[pyo3(default)]
    window: Option<(usize, f64)>,
    names: Vec<String>,
}

/// A model's parity-aware training (`train`, with the model's `settings`
/// made with the first counter) from Python: the languages' counters,
/// checked to be made alike, each locked once (however many
/// languages share it) and read while it trains, not emptied. Returns the
/// model and the record as a dict: the language each step was chosen for
/// (`chosen`; None: by counts over all languages), each language's
/// `tokens_before` and `tokens_after`, and the `distinct_pieces` over all
/// languages.
fn train_parity<'py, M: Send, S: Sync>(
    py: Python<'py>,
    counters: &[PyRef<'_, PieceCounter>],
    args: ParityArgs<'_>,
    progress: Option<Py<PyAny>>,
    settings: impl FnOnce(&PieceCounter) -> PyResult<S>,
    train: impl FnOnce(
            &[&PieceCounts],
            parity::Target,
            &S,
            &parity::ParitySettings,
            &Progress,
        ) -> Result<(M, parity::ParityRecord), Error>
        + Send,
) -> PyResult<(M, Bound<'py, PyDict>)> {
    let first = counters
        .first()
        .ok_or_else(|| PyValueError::new_err("parity-aware training needs languages"))?;
    let model_settings = settings(first)?;
    if let Some(difference) = counters
        .iter()
        .chain(args.dev.iter().flatten())
        .find_map(|c| first.counter.difference(&c.counter))
    {
        return Err(PyValueError::new_err(difference));
    }
    let target = match (args.dev, args.ratios) {
        (Some(dev), None) => {
            parity::Target::Dev(dev.iter().map(|c| std::mem::take(&mut *c.lock())).collect())
        }
        (None, Some(ratios)) => parity::Target::Ratios(ratios),
        _ => {
            return Err(PyValueError::new_err(
                "give a development set or target ratios (one of them)",
            ))
        }
    };
    let parity_settings = parity::ParitySettings {
        global_merges: args.global_merges,
        window: args.window,
        names: args.names,
    };
    let mut unique: Vec<&PieceCounter> = Vec::new();
    let slots: Vec<usize> = counters
        .iter()
        .map(|c| {
            let c: &PieceCounter = c;
            unique
                .iter()
                .position(|u| std::ptr::eq(*u, c))
                .unwrap_or_else(|| {
                    unique.push(c);
                    unique.len() - 1
                })
        })
        .collect();
    let guards: Vec<_> = unique.iter().map(|c| c.lock()).collect();
    let languages: Vec<&PieceCounts> = slots.iter().map(|&i| &*guards[i]).collect();
    let (model, record) = with_progress(py, progress, |p| {
        train(&languages, target, &model_settings, &parity_settings, p)
    })?;
    drop(guards);
    let dict = PyDict::new(py);
    dict.set_item("chosen", record.chosen)?;
    dict.set_item("tokens_before", record.tokens_before)?;
    dict.set_item("tokens_after", record.tokens_after)?;
    dict.set_item("distinct_pieces", record.distinct_pieces)?;
    Ok((model, dict))
}

/// A WordPiece trainer's settings from their Python names, with a BERT
/// counter's normalization and special tokens.
fn wordpiece_trainer_settings(
    settings: &Bound<'_, PyDict>,
    counter: &PieceCounter,
) -> PyResult<WordPieceTrainerSettings> {
    let normalizer = counter
        .counter
        .bert_normalizer()
        .ok_or_else(|| PyValueError::new_err("WordPiece trains on a counter of BERT words"))?;
    let bert = WordPieceSettings::default();
    let mut s = Settings::new(settings);
    let settings = WordPieceTrainerSettings {
        vocab_size: s.or("vocab_size", 30_000)?,
        min_frequency: s.or("min_frequency", 2)?,
        limit_alphabet: s.or("limit_alphabet", None)?,
        model: WordPieceSettings {
            unk_token: s.or("unk_token", bert.unk_token)?,
            continuing_subword_prefix: s
                .or("continuing_subword_prefix", bert.continuing_subword_prefix)?,
            max_input_chars_per_word: s
                .or("max_input_chars_per_word", bert.max_input_chars_per_word)?,
            normalizer,
            special_tokens: counter.counter.special_tokens().to_vec(),
        },
    };
    s.finish()?;
    if settings.model.continuing_subword_prefix.is_empty() {
        return Err(PyValueError::new_err(
            "the continuing subword prefix must not be empty",
        ));
    }
    Ok(settings)
}

/// A byte-level BPE model (the Rust side of `polytok.BPETokenizer`).
#[pyclass(module = "polytok._core", frozen)]
struct Bpe {
    pub(crate) model: Arc<BpeModel>,
    ints: Arc<Ints>,
}

impl Bpe {
    fn new(py: Python<'_>, model: impl Into<Arc<BpeModel>>) -> PyResult<Self> {
        let model = model.into();
        let ints = Ints::new(py, model.first_id() as usize + model.vocab().len())?;
        Ok(Bpe {
            model,
            ints: Arc::new(ints),
        })
    }
}

#[pymethods]
impl Bpe {
    /// Learns a model from a counter's pieces (which it empties), with the
    /// counter's pattern and special tokens.
    /// `settings`: the trainer's settings by name, as its Python keyword
    /// arguments (not the counter's).
    #[staticmethod]
    #[pyo3(signature = (counter, settings, progress = None))]
    fn train(
        py: Python<'_>,
        counter: &PieceCounter,
        settings: &Bound<'_, PyDict>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let settings = bpe_trainer_settings(settings, counter)?;
        let counts = std::mem::take(&mut *counter.lock());
        let model = with_progress(py, progress, |p| bpe::train(counts, &settings, p))?;
        Bpe::new(py, model)
    }

    /// Learns a model parity-aware (`bpe/parity.rs`) from one counter per
    /// language, with their pattern and special tokens; `parity` and what
    /// it returns: see `train_parity`.
    #[staticmethod]
    #[pyo3(signature = (counters, settings, parity, progress = None))]
    fn train_parity<'py>(
        py: Python<'py>,
        counters: Vec<PyRef<'_, PieceCounter>>,
        settings: &Bound<'_, PyDict>,
        parity: ParityArgs<'_>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<(Self, Bound<'py, PyDict>)> {
        let (model, record) = train_parity(
            py,
            &counters,
            parity,
            progress,
            |first| bpe_trainer_settings(settings, first),
            bpe::parity::train,
        )?;
        Ok((Bpe::new(py, model)?, record))
    }

    #[staticmethod]
    fn from_json(
        py: Python<'_>,
        json: &str,
        source: &str,
    ) -> PyResult<(Self, Option<String>, Option<String>)> {
        let (model, training, pipeline) = read_json(py, json, source, BpeModel::from_json)?;
        Ok((Bpe::new(py, model)?, training, pipeline))
    }

    /// polytok JSON; `training` and `pipeline` are JSON objects recorded
    /// in the file.
    #[pyo3(signature = (training = None, pipeline = None))]
    fn to_json(&self, training: Option<&str>, pipeline: Option<&str>) -> PyResult<String> {
        Ok(self.model.to_json(
            parse_record(training, "training")?.as_ref(),
            parse_record(pipeline, "pipeline")?.as_ref(),
        ))
    }

    #[staticmethod]
    fn from_tiktoken(
        py: Python<'_>,
        text: &str,
        source: &str,
        pattern: &str,
        special_tokens: Vec<(String, u32)>,
    ) -> PyResult<Self> {
        let model = guarded(py, true, || {
            BpeModel::from_tiktoken(text, source, Pattern::parse(pattern)?, special_tokens)
        })?
        .map_err(to_py)?;
        Bpe::new(py, model)
    }

    fn clear_cache(&self) {
        self.model.clear_cache();
    }

    fn to_tiktoken(&self) -> String {
        self.model.to_tiktoken()
    }

    fn decode_bytes<'py>(&self, py: Python<'py>, ids: Vec<u32>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.model.decode_bytes(&ids).map_err(to_py)?;
        Ok(PyBytes::new(py, &bytes))
    }

    fn token_bytes<'py>(&self, py: Python<'py>, id: u32) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.model.token_bytes(id).map_err(to_py)?;
        Ok(PyBytes::new(py, bytes))
    }

    fn token_id(&self, token: &[u8]) -> Option<u32> {
        self.model.token_id(token)
    }

    /// Every id, the ids before the ranks included (`first_id`).
    #[getter]
    fn vocab_size(&self) -> usize {
        self.model.first_id() as usize + self.model.vocab_size()
    }

    /// Ordinary (non-special) tokens: ids `0..n_ordinary`.
    #[getter]
    fn n_ordinary(&self) -> usize {
        self.model.vocab().len()
    }

    #[getter]
    fn pattern(&self) -> String {
        self.model.pattern().spec().to_owned()
    }

    #[getter]
    fn special_tokens(&self) -> Vec<(String, u32)> {
        self.model
            .special_tokens()
            .iter()
            .map(|(text, id)| (text.to_owned(), id))
            .collect()
    }

    #[getter]
    fn merges(&self) -> Option<Vec<(u32, u32)>> {
        self.model.merges().map(<[_]>::to_vec)
    }
}

/// A WordPiece model (the Rust side of `polytok.WordPieceTokenizer`).
#[pyclass(module = "polytok._core", frozen)]
struct WordPiece {
    pub(crate) model: Arc<WordPieceModel>,
    ints: Arc<Ints>,
}

impl WordPiece {
    fn new(py: Python<'_>, model: impl Into<Arc<WordPieceModel>>) -> PyResult<Self> {
        let model = model.into();
        let ints = Ints::new(py, model.vocab().len())?;
        Ok(WordPiece {
            model,
            ints: Arc::new(ints),
        })
    }
}

#[pymethods]
impl WordPiece {
    /// Learns a model from a BERT counter's words (which it empties), with
    /// the counter's normalization and special tokens.
    /// `settings`: the trainer's settings by name, as its Python keyword
    /// arguments (not the counter's).
    #[staticmethod]
    #[pyo3(signature = (counter, settings, progress = None))]
    fn train(
        py: Python<'_>,
        counter: &PieceCounter,
        settings: &Bound<'_, PyDict>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let settings = wordpiece_trainer_settings(settings, counter)?;
        let counts = std::mem::take(&mut *counter.lock());
        let model = with_progress(py, progress, |p| wordpiece::train(counts, &settings, p))?;
        WordPiece::new(py, model)
    }

    /// Learns a model parity-aware (`wordpiece/parity.rs`) from one BERT
    /// counter per language, with their normalization and special tokens;
    /// `parity` and what it returns: see `train_parity`.
    #[staticmethod]
    #[pyo3(signature = (counters, settings, parity, progress = None))]
    fn train_parity<'py>(
        py: Python<'py>,
        counters: Vec<PyRef<'_, PieceCounter>>,
        settings: &Bound<'_, PyDict>,
        parity: ParityArgs<'_>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<(Self, Bound<'py, PyDict>)> {
        let (model, record) = train_parity(
            py,
            &counters,
            parity,
            progress,
            |first| wordpiece_trainer_settings(settings, first),
            wordpiece::parity::train,
        )?;
        Ok((WordPiece::new(py, model)?, record))
    }

    /// A model from a `vocab.txt`'s text and the settings.
    #[staticmethod]
    #[allow(clippy::too_many_arguments)]
    fn from_vocab_txt(
        py: Python<'_>,
        text: &str,
        source: &str,
        unk_token: String,
        continuing_subword_prefix: String,
        max_input_chars_per_word: usize,
        clean_text: bool,
        handle_chinese_chars: bool,
        strip_accents: bool,
        lowercase: bool,
        special_tokens: Vec<String>,
    ) -> PyResult<Self> {
        let settings = WordPieceSettings {
            unk_token,
            continuing_subword_prefix,
            max_input_chars_per_word,
            normalizer: BertNormalizer {
                clean_text,
                handle_chinese_chars,
                strip_accents,
                lowercase,
            },
            special_tokens,
        };
        let model = guarded(py, true, || {
            WordPieceModel::from_vocab_txt(text, source, settings)
        })?
        .map_err(to_py)?;
        WordPiece::new(py, model)
    }

    #[staticmethod]
    fn from_json(
        py: Python<'_>,
        json: &str,
        source: &str,
    ) -> PyResult<(Self, Option<String>, Option<String>)> {
        let (model, training, pipeline) = read_json(py, json, source, WordPieceModel::from_json)?;
        Ok((WordPiece::new(py, model)?, training, pipeline))
    }

    /// polytok JSON; `training` and `pipeline` are JSON objects recorded
    /// in the file.
    #[pyo3(signature = (training = None, pipeline = None))]
    fn to_json(&self, training: Option<&str>, pipeline: Option<&str>) -> PyResult<String> {
        Ok(self.model.to_json(
            parse_record(training, "training")?.as_ref(),
            parse_record(pipeline, "pipeline")?.as_ref(),
        ))
    }

    fn to_vocab_txt(&self) -> String {
        self.model.to_vocab_txt()
    }

    #[pyo3(signature = (ids, cleanup = true))]
    fn decode(&self, ids: Vec<u32>, cleanup: bool) -> PyResult<String> {
        self.model.decode(&ids, cleanup).map_err(to_py)
    }

    fn token(&self, id: u32) -> PyResult<String> {
        self.model.token(id).map(str::to_owned).map_err(to_py)
    }

    #[getter]
    fn unk_id(&self) -> u32 {
        self.model.unk_id()
    }

    fn token_id(&self, token: &str) -> Option<u32> {
        self.model.vocab().id(token.as_bytes())
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.model.vocab().len()
    }

    /// The settings, as keyword arguments of `from_vocab_txt`.
    #[getter]
    fn settings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.model.settings();
        let n = s.normalizer;
        let dict = PyDict::new(py);
        dict.set_item("unk_token", &s.unk_token)?;
        dict.set_item("continuing_subword_prefix", &s.continuing_subword_prefix)?;
        dict.set_item("max_input_chars_per_word", s.max_input_chars_per_word)?;
        dict.set_item("clean_text", n.clean_text)?;
        dict.set_item("handle_chinese_chars", n.handle_chinese_chars)?;
        dict.set_item("strip_accents", n.strip_accents)?;
        dict.set_item("lowercase", n.lowercase)?;
        dict.set_item("special_tokens", &s.special_tokens)?;
        Ok(dict)
    }
}

/// A Unigram model (the Rust side of `polytok.UnigramTokenizer`).
#[pyclass(module = "polytok._core", frozen)]
struct Unigram {
    pub(crate) model: Arc<UnigramModel>,
    ints: Arc<Ints>,
}

impl Unigram {
    fn new(py: Python<'_>, model: impl Into<Arc<UnigramModel>>) -> PyResult<Self> {
        let model = model.into();
        let ints = Ints::new(py, model.pieces().len())?;
        Ok(Unigram {
            model,
            ints: Arc::new(ints),
        })
    }

    /// The trainer's settings read from `s` (the rest unread), with
    /// `counter`'s whitespace handling.
    fn trainer_settings(
        s: &mut Settings<'_, '_>,
        counter: &PieceCounter,
    ) -> PyResult<UnigramTrainerSettings> {
        let whitespace = counter.counter.whitespace().ok_or_else(|| {
            PyValueError::new_err("Unigram trains on a counter of SentencePiece words")
        })?;
        let d = UnigramTrainerSettings::new(8000, whitespace);
        Ok(UnigramTrainerSettings {
            vocab_size: s.or("vocab_size", d.vocab_size)?,
            character_coverage: s.or("character_coverage", d.character_coverage)?,
            byte_fallback: s.or("byte_fallback", d.byte_fallback)?,
            unk_token: s.or("unk_token", d.unk_token)?,
            special_tokens: s.or("special_tokens", d.special_tokens)?,
            rules: PieceRules {
                max_piece_chars: s.or("max_piece_length", d.rules.max_piece_chars)?,
                split_by_script: s.or("split_by_script", d.rules.split_by_script)?,
                split_digits: s.or("split_digits", d.rules.split_digits)?,
            },
            seed_size: s.or("seed_size", d.seed_size)?,
            shrinking_factor: s.or("shrinking_factor", d.shrinking_factor)?,
            sub_iterations: s.or("sub_iterations", d.sub_iterations)?,
            whitespace: d.whitespace,
        })
    }

    fn piece_at(&self, id: u32) -> PyResult<&unigram::Piece> {
        self.model.pieces().get(id as usize).ok_or_else(|| {
            to_py(Error::UnknownTokenId {
                id,
                vocab_size: self.model.pieces().len(),
            })
        })
    }
}

#[pymethods]
impl Unigram {
    /// Learns a model from a SentencePiece counter's words (which it
    /// empties), with the counter's whitespace handling.
    /// `settings`: the trainer's settings by name, as its Python keyword
    /// arguments (not the counter's); `"segmentation": "bpe"` trains a
    /// SentencePiece BPE model (with `min_frequency`) instead.
    #[staticmethod]
    #[pyo3(signature = (counter, settings, progress = None))]
    fn train(
        py: Python<'_>,
        counter: &PieceCounter,
        settings: &Bound<'_, PyDict>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let mut s = Settings::new(settings);
        let settings = Unigram::trainer_settings(&mut s, counter)?;
        let segmentation: String = s.or("segmentation", "unigram".to_owned())?;
        let min_frequency: u64 = s.or("min_frequency", 2)?;
        s.finish()?;
        let counts = std::mem::take(&mut *counter.lock());
        let model = match segmentation.as_str() {
            "unigram" => with_progress(py, progress, |p| unigram::train(counts, &settings, p))?,
            "bpe" => with_progress(py, progress, |p| {
                unigram::train_bpe(counts, &settings, min_frequency, p)
            })?,
            other => {
                return Err(PyValueError::new_err(format!(
                    "segmentation must be \"unigram\" or \"bpe\", not {other:?}"
                )))
            }
        };
        Unigram::new(py, model)
    }

    /// Learns a model parity-aware (`unigram/parity.rs`) from one
    /// SentencePiece counter per language, with their whitespace handling;
    /// `parity` and what it returns: see `train_parity` (`chosen`: the
    /// costliest language of each pruning round; `global_merges`: the first
    /// rounds with every language weighed alike).
    #[staticmethod]
    #[pyo3(signature = (counters, settings, parity, progress = None))]
    fn train_parity<'py>(
        py: Python<'py>,
        counters: Vec<PyRef<'_, PieceCounter>>,
        settings: &Bound<'_, PyDict>,
        parity: ParityArgs<'_>,
        progress: Option<Py<PyAny>>,
    ) -> PyResult<(Self, Bound<'py, PyDict>)> {
        let (model, record) = train_parity(
            py,
            &counters,
            parity,
            progress,
            |first| {
                let mut s = Settings::new(settings);
                let settings = Unigram::trainer_settings(&mut s, first)?;
                s.finish()?;
                Ok(settings)
            },
            unigram::parity::train,
        )?;
        Ok((Unigram::new(py, model)?, record))
    }

    #[staticmethod]
    fn from_sentencepiece(py: Python<'_>, data: &[u8], source: &str) -> PyResult<Self> {
        let model =
            guarded(py, true, || UnigramModel::from_sentencepiece(data, source))?.map_err(to_py)?;
        Unigram::new(py, model)
    }

    #[staticmethod]
    fn from_json(
        py: Python<'_>,
        json: &str,
        source: &str,
    ) -> PyResult<(Self, Option<String>, Option<String>)> {
        let (model, training, pipeline) = read_json(py, json, source, UnigramModel::from_json)?;
        Ok((Unigram::new(py, model)?, training, pipeline))
    }

    /// polytok JSON; `training` and `pipeline` are JSON objects recorded
    /// in the file.
    #[pyo3(signature = (training = None, pipeline = None))]
    fn to_json(&self, training: Option<&str>, pipeline: Option<&str>) -> PyResult<String> {
        Ok(self.model.to_json(
            parse_record(training, "training")?.as_ref(),
            parse_record(pipeline, "pipeline")?.as_ref(),
        ))
    }

    /// A SentencePiece `.model` file's bytes.
    fn to_sentencepiece<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(
            py,
            &self.model.to_sentencepiece().map_err(to_py)?,
        ))
    }

    fn score(&self, id: u32) -> PyResult<f32> {
        Ok(self.piece_at(id)?.score)
    }

    fn piece_id(&self, piece: &str) -> Option<u32> {
        self.model.piece_id(piece)
    }

    fn decode(&self, ids: Vec<u32>) -> PyResult<String> {
        self.model.decode(&ids).map_err(to_py)
    }

    /// The `k` best segmentations of a piece with their scores, best first.
    fn nbest(&self, py: Python<'_>, piece: &str, k: usize) -> PyResult<Vec<(Vec<u32>, f64)>> {
        guarded(py, true, || self.model.nbest(piece, k))?.map_err(to_py)
    }

    /// One segmentation of a piece drawn with probability proportional to
    /// exp(alpha × score).
    fn sample(&self, py: Python<'_>, piece: &str, alpha: f64, seed: u64) -> PyResult<Vec<u32>> {
        guarded(py, true, || self.model.sample(piece, alpha, seed))?.map_err(to_py)
    }

    fn piece(&self, id: u32) -> PyResult<String> {
        Ok(self.piece_at(id)?.text.clone())
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.model.pieces().len()
    }

    #[getter]
    fn byte_fallback(&self) -> bool {
        self.model.byte_fallback()
    }

    /// `"unigram"` or `"bpe"`: how the model segments text (SentencePiece's
    /// model type).
    #[getter]
    fn segmentation(&self) -> &'static str {
        match self.model.segmentation() {
            unigram::Segmentation::Unigram => "unigram",
            unigram::Segmentation::Bpe => "bpe",
        }
    }

    /// SentencePiece's whitespace settings: `remove_extra_whitespaces`,
    /// `add_dummy_prefix`, `escape_whitespaces`,
    /// `treat_whitespace_as_suffix`.
    #[getter]
    fn whitespace<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let ws = self.model.whitespace();
        let dict = PyDict::new(py);
        dict.set_item("remove_extra_whitespaces", ws.remove_extra)?;
        dict.set_item("add_dummy_prefix", ws.add_dummy_prefix)?;
        dict.set_item("escape_whitespaces", ws.escape)?;
        dict.set_item("treat_whitespace_as_suffix", ws.as_suffix)?;
        Ok(dict)
    }

    /// The name of the model's normalization rules (SentencePiece's
    /// `nmt_nfkc`, ...; empty when the file names none); `None` for the
    /// identity.
    #[getter]
    fn normalization(&self) -> Option<String> {
        self.model.normalization().map(|n| n.name.clone())
    }

    /// The unknown piece's id; `None` for a model without one (byte
    /// fallback covers every text).
    #[getter]
    fn unk_id(&self) -> Option<u32> {
        self.model.unk_id()
    }
}

/// The pieces of `text` under a pattern (preset name, regex or "none").
#[pyfunction]
fn pretokenize(text: &str, pattern: &str) -> PyResult<Vec<String>> {
    let pretokenizer = PreTokenizer::new(Pattern::parse(pattern).map_err(to_py)?).map_err(to_py)?;
    let pieces = pretokenizer.split(text).map_err(to_py)?;
    Ok(pieces.into_iter().map(str::to_owned).collect())
}

/// The regular expression of a preset (tiktoken's), or `None` for "none";
/// a user regex is returned as given.
#[pyfunction]
fn pattern_regex(pattern: &str) -> PyResult<Option<String>> {
    Ok(Pattern::parse(pattern)
        .map_err(to_py)?
        .regex()
        .map(str::to_owned))
}

/// The ISO 15924 code of the dominant script of each text (see
/// `text_stats.rs`).
#[pyfunction]
fn scripts(py: Python<'_>, texts: Vec<String>) -> PyResult<Vec<&'static str>> {
    guarded(py, true, || {
        texts
            .iter()
            .map(|t| text_stats::dominant_script(t))
            .collect()
    })
}

/// For each list of texts, its distinct words and their counts, in
/// first-seen order (see `text_stats.rs`); the lists on all cores.
#[pyfunction]
fn word_counts(py: Python<'_>, texts: Vec<Vec<String>>) -> PyResult<Vec<(Vec<String>, Vec<u64>)>> {
    use rayon::prelude::*;
    in_pool(py, || {
        texts
            .par_iter()
            .map(|texts| {
                text_stats::word_counts(texts.iter().map(String::as_str))
                    .into_iter()
                    .map(|(word, count)| (word.to_owned(), count))
                    .unzip()
            })
            .collect()
    })
}

/// `text` under the normalizer `spec_json` (`{"type": ..., ...}`), and for
/// each character of the result the `(start, end)` character offsets in
/// `text` that it stands for (empty for an inserted character).
#[pyfunction]
fn normalize(
    py: Python<'_>,
    spec_json: &str,
    text: &str,
) -> PyResult<(String, Vec<(usize, usize)>)> {
    let normalizer = crate::text::normalizers::Normalizer::from_json(spec_json).map_err(to_py)?;
    guarded(py, true, || normalizer.normalize_with_char_offsets(text))?.map_err(to_py)
}

/// The model of a polytok JSON file's text, or `None` (see
/// `model_file::model_of`).
#[pyfunction]
fn file_model(json: &str) -> Option<String> {
    crate::model_file::model_of(json)
}

/// The text of `tokens` (each token's bytes) through the decoder that
/// `spec_json` describes (see `decoders.rs`).
#[pyfunction]
fn decode_tokens(
    py: Python<'_>,
    spec_json: &str,
    tokens: Vec<Bound<'_, PyBytes>>,
) -> PyResult<String> {
    let decoder = Decoder::from_json(spec_json).map_err(to_py)?;
    let tokens: Vec<Vec<u8>> = tokens.iter().map(|t| t.as_bytes().to_vec()).collect();
    guarded(py, true, || decoder.decode(tokens))?.map_err(to_py)
}

/// How many tokens a decode stream waits for with the decoder `spec_json`
/// (`Decoder::stream_lookahead`).
#[pyfunction]
fn decoder_stream_lookahead(spec_json: &str) -> PyResult<usize> {
    Ok(Decoder::from_json(spec_json)
        .map_err(to_py)?
        .stream_lookahead())
}

impl From<Error> for PyErr {
    fn from(err: Error) -> Self {
        to_py(err)
    }
}

/// `decoders::DecodeStream`, with a Python callable (a list of ids to its
/// text) as the tokenizer's decode.
#[pyclass(module = "polytok._core", name = "DecodeStream")]
struct PyDecodeStream {
    stream: DecodeStream,
}

#[pymethods]
impl PyDecodeStream {
    #[new]
    #[pyo3(signature = (lookahead = 0))]
    fn new(lookahead: usize) -> Self {
        PyDecodeStream {
            stream: DecodeStream::with_lookahead(lookahead),
        }
    }

    #[getter]
    fn lookahead(&self) -> usize {
        self.stream.lookahead()
    }

    /// The text that `id` completes, if any.
    fn step(&mut self, id: u32, decode: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
        self.stream.step(id, |ids: &[u32]| {
            decode.call1((ids.to_vec(),))?.extract::<String>()
        })
    }

    /// The rest of the text; the stream starts afresh.
    fn flush(&mut self, decode: &Bound<'_, PyAny>) -> PyResult<String> {
        self.stream
            .flush(|ids: &[u32]| decode.call1((ids.to_vec(),))?.extract::<String>())
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PieceCounter>()?;
    m.add_class::<Bpe>()?;
    m.add_class::<WordPiece>()?;
    m.add_class::<Unigram>()?;
    pipeline::register(m)?;
    m.add_class::<PyDecodeStream>()?;
    m.add_function(wrap_pyfunction!(decode_tokens, m)?)?;
    m.add_function(wrap_pyfunction!(decoder_stream_lookahead, m)?)?;
    m.add_function(wrap_pyfunction!(pretokenize, m)?)?;
    m.add_function(wrap_pyfunction!(pattern_regex, m)?)?;
    m.add_function(wrap_pyfunction!(file_model, m)?)?;
    m.add_function(wrap_pyfunction!(normalize, m)?)?;
    m.add_function(wrap_pyfunction!(scripts, m)?)?;
    m.add_function(wrap_pyfunction!(word_counts, m)?)?;
    m.add("PolytokError", m.py().get_type::<PolytokError>())?;
    m.add("CorpusError", m.py().get_type::<CorpusError>())?;
    m.add(
        "TokenizerFileError",
        m.py().get_type::<TokenizerFileError>(),
    )?;
    Ok(())
}
