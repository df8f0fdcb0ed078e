//! File formats that hold a whole tokenizer (pipeline and model), as other
//! libraries write them: Hugging Face's `tokenizer.json`
//! ([`huggingface`]) and Mistral's Tekken ([`tekken`], read only). The
//! formats of one
//! model alone (tiktoken rank files, BERT vocabularies, SentencePiece
//! `.model` files, polytok JSON) sit beside their model (`bpe/files.rs`,
//! `wordpiece/files.rs`, `unigram/files.rs`).

pub mod huggingface;
pub mod tekken;
