use super::*;
use std::sync::Arc;

use crate::bpe::{self, BpeModel, TrainerSettings};
use crate::counting::Counter;
use crate::model::Model;
use crate::presets::preset;
use crate::progress::Progress;
use crate::text::bert::BertNormalizer;
use crate::text::pattern::Pattern;
use crate::unigram::{self, UnigramModel, UnigramTrainerSettings, Whitespace};
use crate::vocab::AllowedSpecial;
use crate::wordpiece::{self, WordPieceModel, WordPieceSettings, WordPieceTrainerSettings};

fn toks(tokens: &[&str]) -> Vec<Vec<u8>> {
    tokens.iter().map(|t| t.as_bytes().to_vec()).collect()
}

fn decoder(json: &str) -> Decoder {
    Decoder::from_json(json).unwrap()
}

fn llama() -> Decoder {
    decoder(
        r#"{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},
        {"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]}"#,
    )
}

// The expected strings are those of tokenizers 0.23.3's decoders.
#[test]
fn steps_as_hugging_face() {
    let bf = decoder(r#"{"type":"ByteFallback"}"#);
    assert_eq!(
        bf.decode(toks(&["a", "<0xE3>", "<0x81>", "<0x82>", "b"]))
            .unwrap(),
        "aあb"
    );
    assert_eq!(
        bf.decode(toks(&["<0x61>", "<0x6a>", "<0x6G>", "<0x612>"]))
            .unwrap(),
        "aj<0x6G><0x612>"
    );
    let wp = decoder(r#"{"type":"WordPiece","cleanup":false}"#);
    assert_eq!(
        wp.decode(toks(&["un", "##aff", "##able", ",", "x"]))
            .unwrap(),
        "unaffable , x"
    );
    let ms = |scheme: &str| {
        decoder(&format!(
            r#"{{"type":"Metaspace","prepend_scheme":"{scheme}"}}"#
        ))
    };
    assert_eq!(ms("always").decode(toks(&["▁▁a▁b", "▁c"])).unwrap(), "ab c");
    assert_eq!(ms("first").decode(toks(&["▁▁a▁b", "▁c"])).unwrap(), "ab c");
    assert_eq!(
        ms("never").decode(toks(&["▁▁a▁b", "▁c"])).unwrap(),
        "  a b c"
    );
    let strip = decoder(r#"{"type":"Strip","content":" ","start":1,"stop":0}"#);
    assert_eq!(strip.decode(toks(&["  a ", " b "])).unwrap(), " a b ");
    let strip2 = decoder(r#"{"type":"Strip","content":"x","start":5,"stop":2}"#);
    assert_eq!(strip2.decode(toks(&["xxaxxx", "x", ""])).unwrap(), "ax");
    assert_eq!(
        decoder(r#"{"type":"Fuse"}"#)
            .decode_chain(toks(&["a", "b"]))
            .unwrap(),
        toks(&["ab"])
    );
    let replace = decoder(r#"{"type":"Replace","pattern":{"String":"▁"},"content":" "}"#);
    assert_eq!(replace.decode(toks(&["▁a", "▁b"])).unwrap(), " a b");
    let regex = decoder(r##"{"type":"Replace","pattern":{"Regex":"[0-9]+"},"content":"#"}"##);
    assert_eq!(regex.decode(toks(&["a12b3", "4"])).unwrap(), "a#b##");
    assert_eq!(
        llama()
            .decode(toks(&[
                "▁Hello", "▁", "<0xF0>", "<0x9F>", "<0x99>", "<0x82>", "▁w", "orld"
            ]))
            .unwrap(),
        "Hello 🙂 world"
    );
    let bl = decoder(
        r#"{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true}"#,
    );
    assert_eq!(
        bl.decode(vec![b" a\xE4".to_vec(), b"\xB8\xAD".to_vec()])
            .unwrap(),
        " a中"
    );
    assert_eq!(bl.decode(vec![b"\xE4\xB8".to_vec()]).unwrap(), "\u{FFFD}");
}

#[test]
fn byte_fallback_replaces_each_invalid_byte() {
    let bf = decoder(r#"{"type":"ByteFallback"}"#);
    // FF is not UTF-8; E3 81 is a character cut short: one U+FFFD a byte.
    let out = bf.decode(toks(&[
        "<0x61>", "<0xFF>", "b", "<0xE3>", "<0x81>", "<0x82>", "<0xE3>", "<0x81>",
    ]));
    assert_eq!(out.unwrap(), "a\u{FFFD}bあ\u{FFFD}\u{FFFD}");
}

#[test]
fn wordpiece_decoder_is_the_models_decode() {
    let m = WordPieceModel::new(
        [
            "[UNK]", "it", "'", "s", "don", "t", "a", ".", "do", "not", "n", "##x", "?",
        ]
        .map(str::to_owned)
        .to_vec(),
        WordPieceSettings::default(),
    )
    .unwrap();
    let d = Decoder::WordPiece {
        prefix: "##".into(),
        cleanup: true,
        each_token: false,
    };
    let ids: Vec<u32> = (0..m_len(&m))
        .chain([10, 2, 5, 1, 11, 12, 8, 9, 2, 2, 2])
        .collect();
    for cut in 0..ids.len() {
        let ids = &ids[cut..];
        let tokens = ids
            .iter()
            .map(|&i| m.token(i).unwrap().as_bytes().to_vec())
            .collect();
        assert_eq!(d.decode(tokens).unwrap(), m.decode(ids, true).unwrap());
    }
}

fn m_len(m: &WordPieceModel) -> u32 {
    (0..).take_while(|&i| m.token(i).is_ok()).count() as u32
}

#[test]
fn json_round_trip_and_hugging_face_files() {
    // As tokenizers 0.23.3 writes them.
    let files = [
        r#"{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]}"#,
        r###"{"type":"WordPiece","prefix":"##","cleanup":true}"###,
        r#"{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true}"#,
        r#"{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true}"#,
        r#"{"type":"Replace","pattern":{"Regex":"a+"},"content":"b"}"#,
    ];
    for file in files {
        let d = decoder(file);
        assert_eq!(d.to_json(), file);
        assert_eq!(decoder(&d.to_json()), d);
    }
    // Defaults.
    assert_eq!(
        decoder(r#"{"type":"Metaspace"}"#),
        Decoder::Metaspace {
            replacement: '▁',
            prepend_scheme: PrependScheme::Always,
            split: true
        }
    );
    assert_eq!(
        decoder(r#"{"type":"WordPiece"}"#),
        Decoder::WordPiece {
            prefix: "##".into(),
            cleanup: true,
            each_token: false
        }
    );
}

#[test]
fn bad_specs_say_what_is_wrong() {
    let err = |json: &str| Decoder::from_json(json).unwrap_err().to_string();
    let e = err(r#"{"type":"CTC"}"#);
    assert!(
        e.contains("unknown decoder type \"CTC\"") && e.contains("ByteFallback, ByteLevel"),
        "{e}"
    );
    let e = err(r#"{"type":"Replace","pattern":{"Regex":"(a"},"content":""}"#);
    assert!(e.contains("Replace") && e.contains("invalid regex"), "{e}");
    let e = err(r#"{"type":"Strip","content":" ","start":1}"#);
    assert!(e.contains("Strip") && e.contains("stop"), "{e}");
    let e = err(r#"{"type":"Fuse","x":1}"#);
    assert!(e.contains("Fuse") && e.contains("unknown field `x`"), "{e}");
    let e = err(r#"{"type":"ByteFallback","x":1}"#);
    assert!(
        e.contains("ByteFallback") && e.contains("unknown field `x`"),
        "{e}"
    );
    let e = err(r#"{"type":"Metaspace","prepend_scheme":"sometimes"}"#);
    assert!(e.contains("Metaspace") && e.contains("sometimes"), "{e}");
    let e = err(
        r#"{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"Strip","content":"ab","start":1,"stop":0}]}"#,
    );
    assert!(e.contains("Sequence.decoders[1] Strip"), "{e}");
    let e = err(r#"{"type":"Sequence","decoders":[{"type":"Nope"}]}"#);
    assert!(e.contains("decoders[0]") && e.contains("\"Nope\""), "{e}");
    assert!(err(r#"{"type":"Sequence"}"#).contains("`decoders` must be a list"));
    assert!(err(r#"[1]"#).contains("must be an object"));
    assert!(err(r#"{"type":3}"#).contains("must be a string"));
    assert!(err("{").contains("not valid JSON"));
    assert!(matches!(
        Decoder::from_json("{}"),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn lookahead_of_steps() {
    assert_eq!(decoder(r#"{"type":"WordPiece"}"#).stream_lookahead(), 2);
    assert_eq!(
        decoder(r#"{"type":"WordPiece","cleanup":false}"#).stream_lookahead(),
        0
    );
    assert_eq!(llama().stream_lookahead(), 0);
    assert_eq!(decoder(r#"{"type":"Metaspace"}"#).stream_lookahead(), 0);
    let fused_replace = r#"{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"Replace","pattern":{"String":"ab"},"content":""}]}"#;
    assert_eq!(decoder(fused_replace).stream_lookahead(), 2);
}

// ---------------------------------------------------------------- streaming

/// FLORES-like lines in many scripts, with characters that small models cut
/// into bytes (CJK, emoji with modifiers and joiners), and BERT's cleanup
/// cases.
const LINES: [&str; 16] = [
    "The quick brown fox didn't jump; it's 3.14 o'clock, isn't it? Yes!",
    "Le cœur a ses raisons que la raison ne connaît point.",
    "Über den Wolken muss die Freiheit wohl grenzenlos sein.",
    "Москва — столица России, крупнейший город страны.",
    "北京是中华人民共和国的首都，也是全国的政治中心。",
    "日本語のテキストを正しく分割できますか？",
    "한국어 문장도 잘 처리되어야 합니다.",
    "العربية لغة جميلة وغنية بالمفردات.",
    "हिंदी भारत की राजभाषा है।",
    "አማርኛ በኢትዮጵያ ውስጥ የሚነገር ቋንቋ ነው።",
    "မြန်မာဘာသာစကား ကို ရေးပါ",
    "Emoji: 🙂👍🏽 👨‍👩‍👧‍👦 🇪🇺 ok 🎉",
    "  leading and  double  spaces  ",
    "x n't ' ' ' do not a ' b ' s i ' m we ' re",
    "It's a test. Don't stop! Is it ? Yes , it is .",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ✓ 中文字符 ꦗꦮ ᚠᚢᚦ",
];

fn corpus() -> Vec<String> {
    // The first half, many times: the second half brings characters the
    // models have never seen (bytes, unknown tokens).
    LINES[..8]
        .iter()
        .flat_map(|l| std::iter::repeat_n(l.to_string(), 5))
        .collect()
}

fn bpe_model() -> BpeModel {
    let counts = Counter::new(Pattern::Cl100k, vec![])
        .unwrap()
        .count_texts(&corpus())
        .unwrap();
    let settings = TrainerSettings {
        vocab_size: 256 + 150,
        min_frequency: 1,
        special_tokens: vec!["<|end|>".into()],
        max_token_bytes: None,
        pattern: Pattern::Cl100k,
    };
    bpe::train(counts, &settings, &Progress::silent()).unwrap()
}

fn wordpiece_model() -> WordPieceModel {
    let model = WordPieceSettings::default();
    let counts = Counter::bert(BertNormalizer::uncased(), vec![])
        .unwrap()
        .count_texts(&corpus())
        .unwrap();
    let settings = WordPieceTrainerSettings {
        vocab_size: 300,
        min_frequency: 1,
        limit_alphabet: None,
        model,
    };
    wordpiece::train(counts, &settings, &Progress::silent()).unwrap()
}

fn unigram_model() -> UnigramModel {
    let settings = UnigramTrainerSettings {
        byte_fallback: true,
        special_tokens: vec!["<s>".into(), "</s>".into()],
        ..UnigramTrainerSettings::new(400, Whitespace::default())
    };
    let counts = Counter::sentencepiece(settings.whitespace, vec![])
        .unwrap()
        .count_texts(&corpus())
        .unwrap();
    unigram::train(counts, &settings, &Progress::silent()).unwrap()
}

/// Streams `ids`: everything returned is at all times the start of the
/// whole decoding (no U+FFFD for a cut character, nothing to take back),
/// and with `flush` all of it.
fn check_stream(ids: &[u32], lookahead: usize, decode: impl Fn(&[u32]) -> Result<String>) {
    let whole = decode(ids).unwrap();
    let mut stream = DecodeStream::with_lookahead(lookahead);
    let mut got = String::new();
    for &id in ids {
        let piece = stream.step(id, &decode).unwrap();
        // The window slides: it stays short however long the sequence.
        assert!(
            stream.ids.len() < CONTEXT + lookahead + MAX_WAIT + SLACK,
            "{:?}",
            stream
        );
        if let Some(piece) = piece {
            assert!(!piece.is_empty());
            got.push_str(&piece);
            assert!(
                whole.starts_with(&got),
                "{got:?} is not the start of {whole:?}"
            );
        }
    }
    got.push_str(&stream.flush(&decode).unwrap());
    assert_eq!(got, whole, "ids {ids:?}");
}

/// The lines, one by one and all together (a long sequence, so that the
/// window slides).
fn sequences(encode: impl Fn(&str) -> Vec<u32>) -> Vec<Vec<u32>> {
    let mut out: Vec<Vec<u32>> = LINES.iter().map(|l| encode(l)).collect();
    out.push(encode(&LINES.join(" ")));
    out
}

#[test]
fn stream_bpe() {
    let m = bpe_model();
    let decode = |ids: &[u32]| Ok(String::from_utf8_lossy(&m.decode_bytes(ids)?).into_owned());
    let by_decoder = |ids: &[u32]| {
        let tokens = ids
            .iter()
            .map(|&i| m.token_bytes(i).map(<[u8]>::to_vec))
            .collect::<Result<_>>()?;
        decoder(r#"{"type":"ByteLevel"}"#).decode(tokens)
    };
    let preset = preset(Model::Bpe(Arc::new(bpe_model())));
    for ids in sequences(|l| preset.ids(l, &AllowedSpecial::None)) {
        assert_eq!(decode(&ids).unwrap(), by_decoder(&ids).unwrap());
        check_stream(&ids, 0, decode);
        check_stream(&ids, 0, by_decoder);
    }
    // An id that the decoding refuses leaves the stream as it was.
    let mut stream = DecodeStream::new();
    assert_eq!(
        stream
            .step(m.token_id(b"a").unwrap(), decode)
            .unwrap()
            .as_deref(),
        Some("a")
    );
    assert!(matches!(
        stream.step(1 << 30, decode),
        Err(Error::UnknownTokenId { .. })
    ));
    assert_eq!(
        stream
            .step(m.token_id(b"b").unwrap(), decode)
            .unwrap()
            .as_deref(),
        Some("b")
    );
    // A character comes out whole, as soon as its last byte is there.
    let ids = preset.ids("中", &AllowedSpecial::None);
    assert_eq!(ids.len(), 3, "cut into bytes");
    let mut stream = DecodeStream::new();
    let steps: Vec<_> = ids
        .iter()
        .map(|&id| stream.step(id, decode).unwrap())
        .collect();
    assert_eq!(steps, [None, None, Some("中".to_owned())]);
}

#[test]
fn stream_real_replacement_characters() {
    let m = bpe_model();
    let decode = |ids: &[u32]| Ok(String::from_utf8_lossy(&m.decode_bytes(ids)?).into_owned());
    let byte = |b: u8| m.token_id(&[b]).unwrap();
    let a = byte(b'a');
    // FF never is UTF-8; E3 E3 81: the first E3 is cut short for good.
    let ids = [
        a,
        byte(0xFF),
        a,
        byte(0xE3),
        byte(0xE3),
        byte(0x81),
        byte(0x82),
        a,
        byte(0xF0),
        byte(0x9F),
    ];
    check_stream(&ids, 0, decode);
    // A real U+FFFD comes out once 3 more tokens have come.
    let mut stream = DecodeStream::new();
    let mut got = String::new();
    for id in [
        a,
        byte(0xFF),
        byte(0xFF),
        byte(0xFF),
        byte(0xFF),
        byte(0xFF),
    ] {
        got.extend(stream.step(id, decode).unwrap());
    }
    assert!(got.starts_with("a\u{FFFD}\u{FFFD}"), "{got:?}");
    got.push_str(&stream.flush(decode).unwrap());
    assert_eq!(got, "a\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}\u{FFFD}");
    // Many of them at once: all but the last 3 at once.
    let mut stream = DecodeStream::new();
    let many = m.token_id(b"\xFF").unwrap();
    let mut got = String::new();
    for _ in 0..10 {
        got.extend(stream.step(many, decode).unwrap());
    }
    got.push_str(&stream.flush(decode).unwrap());
    assert_eq!(got, "\u{FFFD}".repeat(10));
}

#[test]
fn stream_wordpiece() {
    let m = wordpiece_model();
    let decode = |ids: &[u32]| m.decode(ids, true);
    let raw = |ids: &[u32]| m.decode(ids, false);
    let d = Decoder::WordPiece {
        prefix: "##".into(),
        cleanup: true,
        each_token: false,
    };
    let by_decoder = |ids: &[u32]| {
        let tokens = ids
            .iter()
            .map(|&i| m.token(i).map(|t| t.as_bytes().to_vec()))
            .collect::<Result<_>>()?;
        d.decode(tokens)
    };
    let preset = preset(Model::WordPiece(Arc::new(wordpiece_model())));
    let enc = |l: &str| preset.ids(l, &AllowedSpecial::None);
    for ids in sequences(enc) {
        assert_eq!(decode(&ids).unwrap(), by_decoder(&ids).unwrap());
        check_stream(&ids, d.stream_lookahead(), decode);
        check_stream(&ids, d.stream_lookahead(), by_decoder);
        check_stream(&ids, 0, raw);
    }
}

#[test]
fn stream_unigram() {
    let m = unigram_model();
    let decode = |ids: &[u32]| m.decode(ids);
    let pieces = |ids: &[u32]| -> Result<Vec<Vec<u8>>> {
        ids.iter()
            .map(|&i| {
                m.pieces()
                    .get(i as usize)
                    .map(|p| p.text.as_bytes().to_vec())
                    .ok_or(Error::UnknownTokenId {
                        id: i,
                        vocab_size: m.pieces().len(),
                    })
            })
            .collect()
    };
    let metaspace = decoder(r#"{"type":"Metaspace"}"#);
    let llama = llama();
    let mut bytes_seen = 0;
    let preset = preset(Model::Unigram(Arc::new(unigram_model())));
    for ids in sequences(|l| preset.ids(l, &AllowedSpecial::None)) {
        bytes_seen += ids
            .iter()
            .filter(|&&i| m.pieces()[i as usize].text.starts_with("<0x"))
            .count();
        check_stream(&ids, 0, decode);
        check_stream(&ids, 0, |ids| metaspace.decode(pieces(ids)?));
        check_stream(&ids, 0, |ids| llama.decode(pieces(ids)?));
    }
    assert!(bytes_seen > 20, "the lines use byte pieces");
    // Control pieces in the middle (they decode to nothing).
    let mut ids = preset.ids(LINES[0], &AllowedSpecial::None);
    ids.splice(3..3, [1, 2, 1]);
    ids.extend([2, 2]);
    check_stream(&ids, 0, decode);
}
