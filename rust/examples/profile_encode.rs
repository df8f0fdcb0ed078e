//! Encoding throughput of the Rust core alone (no Python), for profiling:
//! `profile_encode RANKS.tiktoken TEXT_FILE MEGABYTES [RUNS] [lines]` (`lines`:
//! `encode_batch` over the lines instead of one call).
use std::time::Instant;

use polytok::bpe::{AllowedSpecial, BpeModel};
use polytok::pretokenize::Pattern;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ranks = std::fs::read_to_string(&args[1]).unwrap();
    let text = std::fs::read_to_string(&args[2]).unwrap();
    let mut end = (args[3].parse::<f64>().unwrap() * 1e6) as usize;
    end = end.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let text = &text[..end];
    let runs: usize = args.get(4).map_or(3, |r| r.parse().unwrap());
    let model = BpeModel::from_tiktoken(&ranks, "ranks", Pattern::Cl100k, vec![]).unwrap();
    let by_lines = args.get(5).is_some_and(|mode| mode == "lines");
    let lines: Vec<&str> = text.lines().collect();
    for _ in 0..runs {
        let start = Instant::now();
        let n_ids: usize = if by_lines {
            let batch = model.encode_batch(&lines, &AllowedSpecial::None).unwrap();
            batch.iter().map(Vec::len).sum()
        } else {
            model.encode_ordinary(text).unwrap().len()
        };
        let seconds = start.elapsed().as_secs_f64();
        println!(
            "{:.1} MB/s ({n_ids} ids)",
            text.len() as f64 / 1e6 / seconds
        );
    }
}
