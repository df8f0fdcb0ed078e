//! polytok: tokenizers with a Rust core.
//!
//! The road from text to model input and back, module by module:
//! - [`text`]: the text layer: [`text::normalizers`] (with the map back to
//!   the caller's text), [`text::pre_tokenizers`] (cutting normalized text
//!   into pieces), [`text::pattern`] (tiktoken's patterns, exactly),
//!   [`text::bert`] (BERT's normalization and word splitting),
//!   [`text::sentencepiece`] (SentencePiece's whitespace rules, for
//!   training);
//! - [`model`]: the three models behind one interface; each encodes pieces
//!   and knows nothing of text: [`bpe`] (byte-level BPE), [`wordpiece`]
//!   (BERT's, linear time), [`unigram`] (SentencePiece's models: Unigram,
//!   and BPE by piece scores or, from a tokenizer.json, by pair ranks, in
//!   `unigram/merges.rs`), each with its trainer, encoder and files side
//!   by side (SentencePiece BPE trains with `bpe`'s merge loop);
//! - [`tokenizer`]: the pipeline (special tokens, normalizer,
//!   pre-tokenizer, model, post-processor), [`processors`] (templates,
//!   truncation, padding), [`encoding`] (the result), [`decoders`] (back to
//!   text), [`presets`] (each model with the steps it was trained with);
//! - [`formats`]: whole tokenizers in other libraries' files (Hugging
//!   Face's `tokenizer.json`); each model's own files sit beside it;
//! - [`corpus`] and [`counting`]: read training text and count its pieces
//!   in parallel;
//! - [`vocab`] and [`byte_alphabet`]: token ids, their bytes and printable
//!   names; [`trie`]: longest-prefix matching over tokens;
//! - [`batch`]: batch encoding on all cores.
//!
//! The Python bindings live in `python.rs` and `python/`, behind the
//! `python` feature; everything else is plain Rust and tested with
//! `cargo test`.

/// mimalloc rather than the system's malloc: counting and training hold
/// millions of small pieces (a `Vec<u8>` each), and glibc's malloc and free
/// took over half the time of building and dropping such a table. Built
/// with `no_thp`: on 4 KB pages, while the encoder's big tables get huge
/// pages of their own (`huge_pages.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod added_tokens;
pub mod batch;
pub mod bpe;
pub mod byte_alphabet;
pub mod corpus;
pub mod counting;
pub mod decoders;
pub mod encoding;
pub mod error;
pub mod formats;
mod huge_pages;
pub mod model;
pub mod model_file;
mod pair_index;
pub mod parity;
mod prefetch;
pub mod presets;
pub mod processors;
pub mod progress;
mod serde_defaults;
pub mod text;
pub mod text_stats;
pub mod tokenizer;
pub mod trie;
pub mod unigram;
pub mod vocab;
pub mod wordpiece;

#[cfg(test)]
mod test_rng;

#[cfg(feature = "python")]
mod python;

pub use error::{Error, Result};
