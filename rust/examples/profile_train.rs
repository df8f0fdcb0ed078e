//! BPE training time of the Rust core alone (no Python), for profiling and
//! for timing thread counts (`RAYON_NUM_THREADS`):
//! `profile_train VOCAB_SIZE MIN_FREQUENCY OUT.json|- FILE...` trains as
//! `BPETokenizer.train(files, pattern="gpt2")` does, prints the wall time
//! of counting and of training, and writes the model unless OUT is `-`.
//! `RUNS=n` counts and trains n times in the process: with
//! `MIMALLOC_PURGE_DELAY=-1` (freed memory kept), the runs after the first
//! reuse memory already touched, so that they time the work without the
//! kernel's zeroing of fresh pages, which on a virtual machine swings from
//! run to run by more than most changes gain.
use std::path::PathBuf;
use std::time::Instant;

use polytok::bpe::{train, TrainerSettings};
use polytok::corpus::BadBytes;
use polytok::counting::Counter;
use polytok::progress::Progress;
use polytok::text::pattern::Pattern;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let vocab_size: usize = args[1].parse().unwrap();
    let min_frequency: u64 = args[2].parse().unwrap();
    let out = &args[3];
    let paths: Vec<PathBuf> = args[4..].iter().map(PathBuf::from).collect();
    let total_bytes = paths
        .iter()
        .map(|path| std::fs::metadata(path).unwrap().len())
        .sum();
    let progress = Progress::silent();
    let runs: usize = std::env::var("RUNS").map_or(1, |runs| runs.parse().unwrap());
    let mut model = None;
    for _ in 0..runs {
        let start = Instant::now();
        let counter = Counter::new(Pattern::Gpt2, vec![]).unwrap();
        let counts = counter
            .count_files(&paths, BadBytes::Error, total_bytes, None, &progress)
            .unwrap();
        let counted = Instant::now();
        let settings = TrainerSettings {
            vocab_size,
            min_frequency,
            special_tokens: vec![],
            max_token_bytes: None,
            pattern: Pattern::Gpt2,
        };
        model = Some(train(counts, &settings, &progress).unwrap());
        let trained = Instant::now();
        println!(
            "counting {:.3} s, training {:.3} s, in all {:.3} s on {} threads",
            (counted - start).as_secs_f64(),
            (trained - counted).as_secs_f64(),
            (trained - start).as_secs_f64(),
            rayon::current_num_threads()
        );
    }
    let model = model.expect("RUNS is at least 1");
    if out != "-" {
        std::fs::write(out, model.to_json(None, None)).unwrap();
    }
}
