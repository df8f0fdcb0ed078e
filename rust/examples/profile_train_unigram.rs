//! Unigram training time of the Rust core alone (no Python), for profiling:
//! `profile_train_unigram TEXT_FILE VOCAB_SIZE [OUT.model]`, with the Python
//! trainer's defaults otherwise. Prints the seconds of counting and of
//! training (set `RAYON_NUM_THREADS` to compare thread counts), and, on
//! Linux, the CPU seconds of the calling thread and of the others: the
//! calling thread only runs what is sequential (it waits while the pool
//! runs parallel work), so its share is the serial fraction of Amdahl's law,
//! measured without idle cores.
use std::path::PathBuf;
use std::time::Instant;

use polytok::corpus::BadBytes;
use polytok::counting::Counter;
use polytok::progress::Progress;
use polytok::unigram::{train, UnigramTrainerSettings, Whitespace};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = PathBuf::from(&args[1]);
    let vocab_size: usize = args[2].parse().unwrap();
    let progress = Progress::silent();
    let start = Instant::now();
    let counter = Counter::sentencepiece(Whitespace::default(), Vec::new()).unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    let counts = counter
        .count_files(&[path], BadBytes::Error, size, None, &progress)
        .unwrap();
    let counted = start.elapsed().as_secs_f64();
    let settings = UnigramTrainerSettings::new(vocab_size, Whitespace::default());
    let model = train(counts, &settings, &progress).unwrap();
    let trained = start.elapsed().as_secs_f64() - counted;
    println!("counting {counted:.3} s, training {trained:.3} s");
    if let Some((calling, others)) = cpu_seconds() {
        println!(
            "CPU: calling thread {calling:.3} s, other threads {others:.3} s \
             (sequential share {:.1}%)",
            100.0 * calling / (calling + others)
        );
    }
    if let Some(out) = args.get(3) {
        std::fs::write(out, model.to_sentencepiece().unwrap()).unwrap();
    }
}

/// CPU seconds of the calling thread and of all others, from
/// `/proc/self/task/*/schedstat` (Linux).
fn cpu_seconds() -> Option<(f64, f64)> {
    let calling = std::process::id().to_string();
    let (mut own, mut others) = (0.0, 0.0);
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let task = task.ok()?;
        let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
        let seconds = stat.split_whitespace().next()?.parse::<f64>().ok()? / 1e9;
        if task.file_name().to_str() == Some(calling.as_str()) {
            own += seconds;
        } else {
            others += seconds;
        }
    }
    Some((own, others))
}
