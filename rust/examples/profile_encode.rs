//! Encoding throughput of the Rust core alone (no Python), for profiling:
//! `profile_encode RANKS.tiktoken TEXT_FILE MEGABYTES [RUNS] [first|lines|pieces[:PATTERN]|merges]`
//! (`first`: the piece caches cleared before each run, so that every run
//! is a first pass, with the memory of the run before: a fresh process
//! also times the page faults of its tables, which on a virtual machine
//! swing from run to run;
//! `lines`: a batch of the lines instead of one call; `pieces`: the
//! pre-tokenizer alone, counting pieces, with cl100k's pattern or the
//! preset named: `pieces:o200k`; `merges`: the text's distinct pieces of
//! up to 16 bytes that are not tokens, encoded one after the other: the
//! first run merges each and keeps it in the thread's piece cache, as a
//! first pass does, later runs find them there), through the preset
//! pipeline.
use std::sync::Arc;
use std::time::Instant;

use polytok::batch;
use polytok::bpe::BpeModel;
use polytok::model::Model;
use polytok::presets::preset_spec;
use polytok::text::pattern::{Pattern, PreTokenizer};
use polytok::tokenizer::Tokenizer;
use polytok::vocab::AllowedSpecial;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ranks = std::fs::read_to_string(&args[1]).unwrap();
    let text = std::fs::read_to_string(&args[2]).unwrap();
    let mut end = (args[3].parse::<f64>().unwrap() * 1e6) as usize;
    end = end.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    // The megabyte after the timed text warms the tables up untimed, so
    // that the first run is a first pass over unseen text, not a cold start.
    let mut warm_end = (end + 1_000_000).min(text.len());
    while !text.is_char_boundary(warm_end) {
        warm_end -= 1;
    }
    let (text, warm_up) = (&text[..end], &text[end..warm_end]);
    let runs: usize = args.get(4).map_or(3, |r| r.parse().unwrap());
    let bpe = Arc::new(BpeModel::from_tiktoken(&ranks, "ranks", Pattern::Cl100k, vec![]).unwrap());
    let model = Model::Bpe(bpe.clone());
    let tokenizer = Tokenizer::new(model.clone(), &preset_spec(&model)).unwrap();
    let none = AllowedSpecial::None;
    let mode = args.get(5).map_or("", String::as_str);
    let (mode, pattern) = mode.split_once(':').unwrap_or((mode, "cl100k"));
    let pre_tokenizer = PreTokenizer::new(Pattern::parse(pattern).unwrap()).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    // `merges`: the distinct short pieces that are not tokens, in the order
    // first seen, one after the other in `merged_text`.
    let (mut merged_text, mut merged_pieces) = (String::new(), Vec::new());
    if mode == "merges" {
        let mut seen = std::collections::HashSet::new();
        pre_tokenizer
            .for_each_piece(text, |piece| {
                if piece.len() <= 16
                    && bpe.vocab().id(piece.as_bytes()).is_none()
                    && seen.insert(piece)
                {
                    merged_pieces.push(merged_text.len()..merged_text.len() + piece.len());
                    merged_text.push_str(piece);
                }
            })
            .unwrap();
    }
    // Reused, as the Python layer reuses its buffer: a fresh one would time
    // page faults.
    let mut ids = Vec::new();
    tokenizer
        .encode_ids_into(warm_up, false, &none, &mut ids)
        .unwrap();
    ids.reserve(text.len() / 2);
    for _ in 0..runs {
        if mode == "first" {
            bpe.clear_cache();
        }
        let start = Instant::now();
        let count: usize = if mode == "merges" {
            ids.clear();
            bpe.encode_pieces(&merged_text, &merged_pieces, &mut ids, None);
            merged_pieces.len()
        } else if mode == "pieces" {
            let mut n_pieces = 0;
            pre_tokenizer
                .for_each_piece(text, |_| n_pieces += 1)
                .unwrap();
            n_pieces
        } else if mode == "lines" {
            let batch = batch::encode_batch(&lines, |chunk, runs| {
                tokenizer.encode_texts(chunk, false, &none, runs)
            })
            .unwrap();
            batch.iter().map(Vec::len).sum()
        } else {
            ids.clear();
            tokenizer
                .encode_ids_into(text, false, &none, &mut ids)
                .unwrap();
            ids.len()
        };
        let seconds = start.elapsed().as_secs_f64();
        if mode == "merges" {
            println!(
                "{:.1} ns a piece ({count} pieces merged)",
                seconds * 1e9 / count as f64
            );
            continue;
        }
        println!(
            "{:.1} MB/s ({count} {})",
            text.len() as f64 / 1e6 / seconds,
            if mode == "pieces" { "pieces" } else { "ids" }
        );
    }
}
