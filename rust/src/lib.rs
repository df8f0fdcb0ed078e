//! polytok: tokenizers with a Rust core.
//!
//! The pipeline of a byte-level BPE tokenizer, module by module:
//! - [`pretokenize`]: cut text into pieces (tiktoken's patterns, exactly);
//! - [`corpus`] and [`counting`]: read training text and count its pieces in
//!   parallel;
//! - [`bpe`]: the byte-level BPE model, its trainer and its encoder;
//! - [`unigram`]: the Unigram language model (SentencePiece's), its Viterbi
//!   encoder and `.model` files;
//! - [`wordpiece`]: BERT's model, its encoder (linear time) and files, with
//!   [`bert_text`]: BERT's normalization and word splitting;
//! - [`vocab`] and [`byte_alphabet`]: token ids, their bytes and printable
//!   names; [`trie`]: longest-prefix matching over tokens;
//! - [`batch`]: batch encoding on all cores, for every model.
//!
//! The Python bindings live in one place, `python.rs`, behind the `python`
//! feature; everything else is plain Rust and tested with `cargo test`.

pub mod batch;
pub mod bert_text;
pub mod bpe;
pub mod byte_alphabet;
pub mod corpus;
pub mod counting;
pub mod decoders;
pub mod encoding;
pub mod error;
pub mod model;
pub mod model_file;
mod pair_index;
pub mod presets;
pub mod pretokenize;
pub mod processors;
pub mod progress;
pub mod text;
pub mod text_stats;
pub mod tokenizer;
pub mod trie;
pub mod unigram;
pub mod vocab;
pub mod wordpiece;

#[cfg(feature = "python")]
mod python;

pub use error::{Error, Result};
