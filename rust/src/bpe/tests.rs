use super::*;
use crate::counting::{Counter, PieceCounts};
use crate::progress::Progress;

fn counts(pattern: Pattern, texts: &[&str]) -> PieceCounts {
    Counter::new(pattern, vec![])
        .unwrap()
        .count_texts(texts)
        .unwrap()
}

fn settings(vocab_size: usize, pattern: Pattern) -> TrainerSettings {
    TrainerSettings {
        vocab_size,
        min_frequency: 1,
        special_tokens: vec![],
        max_token_bytes: None,
        pattern,
    }
}

/// A model of four merges, for the file and error tests.
fn small_model() -> BpeModel {
    train(
        counts(Pattern::Cl100k, &["hello hello"]),
        &settings(260, Pattern::Cl100k),
        &Progress::silent(),
    )
    .unwrap()
}

fn token(model: &BpeModel, id: u32) -> String {
    String::from_utf8_lossy(model.token_bytes(id).unwrap()).into_owned()
}

#[test]
fn textbook_low_lower_lowest() {
    // Pieces without pre-tokenization: each word once, as in the textbook.
    let corpus = [
        "low", "low", "low", "low", "low", "lower", "lower", "newest", "newest", "newest",
        "newest", "newest", "newest", "widest", "widest", "widest",
    ];
    let model = train(
        counts(Pattern::Whole, &corpus),
        &settings(256 + 4, Pattern::Whole),
        &Progress::silent(),
    )
    .unwrap();
    let learned: Vec<String> = (256..260).map(|id| token(&model, id)).collect();
    // "es" (9), "est" (9), "lo" (7), "low" (7): ties broken by the smaller left id.
    assert_eq!(learned, ["es", "est", "lo", "low"]);
    assert_eq!(model.encode_ordinary("lowest").unwrap(), vec![259, 257]);
}

#[test]
fn ties_go_to_the_smaller_ids() {
    // "ab" and "cd" are equally frequent: (a, b) has the smaller left id.
    let model = train(
        counts(Pattern::Whole, &["ab", "cd"]),
        &settings(257, Pattern::Whole),
        &Progress::silent(),
    )
    .unwrap();
    assert_eq!(token(&model, 256), "ab");
}

#[test]
fn training_is_deterministic_and_respects_limits() {
    let text = "the quick brown fox jumps over the lazy dog; the dog sleeps. ".repeat(20);
    let mut s = settings(300, Pattern::Cl100k);
    s.max_token_bytes = Some(3);
    s.special_tokens = vec!["<|end|>".to_owned()];
    let a = train(counts(Pattern::Cl100k, &[&text]), &s, &Progress::silent()).unwrap();
    let b = train(counts(Pattern::Cl100k, &[&text]), &s, &Progress::silent()).unwrap();
    assert_eq!(a.to_json(None), b.to_json(None));
    assert!(a.vocab().iter().all(|t| t.len() <= 3));
    assert_eq!(
        a.special_tokens().id("<|end|>"),
        Some(a.vocab().len() as u32)
    );
}

#[test]
fn min_frequency_stops_training() {
    let mut s = settings(1000, Pattern::Whole);
    s.min_frequency = 3;
    let model = train(
        counts(Pattern::Whole, &["aaab", "aaab", "aaab", "xy"]),
        &s,
        &Progress::silent(),
    )
    .unwrap();
    let learned: Vec<String> = (256..model.vocab().len() as u32)
        .map(|id| token(&model, id))
        .collect();
    assert!(!learned.contains(&"xy".to_owned()));
    assert!(learned.contains(&"aa".to_owned()));
}

#[test]
fn errors_on_bad_settings_and_empty_corpus() {
    let small = train(
        counts(Pattern::Whole, &["ab"]),
        &settings(100, Pattern::Whole),
        &Progress::silent(),
    );
    assert!(small.err().unwrap().to_string().contains("at least 256"));
    let empty = train(
        counts(Pattern::Whole, &[""]),
        &settings(300, Pattern::Whole),
        &Progress::silent(),
    );
    assert!(empty.err().unwrap().to_string().contains("empty"));
}

#[test]
fn long_pieces_merge_as_short_ones() {
    let text = "abracadabra ".repeat(30) + &"aaaaab".repeat(40);
    let model = train(
        counts(Pattern::Cl100k, &[&text]),
        &settings(290, Pattern::Cl100k),
        &Progress::silent(),
    )
    .unwrap();
    for len in [1, 2, 5, 15, 16, 17, 63, 64, 65, 200, 1000] {
        let piece: Vec<u8> = "abracadabraaaaab".bytes().cycle().take(len).collect();
        let expected = naive_merge(&model, &piece);
        let mut long = Vec::new();
        model.merge_below(&piece, encoder::NO_RANK, &mut long, &mut Default::default());
        assert_eq!(long, expected, "length {len}");
        let mut backtracked = Vec::new();
        model.backtracker().encode(
            &model,
            &piece,
            &mut backtracked,
            &mut Vec::new(),
            &mut Default::default(),
        );
        assert_eq!(backtracked, expected, "length {len}");
        if len <= encoder::SHORT_PIECE {
            let mut short = Vec::new();
            model.merge_short(&piece, &mut short);
            assert_eq!(short, expected, "length {len}");
        }
        assert_eq!(model.decode_bytes(&long).unwrap(), piece);
    }
}

#[test]
fn cut_pieces_encode_as_whole_ones() {
    // Words of a few CJK characters (three bytes each) in random phrases: the
    // trained tokens cross some character boundaries and not others, so long
    // pieces have cuts, and near-cuts that must not be taken.
    let alphabet: Vec<char> = "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年"
        .chars()
        .collect();
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let words: Vec<String> = (0..40)
        .map(|_| {
            (0..1 + next(3))
                .map(|_| alphabet[next(alphabet.len())])
                .collect()
        })
        .collect();
    let mut phrase = |len: usize| -> String {
        (0..len)
            .map(|_| words[next(words.len())].as_str())
            .collect()
    };
    let corpus: Vec<String> = (0..300).map(|_| phrase(6)).collect();
    let corpus: Vec<&str> = corpus.iter().map(String::as_str).collect();
    let model = train(
        counts(Pattern::Whole, &corpus),
        &settings(600, Pattern::Whole),
        &Progress::silent(),
    )
    .unwrap();
    let mut with_cuts = 0;
    for len in 1..200 {
        let piece = phrase(1 + len % 40);
        with_cuts += model.cuts.next_cut(piece.as_bytes(), 0).is_some() as usize;
        let ids = model.encode_ordinary(&piece).unwrap();
        assert_eq!(ids, naive_merge(&model, piece.as_bytes()), "{piece}");
    }
    assert!(with_cuts > 100, "only {with_cuts} pieces had a cut");
}

/// The definition, for comparison: merge the lowest-rank adjacent pair.
fn naive_merge(model: &BpeModel, piece: &[u8]) -> Vec<u32> {
    let mut parts: Vec<Vec<u8>> = piece.iter().map(|&b| vec![b]).collect();
    loop {
        let best = (0..parts.len().saturating_sub(1))
            .filter_map(|i| {
                model
                    .vocab()
                    .id(&[parts[i].clone(), parts[i + 1].clone()].concat())
                    .map(|r| (r, i))
            })
            .min();
        let Some((_, i)) = best else { break };
        let right = parts.remove(i + 1);
        parts[i].extend(right);
    }
    parts.iter().map(|p| model.vocab().id(p).unwrap()).collect()
}

#[test]
fn json_and_tiktoken_round_trip() {
    let text = "Hello world, hello tokens! 1234 ".repeat(10);
    let mut s = settings(280, Pattern::Cl100k);
    s.special_tokens = vec!["<|endoftext|>".to_owned()];
    let model = train(counts(Pattern::Cl100k, &[&text]), &s, &Progress::silent()).unwrap();
    let json = model.to_json(None);
    let (loaded, _) = BpeModel::from_json(&json, "m.json").unwrap();
    assert_eq!(loaded.to_json(None), json);
    let ids = model.encode(&text, &AllowedSpecial::None).unwrap();
    assert_eq!(loaded.encode(&text, &AllowedSpecial::None).unwrap(), ids);

    let ranks = model.to_tiktoken();
    let special = vec![("<|endoftext|>".to_owned(), model.vocab().len() as u32)];
    let from_ranks =
        BpeModel::from_tiktoken(&ranks, "m.tiktoken", Pattern::Cl100k, special).unwrap();
    assert_eq!(from_ranks.encode_ordinary(&text).unwrap(), ids);
    let with_special = from_ranks
        .encode("a<|endoftext|>b", &AllowedSpecial::All)
        .unwrap();
    assert_eq!(with_special[1], model.vocab().len() as u32);
    let as_text = from_ranks
        .encode("a<|endoftext|>b", &AllowedSpecial::None)
        .unwrap();
    assert!(as_text.len() > 3);
}

#[test]
fn damaged_files_are_errors() {
    let model = small_model();
    let json = model.to_json(None);
    let truncated = BpeModel::from_json(&json[..json.len() / 2], "t.json")
        .err()
        .unwrap()
        .to_string();
    assert!(
        truncated.contains("t.json") && truncated.contains("truncated"),
        "{truncated}"
    );
    let wrong = BpeModel::from_json("{\"format\": 1}", "w.json")
        .err()
        .unwrap()
        .to_string();
    assert!(wrong.contains("w.json"), "{wrong}");
    let bad_rank =
        BpeModel::from_tiktoken("YQ== 0\nYg== x\n", "r.tiktoken", Pattern::Cl100k, vec![])
            .err()
            .unwrap()
            .to_string();
    assert!(bad_rank.contains("line 2"), "{bad_rank}");
    let gap = BpeModel::from_tiktoken("YQ== 0\nYg== 2\n", "r.tiktoken", Pattern::Cl100k, vec![])
        .err()
        .unwrap()
        .to_string();
    assert!(gap.contains("rank 1 is missing"), "{gap}");
    let no_bytes = BpeModel::from_tiktoken("YQ== 0\n", "r.tiktoken", Pattern::Cl100k, vec![])
        .err()
        .unwrap()
        .to_string();
    assert!(no_bytes.contains("single-byte token"), "{no_bytes}");
}

#[test]
fn unknown_ids_are_errors() {
    let model = train(
        counts(Pattern::Cl100k, &["hello"]),
        &settings(258, Pattern::Cl100k),
        &Progress::silent(),
    )
    .unwrap();
    let err = model.decode_bytes(&[104, 999]).err().unwrap().to_string();
    assert!(err.contains("999"), "{err}");
}

#[test]
fn counts_beyond_32_bits_do_not_overflow() {
    // Wrapped to 32 bits, "ab" (5e9) would count 705 032 704 and lose to
    // "cd" (4e9).
    let mut counts = PieceCounts::default();
    counts.counts.insert(b"ab".to_vec(), 5_000_000_000);
    counts.counts.insert(b"cd".to_vec(), 4_000_000_000);
    let model = train(counts, &settings(257, Pattern::Whole), &Progress::silent()).unwrap();
    assert_eq!(token(&model, 256), "ab");
}

#[test]
fn damaged_merges_and_special_ids_are_errors_not_panics() {
    let model = small_model();
    let json = model.to_json(None);
    // More merges than tokens: counting back from the vocabulary size would
    // underflow.
    let extra = "[0,1],".repeat(300);
    let too_many = json.replace("\"merges\":[", &format!("\"merges\":[{extra}"));
    let err = BpeModel::from_json(&too_many, "m.json")
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("m.json") && err.contains("merges"), "{err}");
    let tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let huge = vec![("<x>".to_owned(), u32::MAX)];
    let err = BpeModel::new(tokens, Pattern::Cl100k, huge, None)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("below 2^31"), "{err}");
}
