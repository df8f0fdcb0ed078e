//! The PyO3 side of the pipeline: `_core.Pipeline` (a model with its text
//! handling and post-processing, built from the Python components' JSON)
//! and `_core.Encoding`.
//!
//! An `Encoding` made without offsets keeps its inputs; the first access to
//! offsets, word ids or characters encodes them again with tracking on.
//! Ids-only users pay nothing for offsets, and the result is the same as
//! computing them at once (the same pipeline, the same padding length).
//! A text (not a pair) through a pipeline without truncation or padding
//! goes further, alone or in a batch: only its ids are kept, as
//! `encode_ids` makes them, and the token records (type ids, masks) are
//! made from them when first read.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods};
use pyo3::exceptions::{PyIndexError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PySlice, PyString, PyTuple};
use rayon::prelude::*;

use super::{
    allowed_special_tokens, encode_batch_flat, encode_batch_lists, encode_list, guarded, in_pool,
    run_encoding, to_py, with_ids, with_utf8, Bpe, FlatArrays, GcPause, Ints, Texts, Unigram,
    WordPiece,
};
use crate::batch::StrRun;
use crate::encoding::{Encoding as RustEncoding, Token};
use crate::model::Model;
use crate::text::pre_tokenizers::PreTokenizer;
use crate::text::widths::FixedWidth;
use crate::text::{CharIndex, Normalized};
use crate::tokenizer::{PipelineSpec, Tokenizer};
use crate::vocab::AllowedSpecial;

/// A model with its normalizer, pre-tokenizer, special tokens,
/// post-processor, truncation and padding.
#[pyclass(module = "polytok._core", frozen)]
pub(super) struct Pipeline {
    tokenizer: Arc<Tokenizer>,
    /// The model's Python ints, for id lists.
    ints: Arc<Ints>,
}

/// The base class of `polytok.Tokenizer`: its calls on one text, in Rust,
/// so that a loop over short texts pays no Python frame per call (about
/// 100 ns, as much as encoding a short line). Policy stays in Python: the
/// Python class builds the pipeline (its `_pipeline` property) and keeps
/// it here, in `_pipeline_cache` (`None` after a setting changed).
#[pyclass(module = "polytok._core", subclass)]
pub(super) struct TokenizerBase {
    pipeline: Option<Py<Pipeline>>,
}

impl TokenizerBase {
    /// The pipeline, built by the Python class when there is none yet.
    fn pipeline<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, Pipeline>> {
        let py = slf.py();
        // (The borrow ends here: building the pipeline stores it.)
        let cached = slf.borrow().pipeline.as_ref().map(|p| p.clone_ref(py));
        match cached {
            Some(pipeline) => Ok(pipeline.into_bound(py)),
            None => Ok(slf.getattr(pyo3::intern!(py, "_pipeline"))?.cast_into()?),
        }
    }
}

/// `text`, or where it holds lone surrogates (not encodable as UTF-8) a
/// copy with U+FFFD in their place, as tiktoken does (by the Python rule
/// `without_surrogates`, which also joins a surrogate pair).
fn encodable<'py>(text: Bound<'py, PyString>) -> PyResult<Bound<'py, PyString>> {
    if text.to_str().is_ok() {
        return Ok(text);
    }
    static RULE: pyo3::sync::PyOnceLock<Py<PyAny>> = pyo3::sync::PyOnceLock::new();
    let py = text.py();
    let rule = RULE.get_or_try_init(py, || -> PyResult<_> {
        Ok(py
            .import("polytok._counting")?
            .getattr("without_surrogates")?
            .unbind())
    })?;
    Ok(rule.bind(py).call1((text,))?.cast_into()?)
}

#[pymethods]
impl TokenizerBase {
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> Self {
        TokenizerBase { pipeline: None }
    }

    #[getter(_pipeline_cache)]
    fn pipeline_cache(&self, py: Python<'_>) -> Option<Py<Pipeline>> {
        self.pipeline.as_ref().map(|p| p.clone_ref(py))
    }

    #[setter(_pipeline_cache)]
    fn set_pipeline_cache(&mut self, pipeline: Option<Py<Pipeline>>) {
        self.pipeline = pipeline;
    }

    /// The `Encoding` of `text` (and `pair`): ids, type ids, masks,
    /// offsets (character offsets into the texts given), word ids.
    ///
    /// `add_special_tokens`: apply the post-processor's template.
    /// `allowed_special`: the special tokens recognized in the text
    /// (`"all"` or a collection); others are ordinary text. Offsets, word
    /// ids and tokens are computed when first read. Lone surrogates (not
    /// encodable as UTF-8) are encoded as U+FFFD, as tiktoken does.
    #[pyo3(signature = (text, pair = None, *, add_special_tokens = true, allowed_special = None))]
    fn encode<'py>(
        slf: &Bound<'py, Self>,
        text: Bound<'py, PyString>,
        pair: Option<Bound<'py, PyString>>,
        add_special_tokens: bool,
        allowed_special: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, Encoding>> {
        let pipeline = Self::pipeline(slf)?;
        let pair = pair.map(encodable).transpose()?;
        pipeline.get().encode(
            slf.py(),
            text,
            pair,
            add_special_tokens,
            allowed_special,
            false,
        )
    }

    /// The ids of `text` alone, as a list: the fastest way to them (no
    /// offsets, no `Encoding`).
    #[pyo3(signature = (text, *, add_special_tokens = true, allowed_special = None))]
    fn encode_ids<'py>(
        slf: &Bound<'py, Self>,
        text: Bound<'py, PyString>,
        add_special_tokens: bool,
        allowed_special: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let pipeline = Self::pipeline(slf)?;
        with_utf8(&text, |text| {
            pipeline
                .get()
                .encode_ids(slf.py(), text, None, add_special_tokens, allowed_special)
        })?
    }
}

/// The inputs of an encoding made without offsets, to make them on demand.
struct Inputs {
    text: Py<PyString>,
    pair: Option<Py<PyString>>,
    add_special_tokens: bool,
    allowed: AllowedSpecial,
}

/// One encoded input (see `polytok.Encoding`).
#[pyclass(module = "polytok._core", frozen, sequence)]
pub(super) struct Encoding {
    /// `None` for an encoding unpickled without its tokenizer: it then has
    /// its offsets and tokens with it.
    tokenizer: Option<Arc<Tokenizer>>,
    /// The model's Python ints, for `ids` (`None` when unpickled).
    ints: Option<Arc<Ints>>,
    body: Body,
    inputs: Option<Inputs>,
    /// What is made on first use, boxed: most encodings never need it, and
    /// every call allocates, zeroes and moves the object whole (copying and
    /// zeroing it took 7% of `encode(line).ids` on a short line, 2% now).
    later: OnceLock<Box<Later>>,
}

#[derive(Default)]
struct Later {
    /// The records of a `Body::Ids`.
    records: OnceLock<RustEncoding>,
    /// With offsets (when `inputs` are kept).
    full: OnceLock<RustEncoding>,
    /// The tokens' texts.
    tokens: OnceLock<Vec<String>>,
    /// The token texts of the overflowing windows of an encoding unpickled
    /// without its tokenizer (empty otherwise).
    window_texts: Vec<TokenTexts>,
}

/// What an encoding holds from the start.
enum Body {
    /// The ids alone, of a text (not a pair) encoded by a pipeline that
    /// gives ids straight (`Tokenizer::ids_direct`: no truncation, no
    /// padding), the common call: its token records (type ids, masks) are
    /// made only when read. Making them at once, and moving them about,
    /// added a fifth to the encoding of a short line.
    Ids(Vec<u32>),
    /// Token records: without offsets when `inputs` are kept, with them
    /// otherwise.
    Records(RustEncoding),
}

/// The token texts of a window, and of its own windows.
#[derive(Clone)]
struct TokenTexts {
    tokens: Vec<String>,
    windows: Vec<TokenTexts>,
}

fn model_of(model: &Bound<'_, PyAny>) -> PyResult<(Model, Arc<Ints>)> {
    if let Ok(m) = model.cast::<Bpe>() {
        return Ok((Model::Bpe(m.get().model.clone()), m.get().ints.clone()));
    }
    if let Ok(m) = model.cast::<WordPiece>() {
        return Ok((
            Model::WordPiece(m.get().model.clone()),
            m.get().ints.clone(),
        ));
    }
    if let Ok(m) = model.cast::<Unigram>() {
        return Ok((Model::Unigram(m.get().model.clone()), m.get().ints.clone()));
    }
    Err(PyTypeError::new_err(format!(
        "the model must be a BPE, WordPiece or Unigram model, not {}",
        model.get_type().name()?
    )))
}

/// One input of a batch: a text, or a pair of texts.
type Input<'py> = (Bound<'py, PyString>, Option<Bound<'py, PyString>>);

/// A batch as NumPy arrays: ids, attention mask and type ids (`n` rows of
/// the batch's width each), and the tokens of each row.
type Arrays<'py> = (
    Bound<'py, PyArray2<u32>>,
    Bound<'py, PyArray2<u32>>,
    Bound<'py, PyArray2<u32>>,
    Bound<'py, PyArray1<u32>>,
);

/// A token as pickled: id, type id, special, sequence, offsets, word.
type TokenRecord = (u32, u32, bool, Option<u32>, (u32, u32), Option<u32>);

/// A batch's inputs: strings, or pairs of strings.
fn batch_inputs<'py>(inputs: &Bound<'py, PyList>) -> PyResult<Vec<Input<'py>>> {
    inputs
        .iter()
        .enumerate()
        .map(|(i, item)| {
            if let Ok(text) = item.cast::<PyString>() {
                return Ok((text.clone(), None));
            }
            if let Ok(pair) = item.cast::<PyTuple>() {
                if pair.len() == 2 {
                    if let (Ok(a), Ok(b)) = (
                        pair.get_item(0)?.cast_into::<PyString>(),
                        pair.get_item(1)?.cast_into::<PyString>(),
                    ) {
                        return Ok((a, Some(b)));
                    }
                }
            }
            Err(PyTypeError::new_err(format!(
                "texts[{i}] is {}, not str (each input is a str or a (str, str) pair)",
                item.get_type().name()?
            )))
        })
        .collect()
}

/// The texts of a batch's inputs.
fn input_texts<'a>(inputs: &'a [Input<'_>]) -> PyResult<Vec<(&'a str, Option<&'a str>)>> {
    inputs
        .iter()
        .map(|(a, b)| Ok((a.to_str()?, b.as_ref().map(|b| b.to_str()).transpose()?)))
        .collect()
}

#[pymethods]
impl Pipeline {
    /// `spec`: the pipeline's JSON (normalizer, pre_tokenizer,
    /// post_processor, special_tokens, truncation, padding).
    #[new]
    fn new(model: &Bound<'_, PyAny>, spec: &str) -> PyResult<Self> {
        let spec: PipelineSpec = serde_json::from_str(spec).map_err(|e| {
            pyo3::exceptions::PyValueError::new_err(format!("pipeline settings: {e}"))
        })?;
        let (model, ints) = model_of(model)?;
        let tokenizer = Tokenizer::new(model, &spec).map_err(to_py)?;
        Ok(Pipeline {
            tokenizer: Arc::new(tokenizer),
            ints,
        })
    }

    #[pyo3(signature = (text, pair = None, add_special_tokens = true, allowed_special = None, offsets = false))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        text: Bound<'py, PyString>,
        pair: Option<Bound<'py, PyString>>,
        add_special_tokens: bool,
        allowed_special: Option<&Bound<'_, PyAny>>,
        offsets: bool,
    ) -> PyResult<Bound<'py, Encoding>> {
        let allowed = allowed_special_tokens(allowed_special)?;
        let tokenizer = &*self.tokenizer;
        let (text, body) = if pair.is_none() && self.keeps_ids_only(offsets) {
            let encode = |t: &str, allowed: &AllowedSpecial, ids: &mut Vec<u32>| {
                tokenizer.encode_ids_into(t, add_special_tokens, allowed, ids)
            };
            // The text is kept as given (lone surrogates and all): offsets,
            // if asked for later, clean it then (`full`).
            let ids = with_utf8(&text, |a| {
                with_ids(py, a, &allowed, encode, <[u32]>::to_vec)
            })??;
            (text, Body::Ids(ids))
        } else {
            let text = encodable(text)?;
            let a = text.to_str()?;
            let b = pair.as_ref().map(|p| p.to_str()).transpose()?;
            let encoding = run_encoding(py, a.len() + b.map_or(0, str::len), || {
                tokenizer.encode(a, b, add_special_tokens, &allowed, offsets)
            })?
            .map_err(to_py)?;
            (text, Body::Records(encoding))
        };
        self.wrap(
            py,
            body,
            offsets,
            text.unbind(),
            pair.map(Bound::unbind),
            add_special_tokens,
            allowed,
        )
    }

    #[pyo3(signature = (inputs, add_special_tokens = true, allowed_special = None, offsets = false))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'py, PyList>,
        add_special_tokens: bool,
        allowed_special: Option<&Bound<'_, PyAny>>,
        offsets: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let allowed = allowed_special_tokens(allowed_special)?;
        let inputs = batch_inputs(inputs)?;
        let texts = input_texts(&inputs)?;
        let tokenizer = &*self.tokenizer;
        let bodies: Vec<Body> =
            if self.keeps_ids_only(offsets) && texts.iter().all(|(_, b)| b.is_none()) {
                // As `encode` does for one text: the ids alone.
                let singles: Vec<&str> = texts.iter().map(|&(a, _)| a).collect();
                let ids = in_pool(py, || {
                    crate::batch::encode_batch(&singles, |chunk, runs| {
                        tokenizer.encode_texts(chunk, add_special_tokens, &allowed, runs)
                    })
                })?
                .map_err(to_py)?;
                ids.into_iter().map(Body::Ids).collect()
            } else {
                in_pool(py, || {
                    tokenizer.encode_batch(&texts, add_special_tokens, &allowed, offsets)
                })?
                .map_err(to_py)?
                .into_iter()
                .map(Body::Records)
                .collect()
            };
        let encodings = bodies
            .into_iter()
            .zip(inputs)
            .map(|(body, (a, b))| {
                self.wrap(
                    py,
                    body,
                    offsets,
                    a.unbind(),
                    b.map(Bound::unbind),
                    add_special_tokens,
                    allowed.clone(),
                )
            })
            .collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, encodings)
    }

    /// The ids of `text` (and `pair`) alone, as a list.
    #[pyo3(signature = (text, pair = None, add_special_tokens = true, allowed_special = None))]
    fn encode_ids<'py>(
        &self,
        py: Python<'py>,
        text: &str,
        pair: Option<&str>,
        add_special_tokens: bool,
        allowed_special: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let tokenizer = &*self.tokenizer;
        if pair.is_none() && tokenizer.ids_direct() {
            return encode_list(py, &self.ints, text, allowed_special, |t, allowed, ids| {
                tokenizer.encode_ids_into(t, add_special_tokens, allowed, ids)
            });
        }
        let allowed = allowed_special_tokens(allowed_special)?;
        let encoding = run_encoding(py, text.len() + pair.map_or(0, str::len), || {
            tokenizer.encode(text, pair, add_special_tokens, &allowed, false)
        })?
        .map_err(to_py)?;
        self.ints.list(py, &encoding.padded_ids())
    }

    /// The ids of many texts, as lists, encoded on all cores (lone
    /// surrogates read as U+FFFD).
    #[pyo3(signature = (texts, add_special_tokens = true, allowed_special = None))]
    fn encode_batch_ids<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyList>,
        add_special_tokens: bool,
        allowed_special: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let tokenizer = &*self.tokenizer;
        if tokenizer.ids_direct() {
            return encode_batch_lists(
                py,
                &self.ints,
                texts,
                allowed_special,
                |chunk, allowed, runs| {
                    tokenizer.encode_texts(chunk, add_special_tokens, allowed, runs)
                },
            );
        }
        let allowed = allowed_special_tokens(allowed_special)?;
        let texts = Texts::of(texts)?;
        let texts = texts.texts();
        let encodings = in_pool(py, || {
            // Padded together, so encoded together: the UTF-8 of every text
            // at once.
            FixedWidth::with_strs(texts, |texts| {
                let inputs: Vec<_> = texts.iter().map(|&t| (t, None)).collect();
                tokenizer.encode_batch(&inputs, add_special_tokens, &allowed, false)
            })
        })?
        .map_err(to_py)?;
        let _paused = GcPause::new(py)?;
        PyList::new(
            py,
            encodings
                .iter()
                .map(|e| self.ints.list(py, &e.padded_ids()))
                .collect::<PyResult<Vec<_>>>()?,
        )
    }

    /// A batch as arrays for NumPy: `(ids, attention_mask, type_ids,
    /// lengths, width)`, the first four native-endian `u32` bytes, the
    /// first three `len(inputs) x width` row-major with padding (`pad_id`,
    /// 0, 0) where the pipeline does not pad, `lengths` the tokens of each
    /// row.
    #[pyo3(signature = (inputs, pad_id, add_special_tokens = true, allowed_special = None))]
    fn encode_batch_arrays<'py>(
        &self,
        py: Python<'py>,
        inputs: &Bound<'_, PyList>,
        pad_id: u32,
        add_special_tokens: bool,
        allowed_special: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Arrays<'py>> {
        let allowed = allowed_special_tokens(allowed_special)?;
        let inputs = batch_inputs(inputs)?;
        let texts = input_texts(&inputs)?;
        let arrays = in_pool(py, || -> Result<_, crate::error::Error> {
            let encodings =
                self.tokenizer
                    .encode_batch(&texts, add_special_tokens, &allowed, false)?;
            let width = encodings.iter().map(RustEncoding::len).max().unwrap_or(0);
            // Row by row, on all cores: the padding before the tokens (left
            // padding), the tokens, then padding to the width; no padded
            // list is made. (A batch padded to its longest is mostly
            // padding: writing it is much of the work.)
            let matrix = |field: &(dyn Fn(&Token) -> u32 + Sync),
                          pad: &(dyn Fn(&RustEncoding) -> u32 + Sync)| {
                let mut matrix = vec![0u32; encodings.len() * width];
                matrix
                    .par_chunks_exact_mut(width.max(1))
                    .zip(&encodings)
                    .for_each(|(row, e)| {
                        let fill = pad(e);
                        let (before, rest) = row.split_at_mut(e.first_token());
                        let (tokens, after) = rest.split_at_mut(e.tokens.len());
                        before.fill(fill);
                        after.fill(fill);
                        for (value, token) in tokens.iter_mut().zip(&e.tokens) {
                            *value = field(token);
                        }
                    });
                matrix
            };
            let lengths: Vec<u32> = encodings.iter().map(|e| e.len() as u32).collect();
            Ok((
                matrix(&|t| t.id, &|e| {
                    if e.pad.count > 0 {
                        e.pad.id
                    } else {
                        pad_id
                    }
                }),
                matrix(&|_| 1, &|_| 0),
                matrix(&|t| t.type_id, &|e| e.pad.type_id),
                lengths,
                width,
            ))
        })?
        .map_err(to_py)?;
        let (ids, mask, types, lengths, width) = arrays;
        // The arrays take the vectors over: no copy under the GIL.
        let shaped = |matrix: Vec<u32>| matrix.into_pyarray(py).reshape([lengths.len(), width]);
        Ok((
            shaped(ids)?,
            shaped(mask)?,
            shaped(types)?,
            lengths.into_pyarray(py),
        ))
    }

    /// The number of ids: the model's, and added tokens' past them.
    #[getter]
    fn vocab_size(&self) -> usize {
        self.tokenizer.vocab_size()
    }

    /// A token's text (bytes that are not UTF-8 shown as `<0xNN>`).
    fn id_to_token(&self, id: u32) -> PyResult<String> {
        Ok(readable(&self.tokenizer.token(id).map_err(to_py)?))
    }

    /// The id of a token given by its text: an added or special token of
    /// the pipeline, or of the model's vocabulary.
    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.tokenizer.token_id(token)
    }

    /// The text of `ids` (see `Tokenizer::decode`).
    #[pyo3(signature = (ids, skip_special_tokens = false))]
    fn decode(&self, py: Python<'_>, ids: Vec<u32>, skip_special_tokens: bool) -> PyResult<String> {
        guarded(py, ids.len() > 1 << 14, || {
            self.tokenizer.decode(&ids, skip_special_tokens)
        })?
        .map_err(to_py)
    }

    /// Every id of a batch and where each text's start, as NumPy arrays
    /// (see `encode_batch_flat` in `python.rs`): the tokens of each whole
    /// text, with the template when `add_special_tokens`, never truncated
    /// nor padded (lone surrogates read as U+FFFD).
    #[pyo3(signature = (texts, add_special_tokens = true, allowed_special = None))]
    fn encode_batch_flat<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'_, PyList>,
        add_special_tokens: bool,
        allowed_special: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<FlatArrays<'py>> {
        let allowed = allowed_special_tokens(allowed_special)?;
        encode_batch_flat(py, texts, |chunk, runs| {
            self.tokenizer
                .encode_texts(chunk, add_special_tokens, &allowed, runs)
        })
    }

    /// The pieces the model gets for `text`: normalized and pre-tokenized,
    /// as text (no special tokens are looked for).
    fn pieces(&self, text: &str) -> PyResult<Vec<String>> {
        self.tokenizer.pieces_of(text).map_err(to_py)
    }

    /// `ids` without the special tokens of the pipeline and its template.
    fn without_special(&self, ids: Vec<u32>) -> Vec<u32> {
        ids.into_iter()
            .filter(|&id| !self.tokenizer.is_special(id))
            .collect()
    }
}

impl Pipeline {
    /// Whether an encoding of single texts keeps only their ids (`Body::Ids`)
    /// and makes its token records when read: when no offsets are asked
    /// for and the pipeline gives ids straight (no truncation, no padding).
    fn keeps_ids_only(&self, offsets: bool) -> bool {
        !offsets && self.tokenizer.ids_direct()
    }

    /// An encoding of this pipeline's, as a Python object (`untracked`).
    #[allow(clippy::too_many_arguments)]
    fn wrap<'py>(
        &self,
        py: Python<'py>,
        body: Body,
        has_offsets: bool,
        text: Py<PyString>,
        pair: Option<Py<PyString>>,
        add_special_tokens: bool,
        allowed: AllowedSpecial,
    ) -> PyResult<Bound<'py, Encoding>> {
        let inputs = (!has_offsets).then_some(Inputs {
            text,
            pair,
            add_special_tokens,
            allowed,
        });
        Encoding::new(
            Some(self.tokenizer.clone()),
            Some(self.ints.clone()),
            body,
            inputs,
        )
        .untracked(py)
    }
}

impl Encoding {
    /// The encoding as a Python object that the cyclic collector does not
    /// track. An encoding refers to no Python object but its texts
    /// (strings) and the model's ints, so it can be in no cycle; tracked
    /// (PyO3 makes every class a collected one), a batch of 200,000 took
    /// twice as long to make, and each later collection went through all
    /// of them.
    fn untracked(self, py: Python<'_>) -> PyResult<Bound<'_, Encoding>> {
        let encoding = Bound::new(py, self)?;
        // SAFETY: a live object of a collected type; untracking one that
        // can be in no cycle only spares the collector (its deallocation
        // untracks only what is tracked).
        unsafe { pyo3::ffi::PyObject_GC_UnTrack(encoding.as_ptr().cast()) };
        Ok(encoding)
    }

    fn new(
        tokenizer: Option<Arc<Tokenizer>>,
        ints: Option<Arc<Ints>>,
        body: Body,
        inputs: Option<Inputs>,
    ) -> Self {
        Encoding {
            tokenizer,
            ints,
            body,
            inputs,
            later: OnceLock::new(),
        }
    }

    /// The encoding with its token texts (and its windows') given, for one
    /// without its tokenizer.
    fn with_texts(self, texts: TokenTexts) -> Self {
        let later = Later {
            tokens: OnceLock::from(texts.tokens),
            window_texts: texts.windows,
            ..Later::default()
        };
        Encoding {
            later: OnceLock::from(Box::new(later)),
            ..self
        }
    }

    fn later(&self) -> &Later {
        self.later.get_or_init(Box::default)
    }

    /// The number of tokens, padding included.
    fn len(&self) -> usize {
        match &self.body {
            Body::Ids(ids) => ids.len(),
            Body::Records(e) => e.len(),
        }
    }

    /// The ids, padding included.
    fn padded_ids(&self) -> Cow<'_, [u32]> {
        match &self.body {
            Body::Ids(ids) => Cow::Borrowed(ids),
            Body::Records(e) => Cow::Owned(e.padded_ids()),
        }
    }

    /// The token records (without offsets when `inputs` are kept).
    fn records(&self) -> PyResult<&RustEncoding> {
        let ids = match &self.body {
            Body::Records(e) => return Ok(e),
            Body::Ids(ids) => ids,
        };
        if let Some(records) = self.later().records.get() {
            return Ok(records);
        }
        let (Some(tokenizer), Some(inputs)) = (&self.tokenizer, &self.inputs) else {
            unreachable!("an encoding of ids has its tokenizer and inputs");
        };
        let records = tokenizer
            .encoding_of_ids(ids, inputs.add_special_tokens)
            .map_err(to_py)?;
        Ok(self.later().records.get_or_init(|| records))
    }

    /// The encoding with offsets, computed on first use.
    fn full(&self, py: Python<'_>) -> PyResult<&RustEncoding> {
        let Some(inputs) = &self.inputs else {
            // Made with offsets.
            return self.records();
        };
        if let Some(full) = self.later().full.get() {
            return Ok(full);
        }
        let text = encodable(inputs.text.bind(py).clone())?;
        let a = text.to_str()?;
        let pair = inputs.pair.as_ref().map(|p| p.bind(py));
        let b = pair.map(|p| p.to_str()).transpose()?;
        let tokenizer = self
            .tokenizer
            .as_ref()
            .expect("an encoding with inputs has its tokenizer");
        let mut full = tokenizer
            .encode(a, b, inputs.add_special_tokens, &inputs.allowed, true)
            .map_err(to_py)?;
        // Padded as the batch it came from was.
        if let Some(p) = tokenizer.padding() {
            p.apply(&mut full, self.len());
        }
        if *full.padded_ids() != *self.padded_ids() {
            // The ids-only and the offsets paths disagree: offsets would
            // belong to other tokens. A bug, never an answer.
            return Err(pyo3::exceptions::PyRuntimeError::new_err(
                "polytok internal error (the ids with offsets differ from the ids); please report it",
            ));
        }
        Ok(self.later().full.get_or_init(|| full))
    }

    /// Overflowing window `i` of `full`, as an encoding of its own.
    fn window(&self, full: &RustEncoding, i: usize) -> Encoding {
        let window = Encoding::new(
            self.tokenizer.clone(),
            self.ints.clone(),
            Body::Records(full.overflowing[i].clone()),
            None,
        );
        match self.later().window_texts.get(i) {
            Some(texts) => window.with_texts(texts.clone()),
            None => window,
        }
    }

    fn token_texts(&self) -> PyResult<&Vec<String>> {
        if let Some(tokens) = self.later().tokens.get() {
            return Ok(tokens);
        }
        let tokenizer = self
            .tokenizer
            .as_ref()
            .expect("a detached encoding has its tokens");
        let tokens = self
            .padded_ids()
            .iter()
            .map(|&id| Ok(readable(&tokenizer.token(id).map_err(to_py)?)))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(self.later().tokens.get_or_init(|| tokens))
    }

    /// Everything, for pickling: offsets and tokens included.
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let full = self.full(py)?;
        let state = PyDict::new(py);
        let records: Vec<TokenRecord> = full
            .tokens
            .iter()
            .map(|t| {
                (
                    t.id,
                    t.type_id,
                    t.special,
                    t.sequence(),
                    t.offsets,
                    t.word(),
                )
            })
            .collect();
        state.set_item("tokens_state", records)?;
        let pad = full.pad;
        state.set_item("pad", (pad.count, pad.left, pad.id, pad.type_id))?;
        state.set_item("tokens", self.token_texts()?)?;
        let overflowing = (0..full.overflowing.len())
            .map(|i| self.window(full, i).state(py))
            .collect::<PyResult<Vec<_>>>()?;
        state.set_item("overflowing", overflowing)?;
        Ok(state)
    }

    fn from_state(state: &Bound<'_, PyDict>) -> PyResult<Encoding> {
        fn item<T: for<'a, 'py> pyo3::FromPyObject<'a, 'py>>(
            state: &Bound<'_, PyDict>,
            key: &str,
        ) -> PyResult<T> {
            let value = state.get_item(key)?.ok_or_else(|| {
                pyo3::exceptions::PyValueError::new_err(format!("encoding state without {key:?}"))
            })?;
            value.extract().map_err(Into::into)
        }
        let overflowing = state.get_item("overflowing")?.ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err("encoding state without \"overflowing\"")
        })?;
        let records: Vec<TokenRecord> = item(state, "tokens_state")?;
        let mut encoding = RustEncoding {
            tokens: records
                .into_iter()
                .map(|(id, type_id, special, sequence, offsets, word)| {
                    Token::new(id, type_id, special, sequence, offsets, word)
                })
                .collect(),
            overflowing: Vec::new(),
            pad: {
                let (count, left, id, type_id) = item(state, "pad")?;
                crate::encoding::Pad {
                    count,
                    left,
                    id,
                    type_id,
                }
            },
        };
        let mut window_texts = Vec::new();
        for o in overflowing.try_iter()? {
            let window = Encoding::from_state(o?.cast::<PyDict>()?)?;
            let later = window
                .later
                .into_inner()
                .expect("a restored encoding has its texts");
            window_texts.push(TokenTexts {
                tokens: later
                    .tokens
                    .into_inner()
                    .expect("a restored encoding has its tokens"),
                windows: later.window_texts,
            });
            let Body::Records(window) = window.body else {
                unreachable!("a restored encoding has its records");
            };
            encoding.overflowing.push(window);
        }
        let tokens: Vec<String> = item(state, "tokens")?;
        if tokens.len() != encoding.len() {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "encoding state: its lists differ in length",
            ));
        }
        Ok(
            Encoding::new(None, None, Body::Records(encoding), None).with_texts(TokenTexts {
                tokens,
                windows: window_texts,
            }),
        )
    }
}

#[pymethods]
impl Encoding {
    #[getter]
    fn ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let ids = self.padded_ids();
        match &self.ints {
            Some(ints) => ints.list(py, &ids),
            None => PyList::new(py, &*ids),
        }
    }

    #[getter]
    fn type_ids(&self) -> PyResult<Vec<u32>> {
        Ok(self.records()?.padded_type_ids())
    }

    #[getter]
    fn attention_mask(&self) -> PyResult<Vec<u32>> {
        Ok(self.records()?.padded_attention_mask())
    }

    #[getter]
    fn special_tokens_mask(&self) -> PyResult<Vec<u32>> {
        Ok(self.records()?.padded_special_tokens_mask())
    }

    #[getter]
    fn sequence_ids(&self) -> PyResult<Vec<Option<u32>>> {
        Ok(self.records()?.padded_sequence_ids())
    }

    /// Character `(start, end)` of each token in its own text.
    #[getter]
    fn offsets(&self, py: Python<'_>) -> PyResult<Vec<(u32, u32)>> {
        Ok(self.full(py)?.padded_offsets())
    }

    #[getter]
    fn word_ids(&self, py: Python<'_>) -> PyResult<Vec<Option<u32>>> {
        Ok(self.full(py)?.padded_word_ids())
    }

    /// Each token's text, as the model has it.
    #[getter]
    fn tokens(&self) -> PyResult<Vec<String>> {
        Ok(self.token_texts()?.clone())
    }

    #[getter]
    fn overflowing<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, Encoding>>> {
        let full = self.full(py)?;
        (0..full.overflowing.len())
            .map(|i| self.window(full, i).untracked(py))
            .collect()
    }

    /// The index of the token holding character `char` of input
    /// `sequence_index`, or `None`.
    #[pyo3(signature = (char, sequence_index = 0))]
    fn char_to_token(
        &self,
        py: Python<'_>,
        char: u32,
        sequence_index: u32,
    ) -> PyResult<Option<usize>> {
        Ok(self.full(py)?.char_to_token(char, sequence_index))
    }

    /// The character span of token `index` in its input, or `None` for
    /// added tokens.
    fn token_to_chars(&self, py: Python<'_>, index: usize) -> PyResult<Option<(u32, u32)>> {
        if index >= self.len() {
            return Err(PyIndexError::new_err(format!(
                "token index {index} out of range (the encoding has {} tokens)",
                self.len()
            )));
        }
        Ok(self.full(py)?.token_to_chars(index).map(|(_, span)| span))
    }

    fn __len__(&self) -> usize {
        self.len()
    }

    /// An id, or a list of ids for a slice.
    fn __getitem__<'py>(
        &self,
        py: Python<'py>,
        index: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if let Ok(slice) = index.cast::<PySlice>() {
            let ids = PyList::new(py, &*self.padded_ids())?;
            return ids.as_any().get_item(slice);
        }
        let n = self.len() as isize;
        let index: isize = index.extract()?;
        let i = if index < 0 { index + n } else { index };
        if !(0..n).contains(&i) {
            return Err(PyIndexError::new_err("encoding index out of range"));
        }
        let id = match &self.body {
            Body::Ids(ids) => ids[i as usize],
            Body::Records(e) => e.id_at(i as usize),
        };
        Ok(id.into_pyobject(py)?.into_any())
    }

    /// Its ids, one after another.
    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        PyList::new(py, &*self.padded_ids())?
            .try_iter()
            .map(|it| it.into_any())
    }

    /// Pickles with everything (offsets and tokens computed first); the
    /// copy does not need the tokenizer.
    fn __reduce__<'py>(
        slf: &Bound<'py, Self>,
    ) -> PyResult<(Bound<'py, PyAny>, (Bound<'py, PyDict>,))> {
        let restore = slf.get_type().getattr("_restore")?;
        Ok((restore, (slf.get().state(slf.py())?,)))
    }

    #[staticmethod]
    fn _restore<'py>(state: &Bound<'py, PyDict>) -> PyResult<Bound<'py, Encoding>> {
        Encoding::from_state(state)?.untracked(state.py())
    }

    /// Equal to another encoding or a sequence of ids with the same ids.
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> PyResult<bool> {
        if let Ok(other) = other.cast::<Encoding>() {
            return Ok(other.get().padded_ids() == self.padded_ids());
        }
        Ok(other
            .extract::<Vec<u32>>()
            .is_ok_and(|ids| *ids == *self.padded_ids()))
    }

    fn __repr__(&self) -> String {
        let ids = self.padded_ids();
        format!(
            "Encoding(n_tokens={}, ids={:?}{})",
            ids.len(),
            &ids[..ids.len().min(8)],
            if ids.len() > 8 { "..." } else { "" }
        )
    }
}

/// Token bytes as text, with bytes that do not decode shown as `<0xNN>`.
#[pyfunction]
fn readable(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for b in chunk.invalid() {
            out.push_str(&format!("<0x{b:02X}>"));
        }
    }
    out
}

/// The pieces of `text` under the pre-tokenizer `spec` (JSON), each with
/// its character span in `text`.
#[pyfunction]
fn pre_tokenize(spec: &str, text: &str) -> PyResult<Vec<(String, (u32, u32))>> {
    let pre_tokenizer = PreTokenizer::from_json(spec).map_err(to_py)?;
    let mut normalized = Normalized::new(text, true);
    let mut pieces: Vec<_> = (!text.is_empty())
        .then_some(0..text.len())
        .into_iter()
        .collect();
    pre_tokenizer
        .pre_tokenize(&mut normalized, &mut pieces, true)
        .map_err(to_py)?;
    let chars = CharIndex::new(text);
    Ok(pieces
        .into_iter()
        .map(|r| {
            let (start, end) = normalized.original_span(r.clone());
            (normalized.as_str()[r].to_owned(), chars.span(start, end))
        })
        .collect())
}

/// The pipeline of a model's preset (see `presets.rs`), as JSON.
#[pyfunction]
fn preset_pipeline(model: &Bound<'_, PyAny>) -> PyResult<String> {
    let (model, _) = model_of(model)?;
    Ok(serde_json::to_string(&crate::presets::preset_spec(&model)).expect("specs serialize"))
}

/// `model` with the pipeline `spec_json` as Hugging Face's
/// `tokenizer.json` text (see `formats/huggingface.rs`).
#[pyfunction]
fn to_tokenizer_json(
    py: Python<'_>,
    model: &Bound<'_, PyAny>,
    spec_json: &str,
) -> PyResult<String> {
    let (model, _) = model_of(model)?;
    let spec: PipelineSpec = serde_json::from_str(spec_json)
        .map_err(|e| PyTypeError::new_err(format!("pipeline: {e}")))?;
    guarded(py, true, || {
        crate::formats::huggingface::export(&model, &spec)
    })?
    .map_err(to_py)
}

/// The model and the pipeline (JSON) of a `tokenizer.json` text; errors
/// name `source`.
#[pyfunction]
fn from_tokenizer_json(py: Python<'_>, text: &str, source: &str) -> PyResult<(Py<PyAny>, String)> {
    let read = guarded(py, true, || {
        crate::formats::huggingface::import(text.as_bytes(), source)
    })?;
    model_and_spec(py, read.map_err(to_py)?)
}

/// As `from_tokenizer_json`, reading the file itself (no Python string of
/// megabytes in between).
#[pyfunction]
fn read_tokenizer_json(py: Python<'_>, path: std::path::PathBuf) -> PyResult<(Py<PyAny>, String)> {
    let source = path.display().to_string();
    let read = guarded(py, true, || {
        let bytes = std::fs::read(&path).map_err(|e| crate::error::Error::io(&path, e))?;
        crate::formats::huggingface::import(&bytes, &source)
    })?;
    model_and_spec(py, read.map_err(to_py)?)
}

/// The model and the pipeline (JSON) of a Tekken file's text; errors name
/// `source`.
#[pyfunction]
fn from_tekken_json(py: Python<'_>, text: &str, source: &str) -> PyResult<(Py<PyAny>, String)> {
    let read = guarded(py, true, || crate::formats::tekken::import(text, source))?;
    model_and_spec(py, read.map_err(to_py)?)
}

/// A model read from a file as its Python object, with its pipeline's JSON.
fn model_and_spec(
    py: Python<'_>,
    (model, spec): (Model, PipelineSpec),
) -> PyResult<(Py<PyAny>, String)> {
    let spec = serde_json::to_string(&spec).expect("specs serialize");
    let model = match model {
        Model::Bpe(m) => Py::new(py, Bpe::new(py, m)?)?.into_any(),
        Model::WordPiece(m) => Py::new(py, WordPiece::new(py, m)?)?.into_any(),
        Model::Unigram(m) => Py::new(py, Unigram::new(py, m)?)?.into_any(),
    };
    Ok((model, spec))
}

pub(super) fn register(m: &Bound<'_, pyo3::types::PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(to_tokenizer_json, m)?)?;
    m.add_function(wrap_pyfunction!(from_tokenizer_json, m)?)?;
    m.add_function(wrap_pyfunction!(read_tokenizer_json, m)?)?;
    m.add_function(wrap_pyfunction!(from_tekken_json, m)?)?;
    m.add_function(wrap_pyfunction!(preset_pipeline, m)?)?;
    m.add_function(wrap_pyfunction!(pre_tokenize, m)?)?;
    m.add_function(wrap_pyfunction!(readable, m)?)?;
    m.add_class::<Pipeline>()?;
    m.add_class::<TokenizerBase>()?;
    m.add_class::<Encoding>()?;
    Ok(())
}
