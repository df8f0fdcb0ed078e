use super::*;
use crate::model::Model;
use crate::test_rng::XorShift;
use crate::vocab::AllowedSpecial;

/// The ids of `text` cut by the model's pattern (the preset's pieces).
fn encode(model: &BpeModel, text: &str) -> Vec<u32> {
    let splitter = PreTokenizer::new(model.pattern().clone()).unwrap();
    let mut ids = Vec::new();
    model
        .with_state(|state| {
            splitter.for_each_piece(text, |piece| {
                model.encode_piece(piece.as_bytes(), &mut ids, state)
            })
        })
        .unwrap();
    ids
}
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
    assert_eq!(encode(&model, "lowest"), vec![259, 257]);
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
    assert_eq!(a.to_json(None, None), b.to_json(None, None));
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
        let backtracker = model
            .backtracker()
            .expect("a trained model's merges are in rank order");
        assert!(backtracker.encode(
            &model,
            &piece,
            &mut backtracked,
            &mut Vec::new(),
            &mut Default::default(),
        ));
        assert_eq!(backtracked, expected, "length {len}");
        if len <= encoder::SHORT_PIECE {
            let mut short = Vec::new();
            model.merge_short(&piece, encoder::NO_RANK, &mut short);
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
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    let mut next = move |n: usize| rng.below(n);
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
        let ids = encode(&model, &piece);
        assert_eq!(ids, naive_merge(&model, piece.as_bytes()), "{piece}");
    }
    assert!(with_cuts > 100, "only {with_cuts} pieces had a cut");
}

/// The definition, for comparison: merge the lowest-rank adjacent pair
/// (the leftmost of equal ones), ranks looked up by the concatenated bytes.
/// Parts are byte ranges; the rank of each adjacent pair is kept in a list
/// and only the two next to a merge are looked up again.
fn naive_merge(model: &BpeModel, piece: &[u8]) -> Vec<u32> {
    let rank = |start: usize, end: usize| model.vocab().id(&piece[start..end]).unwrap_or(u32::MAX);
    let mut starts: Vec<usize> = (0..=piece.len()).collect();
    let mut ranks: Vec<u32> = (0..piece.len().saturating_sub(1))
        .map(|i| rank(i, i + 2))
        .collect();
    while let Some((best, i)) = ranks.iter().enumerate().map(|(i, &r)| (r, i)).min() {
        if best == u32::MAX {
            break;
        }
        starts.remove(i + 1);
        ranks.remove(i);
        if i > 0 {
            ranks[i - 1] = rank(starts[i - 1], starts[i + 1]);
        }
        if i + 2 < starts.len() {
            ranks[i] = rank(starts[i], starts[i + 2]);
        }
    }
    starts
        .windows(2)
        .map(|w| model.vocab().id(&piece[w[0]..w[1]]).unwrap())
        .collect()
}

#[test]
fn json_and_tiktoken_round_trip() {
    let text = "Hello world, hello tokens! 1234 ".repeat(10);
    let mut s = settings(280, Pattern::Cl100k);
    s.special_tokens = vec!["<|endoftext|>".to_owned()];
    let model = train(counts(Pattern::Cl100k, &[&text]), &s, &Progress::silent()).unwrap();
    let json = model.to_json(None, None);
    let (loaded, _, _) = BpeModel::from_json(&json, "m.json").unwrap();
    assert_eq!(loaded.to_json(None, None), json);
    let ids = encode(&model, &text);
    assert_eq!(encode(&loaded, &text), ids);

    let ranks = model.to_tiktoken();
    let special = vec![("<|endoftext|>".to_owned(), model.vocab().len() as u32)];
    let from_ranks =
        BpeModel::from_tiktoken(&ranks, "m.tiktoken", Pattern::Cl100k, special).unwrap();
    assert_eq!(encode(&from_ranks, &text), ids);
    let preset = crate::presets::preset(Model::Bpe(std::sync::Arc::new(from_ranks)));
    let with_special = preset.ids("a<|endoftext|>b", &AllowedSpecial::All);
    assert_eq!(with_special[1], model.vocab().len() as u32);
    let as_text = preset.ids("a<|endoftext|>b", &AllowedSpecial::None);
    assert!(as_text.len() > 3);
}

#[test]
fn damaged_files_are_errors() {
    let model = small_model();
    let json = model.to_json(None, None);
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
    // Without its "pattern" key a file is damaged, not a model without
    // pre-tokenization ("pattern": null).
    let (start, end) = (
        json.find("\"pattern\"").unwrap(),
        json.find("\"tokens\"").unwrap(),
    );
    let no_pattern = format!("{}{}", &json[..start], &json[end..]);
    let err = BpeModel::from_json(&no_pattern, "p.json")
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("p.json") && err.contains("missing field `pattern`"),
        "{err}"
    );
    let null_pattern = format!("{}\"pattern\":null,{}", &json[..start], &json[end..]);
    let (whole, _, _) = BpeModel::from_json(&null_pattern, "n.json").unwrap();
    assert_eq!(whole.pattern(), &Pattern::Whole);
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
    counts.pieces.add(b"ab", 5_000_000_000);
    counts.pieces.add(b"cd", 4_000_000_000);
    let model = train(counts, &settings(257, Pattern::Whole), &Progress::silent()).unwrap();
    assert_eq!(token(&model, 256), "ab");
}

#[test]
fn damaged_merges_and_special_ids_are_errors_not_panics() {
    let model = small_model();
    let json = model.to_json(None, None);
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

/// tiktoken's definition: a piece that is a token is that token, whatever
/// merging would make of it; otherwise merge its bytes.
fn tiktoken_piece(model: &BpeModel, piece: &[u8]) -> Vec<u32> {
    match model.vocab().id(piece) {
        Some(id) => vec![id],
        None => naive_merge(model, piece),
    }
}

/// A model of the single bytes plus `extra` tokens, ranked in that order.
fn ranked_model(extra: &[&[u8]]) -> BpeModel {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.extend(extra.iter().map(|t| t.to_vec()));
    BpeModel::new(tokens, Pattern::Whole, vec![], None).unwrap()
}

#[test]
fn ranks_out_of_merge_order_encode_huge_pieces_exactly() {
    // "aab" is ranked before "aa", which it is made of: merges do not follow
    // ranks, so the backtracking encoder (which needs them to) is not used.
    let model = ranked_model(&[b"aab", b"aa", b"bba"]);
    assert!(model.reach.splits().is_none() && model.backtracker().is_none());
    for len in [4095, 4096, 4098, 20_000] {
        let piece: Vec<u8> = b"aba".iter().copied().cycle().take(len).collect();
        let ids = encode(&model, std::str::from_utf8(&piece).unwrap());
        assert_eq!(ids, naive_merge(&model, &piece), "length {len}");
    }
    // A trained model's merges are in rank order.
    assert!(small_model().backtracker().is_some());
}

#[test]
fn unreachable_tokens_come_only_from_whole_pieces() {
    // No merge makes "bcaac" (no pair of its bytes is a token): tiktoken
    // emits it for the piece "bcaac" alone, never inside a longer piece,
    // even where that piece can be cut around it.
    let model = ranked_model(&[b"bcaac"]);
    assert!(!model.reach.is_reachable(256) && model.reach.is_reachable(255));
    assert_eq!(encode(&model, "bcaac"), [256]);
    let text = "cbbcaaccbacabbbab";
    let bytes: Vec<u32> = text.bytes().map(u32::from).collect();
    assert_eq!(encode(&model, text), bytes);
}

#[test]
fn long_tokens_load_with_their_pairs() {
    // Tokens of every length from 1 to 300 bytes of one letter, each the
    // merge of shorter ones (more than the hashed prefixes of affixes.rs).
    let tokens: Vec<Vec<u8>> = (1..=300).map(|len| vec![b'x'; len]).collect();
    let mut all: Vec<Vec<u8>> = (0..=255u8)
        .filter(|&b| b != b'x')
        .map(|b| vec![b])
        .collect();
    all.splice(b'x' as usize..b'x' as usize, tokens);
    let model = BpeModel::new(all, Pattern::Whole, vec![], None).unwrap();
    let id = |len: usize| model.vocab().id(&vec![b'x'; len]).unwrap();
    // Every split of every token into two tokens is a pair.
    let pairs: std::collections::HashSet<(u32, u32, u32)> =
        super::token_pairs(&model.vocab, &super::affixes::Affixes::new(&model.vocab))
            .into_iter()
            .collect();
    for len in [2, 65, 66, 130, 300] {
        for split in 1..len {
            assert!(
                pairs.contains(&(id(split), id(len - split), id(len))),
                "{split} + {}",
                len - split
            );
        }
    }
    for len in [299, 300, 301, 5000] {
        let piece = vec![b'x'; len];
        assert_eq!(
            encode(&model, std::str::from_utf8(&piece).unwrap()),
            tiktoken_piece(&model, &piece),
            "length {len}"
        );
    }
}

#[test]
fn random_rank_tables_encode_as_tiktoken() {
    // Vocabularies made of random merges over a small alphabet, their ranks
    // then shuffled (so merges may not follow ranks, and some tokens become
    // unreachable), against the definition, on short and huge pieces.
    random_rank_tables(40, 30, b"abc");
    // Vocabularies past the dense grid of low ids, whose pairs are looked up
    // in the pair table (with every pair: random merges are not in rank
    // order).
    random_rank_tables(4, 2 * super::LOW_IDS, b"abcdef");
}

#[test]
fn a_trained_vocabulary_past_the_grid_encodes_as_tiktoken() {
    // A trained model's merges are in rank order, so its pair table holds
    // only the merges BPE makes (`pair_table.rs`); with thousands of tokens
    // most pairs are past the dense grid of low ids. Against the
    // definition, on pieces of words joined, short and huge.
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    let mut next = move |n: usize| rng.below(n);
    let words: Vec<String> = (0..3000)
        .map(|_| {
            (0..1 + next(10))
                .map(|_| (b'a' + next(8) as u8) as char)
                .collect()
        })
        .collect();
    let corpus: Vec<String> = (0..20_000)
        .map(|_| words[next(words.len()).min(next(words.len()))].clone())
        .collect();
    let corpus: Vec<&str> = corpus.iter().map(String::as_str).collect();
    let model = train(
        counts(Pattern::Whole, &corpus),
        &settings(256 + 3 * super::LOW_IDS, Pattern::Whole),
        &Progress::silent(),
    )
    .unwrap();
    assert!(model.reach.splits().is_some());
    assert!(model.vocab_size() > 2 * super::LOW_IDS);
    // Each word between two letters no token holds, so that it merges as
    // in training but is not one piece (a whole piece that is a token is
    // looked up, not merged); then words joined.
    for word in &words {
        let piece = format!("z{word}z");
        assert_eq!(
            encode(&model, &piece),
            tiktoken_piece(&model, piece.as_bytes()),
            "{piece}"
        );
    }
    for i in 0..200 {
        let len = if i == 0 {
            4100
        } else {
            [3, 7, 17, 40, 300][next(5)]
        };
        let mut piece = String::new();
        while piece.len() < len {
            piece.push_str(&words[next(words.len())]);
        }
        piece.truncate(len);
        assert_eq!(
            encode(&model, &piece),
            tiktoken_piece(&model, piece.as_bytes()),
            "piece {piece}"
        );
    }
}

fn random_rank_tables(rounds: usize, n_learned: usize, alphabet: &[u8]) {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let mut next = move |n: usize| rng.below(n);
    for round in 0..rounds {
        let mut learned: Vec<Vec<u8>> = Vec::new();
        while learned.len() < n_learned {
            let pick = |i: usize, learned: &Vec<Vec<u8>>| {
                if i < alphabet.len() {
                    vec![alphabet[i]]
                } else {
                    learned[i - alphabet.len()].clone()
                }
            };
            let n = alphabet.len() + learned.len();
            let token = [pick(next(n), &learned), pick(next(n), &learned)].concat();
            if token.len() <= 12 && !learned.contains(&token) {
                learned.push(token);
            }
        }
        // Shuffle the learned ranks in half the rounds, keep them in others.
        if round % 2 == 1 {
            for i in (1..learned.len()).rev() {
                learned.swap(i, next(i + 1));
            }
        }
        let extra: Vec<&[u8]> = learned.iter().map(Vec::as_slice).collect();
        let model = ranked_model(&extra);
        for i in 0..30 {
            // One huge piece a round (for the backtracking encoder).
            let len = if i == 0 {
                4100
            } else {
                [1, 3, 7, 17, 40, 300][next(6)]
            };
            // Random letters, or tokens joined (where the later tokens
            // form).
            let mut piece: Vec<u8> = Vec::with_capacity(len + 12);
            while piece.len() < len {
                if i % 2 == 0 {
                    piece.push(alphabet[next(alphabet.len())]);
                } else {
                    piece.extend_from_slice(&learned[next(learned.len())]);
                }
            }
            piece.truncate(len);
            let text = std::str::from_utf8(&piece).unwrap();
            assert_eq!(
                encode(&model, text),
                tiktoken_piece(&model, &piece),
                "round {round}, piece {text}"
            );
        }
        // The two merges of the encoder, with the tokens below a limit
        // (how `reach.rs` asks which tokens merging makes), pieces of every
        // short length: repeated letters make pairs of equal rank.
        for len in 1..=encoder::SHORT_PIECE {
            let piece: Vec<u8> = (0..len).map(|_| alphabet[next(alphabet.len())]).collect();
            let limit = [encoder::NO_RANK, next(model.vocab_size()) as u32][next(2)];
            let (mut short, mut heap) = (Vec::new(), Vec::new());
            model.merge_short(&piece, limit, &mut short);
            model.merge_below(&piece, limit, &mut heap, &mut Default::default());
            assert_eq!(short, heap, "round {round}, piece {piece:?}, limit {limit}");
        }
    }
}

#[test]
fn a_long_text_cut_among_threads_has_the_ids_of_the_whole() {
    // Cut text (see `Tokenizer::cut_sequence_ids`) on four threads against
    // the same text on one, with special tokens across the parts and a
    // template around them.
    let line = "Les naïfs s'écrient: « Straße 42 »\t東京は晴れ. It's 3.14159, isn't it?\r\n";
    let mut text = String::new();
    for i in 0..8000 {
        text.push_str(line);
        if i % 900 == 0 {
            text.push_str("<|endoftext|>");
        }
    }
    assert!(text.len() > 1 << 19);
    let mut s = settings(600, Pattern::O200k);
    s.special_tokens = vec!["<|endoftext|>".to_owned()];
    let model = Model::Bpe(std::sync::Arc::new(
        train(counts(Pattern::O200k, &[line]), &s, &Progress::silent()).unwrap(),
    ));
    let eot = model.token_id(b"<|endoftext|>").unwrap();
    let mut spec = crate::presets::preset_spec(&model);
    spec.post_processor = Some(
        serde_json::from_value(serde_json::json!({
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
            ],
            "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [eot], "tokens": ["<|endoftext|>"]}},
        }))
        .unwrap(),
    );
    let tokenizer = crate::tokenizer::Tokenizer::new(model, &spec).unwrap();
    let ids_on = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut ids = Vec::new();
            tokenizer
                .encode_ids_into(&text, true, &AllowedSpecial::All, &mut ids)
                .unwrap();
            ids
        })
    };
    let whole = ids_on(1);
    assert_eq!(whole.iter().filter(|&&id| id == eot).count(), 10);
    assert_eq!(ids_on(4), whole);
    // Cut only on a pool's threads, and only if it has others: never on a
    // thread outside any pool, which would start rayon's global pool (in
    // a child made by `fork`, one without threads).
    let cut_on = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| tokenizer.cut_splitter(&text).is_some())
    };
    assert!(cut_on(4) && !cut_on(1));
    assert!(tokenizer.cut_splitter(&text).is_none());
}

#[test]
fn batched_lookups_give_the_ids_of_each_piece_alone() {
    // The batched path (`short_pieces::PieceBatch`) against `encode_piece`
    // one piece at a time, over text that takes every branch: tokens,
    // merged pieces seen before (memo) and not, pieces of more than three
    // ids (arena cache), pieces past 15 bytes (tokens or not), enough distinct merged
    // pieces for the memo to grow, and a last piece at the very end of the
    // text (its key copied, not loaded).
    let syllables = [
        "ka", "ri", "to", "mu", "sel", "ven", "dra", "qu", "ix", "ß", "東", "ц",
    ];
    let mut rng = XorShift(0x2545_F491_4F6C_DD1D);
    let mut next = |n: usize| rng.below(n);
    let word = |next: &mut dyn FnMut(usize) -> usize| -> String {
        (0..1 + next(8))
            .map(|_| syllables[next(syllables.len())])
            .collect()
    };
    let corpus: Vec<String> = (0..300).map(|_| word(&mut next)).collect();
    let corpus: Vec<&str> = corpus.iter().map(String::as_str).collect();
    let trained = train(
        counts(Pattern::Cl100k, &corpus),
        &settings(400, Pattern::Cl100k),
        &Progress::silent(),
    )
    .unwrap();
    let words: Vec<String> = (0..6000).map(|_| word(&mut next)).collect();
    // Some pieces past 15 bytes are tokens (ranked last, so whole pieces
    // only): the filter of long tokens must let them through to the
    // vocabulary, while the other long pieces go to the piece cache.
    // (With the space before them: most pieces are " word".)
    let long_tokens: Vec<String> = (words.iter())
        .filter(|w| w.len() > 15)
        .take(80)
        .map(|w| format!(" {w}"))
        .collect();
    assert_eq!(long_tokens.len(), 80);
    let mut tokens: Vec<Vec<u8>> = trained.vocab().iter().map(<[u8]>::to_vec).collect();
    tokens.extend(long_tokens.iter().map(|w| w.as_bytes().to_vec()));
    let model = BpeModel::new(tokens, Pattern::Cl100k, vec![], None).unwrap();
    let mut text = String::new();
    for _ in 0..3 * words.len() {
        text.push_str(&words[next(words.len())]);
        text.push_str([" ", ", ", ".\n", " 123 "][next(4)]);
    }
    text.push_str(" ka");
    let batched = |text: &str| {
        let splitter = PreTokenizer::new(model.pattern().clone()).unwrap();
        let base = text.as_ptr() as usize;
        let mut ids = Vec::new();
        model.with_state(|state| {
            let mut batch = PieceBatch::new(&model, state, text, &mut ids);
            splitter
                .for_each_piece(text, |p| batch.push(p.as_ptr() as usize - base, p.len()))
                .unwrap();
            batch.finish();
        });
        ids
    };
    let alone = encode(&model, &text);
    assert!(alone.len() > 50_000);
    let first_long = trained.vocab().len() as u32;
    assert!(alone.iter().filter(|&&id| id >= first_long).count() > 50);
    // A first pass and a second, with the memo warm.
    assert_eq!(batched(&text), alone);
    assert_eq!(batched(&text), alone);
}

#[test]
fn the_pair_lookups_agree_with_every_pair_of_tokens() {
    // Tokens past `LOW_IDS`, each two earlier ones joined, so that pairs
    // fall on both sides of the grid's edge.
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let mut seen: std::collections::HashSet<Vec<u8>> = tokens.iter().cloned().collect();
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    while tokens.len() < 3 * super::LOW_IDS {
        let state = rng.next();
        let n = tokens.len() as u64;
        let (left, right) = ((state % n) as usize, ((state >> 32) % n) as usize);
        let joined = [tokens[left].as_slice(), tokens[right].as_slice()].concat();
        if joined.len() <= 12 && seen.insert(joined.clone()) {
            tokens.push(joined);
        }
    }
    let model = BpeModel::new(tokens, Pattern::Whole, vec![], None).unwrap();
    let every_pair: std::collections::HashMap<(u32, u32), u32> =
        super::token_pairs(&model.vocab, &super::affixes::Affixes::new(&model.vocab))
            .into_iter()
            .map(|(left, right, id)| ((left, right), id))
            .collect();
    let splits = model.reach.splits().expect("merges in rank order");
    assert!(splits
        .iter()
        .any(|&(left, _)| left >= super::LOW_IDS as u32));
    // The pair table keeps only the merges BPE makes (`pair_table.rs`):
    // each token's last merge on its own bytes is found...
    for (id, &(left, right)) in (0..).zip(splits) {
        if left != id {
            assert_eq!(model.pair_rank(left, right), id);
        }
    }
    // ...the grids hold every pair below their edge, and no lookup names a
    // token that is not the pair's concatenation.
    let n = model.vocab.len() as u32;
    for left in (0..n).step_by(7) {
        for right in (0..n).step_by(11) {
            let expected = every_pair.get(&(left, right)).copied().unwrap_or(u32::MAX);
            let found = model.pair_rank(left, right);
            if (left | right) < super::LOW_IDS as u32 {
                assert_eq!(found, expected);
            } else {
                assert!(found == expected || found == u32::MAX);
            }
        }
    }
    for (&(left, right), &id) in &every_pair {
        assert!([id, u32::MAX].contains(&model.pair_rank(left, right)));
    }
}
