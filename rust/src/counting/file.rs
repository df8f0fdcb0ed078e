//! The count file: piece counts with the counter that made them, compact
//! and checked.
//!
//! Layout (integers little-endian; "varint" is unsigned LEB128):
//! 1. the 16 bytes `POLYTOK-COUNTS\0\x01` (name, version 1);
//! 2. a `u32`, the header's length, then the header: UTF-8 JSON with
//!    `counter` (how text was cut: `Counter::description`), `text_bytes`,
//!    `pieces` (records that follow), `occurrences` (their counts' sum) and
//!    `dropped` (`{"pieces", "occurrences"}` left out by pruning);
//! 3. one record per piece, in increasing byte order: varint bytes shared
//!    with the previous piece, varint length of the rest, the rest, varint
//!    count (at least 1). Sorted pieces share long prefixes, so a table of
//!    pieces takes about half its raw size;
//! 4. a `u32`, the CRC-32 (IEEE) of everything before it.
//!
//! The same counts always make the same bytes. A reader checks everything
//! (name, version, lengths, order, counts, sums, checksum) and names the
//! file and what is wrong.

use serde_json::json;

use super::{Counter, Dropped, PieceCounts, PieceTable};
use crate::error::{Error, Result};

const MAGIC: &[u8; 16] = b"POLYTOK-COUNTS\0\x01";

/// A format of counts: its first 16 bytes (a name, a zero byte, the
/// version) and what errors call it.
pub(super) struct Format {
    pub magic: &'static [u8; 16],
    pub name: &'static str,
}

const COUNT_FILE: Format = Format {
    magic: MAGIC,
    name: "count file",
};

pub(super) fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// `format`'s first 16 bytes and the header of `counts` (which hold
/// `occurrences`), made by `counter`: a `u32` length, then the JSON.
pub(super) fn start(
    format: &Format,
    counter: &Counter,
    counts: &PieceCounts,
    occurrences: u64,
) -> Vec<u8> {
    let header = json!({
        "counter": counter.description(),
        "text_bytes": counts.text_bytes,
        "pieces": counts.len(),
        "occurrences": occurrences,
        "dropped": {"pieces": counts.dropped.pieces, "occurrences": counts.dropped.occurrences},
    })
    .to_string();
    let mut out = Vec::with_capacity(64 + header.len() + counts.len() * 12);
    out.extend_from_slice(format.magic);
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out
}

/// Seals bytes begun by `start`: the checksum of all of them after them.
pub(super) fn seal(mut out: Vec<u8>) -> Vec<u8> {
    let checksum = crc32fast::hash(&out);
    out.extend_from_slice(&checksum.to_le_bytes());
    out
}

/// The bytes of a count file of `counts`, made by `counter`.
pub fn write(counter: &Counter, counts: &PieceCounts) -> Vec<u8> {
    let pieces = counts.sorted();
    let occurrences = pieces.iter().map(|&(_, count)| count).sum();
    let mut out = start(&COUNT_FILE, counter, counts, occurrences);
    let mut previous: &[u8] = &[];
    for (piece, count) in pieces {
        let shared = previous
            .iter()
            .zip(piece)
            .take_while(|(a, b)| a == b)
            .count();
        put_varint(&mut out, shared as u64);
        put_varint(&mut out, (piece.len() - shared) as u64);
        out.extend_from_slice(&piece[shared..]);
        put_varint(&mut out, count);
        previous = piece;
    }
    seal(out)
}

/// Reads a count file's bytes (`source` names it in errors): the counter
/// that made the counts, and the counts.
pub fn read(data: &[u8], source: &str) -> Result<(Counter, PieceCounts)> {
    let (counter, pieces) = read_sorted(data, source)?;
    Ok((counter, pieces.into_counts()))
}

/// A count file's pieces as it holds them, in byte order, in one buffer:
/// decoded without an allocation per piece, then counted into a table.
struct SortedPieces {
    bytes: Vec<u8>,
    /// Where each piece ends in `bytes`.
    ends: Vec<usize>,
    counts: Vec<u64>,
    text_bytes: u64,
    dropped: Dropped,
}

impl SortedPieces {
    fn pieces(&self) -> impl Iterator<Item = (&[u8], u64)> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(&self.ends)
            .zip(&self.counts)
            .map(|((start, &end), &count)| (&self.bytes[start..end], count))
    }

    /// The pieces counted into a table sized for them.
    fn into_counts(self) -> PieceCounts {
        let mut counts = PieceCounts {
            pieces: PieceTable::with_capacity(self.counts.len()),
            text_bytes: self.text_bytes,
            dropped: self.dropped,
        };
        let mut tally = counts.pieces.tally();
        for (piece, count) in self.pieces() {
            tally.add_count(piece, count);
        }
        drop(tally);
        counts
    }
}

/// What a header says of the counts that follow it.
pub(super) struct Header {
    pub counter: Counter,
    pub text_bytes: u64,
    pub pieces: u64,
    pub occurrences: u64,
    pub dropped: Dropped,
}

/// Checks the bytes of `format` (`source` names them in errors): its
/// name, version and checksum, and reads its header. The bytes between
/// the header and the checksum, and the header.
pub(super) fn open<'a>(
    data: &'a [u8],
    format: &Format,
    source: &str,
) -> Result<(&'a [u8], Header)> {
    let damaged = |what: String| Error::TokenizerFile(format!("{source}: {what}"));
    let magic = format.magic;
    let version = magic.len() - 1;
    if data.len() < magic.len() || data[..version] != magic[..version] {
        let name = String::from_utf8_lossy(&magic[..version - 1]);
        return Err(damaged(format!(
            "not a polytok {} (it does not start with {name})",
            format.name
        )));
    }
    if data[version] != magic[version] {
        return Err(damaged(format!(
            "{} version {} (this polytok reads version {})",
            format.name, data[version], magic[version]
        )));
    }
    if data.len() < magic.len() + 8 {
        return Err(damaged("truncated: the file ends inside its header".into()));
    }
    let (body, checksum) = data.split_at(data.len() - 4);
    let checksum = u32::from_le_bytes(checksum.try_into().expect("four bytes"));
    if crc32fast::hash(body) != checksum {
        return Err(damaged(
            "damaged: its checksum does not match its contents (truncated or altered)".into(),
        ));
    }
    let mut at = magic.len();
    let header_len = u32::from_le_bytes(body[at..at + 4].try_into().expect("four bytes")) as usize;
    at += 4;
    let header = body
        .get(at..at + header_len)
        .ok_or_else(|| damaged("truncated: the file ends inside its header".into()))?;
    at += header_len;
    let header: serde_json::Value = serde_json::from_slice(header)
        .map_err(|e| damaged(format!("its header is not valid JSON: {e}")))?;
    let number = |name: &str| {
        header
            .get(name)
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| damaged(format!("its header lacks the whole number {name:?}")))
    };
    let dropped_field = |name: &str| {
        header["dropped"]
            .get(name)
            .and_then(serde_json::Value::as_u64)
            .ok_or_else(|| damaged(format!("its header lacks dropped.{name}")))
    };
    let counter = Counter::from_description(&header["counter"])
        .map_err(|e| damaged(format!("its counter: {e}")))?;
    let header = Header {
        counter,
        text_bytes: number("text_bytes")?,
        pieces: number("pieces")?,
        occurrences: number("occurrences")?,
        dropped: Dropped {
            pieces: dropped_field("pieces")?,
            occurrences: dropped_field("occurrences")?,
        },
    };
    Ok((&body[at..], header))
}

/// Reads a count file's bytes as `read` does, its pieces left as the file
/// holds them.
fn read_sorted(data: &[u8], source: &str) -> Result<(Counter, SortedPieces)> {
    let damaged = |what: String| Error::TokenizerFile(format!("{source}: {what}"));
    let (body, header) = open(data, &COUNT_FILE, source)?;
    // Offsets in errors count from the file's start.
    let at = data.len() - 4 - body.len();
    let body = &data[..data.len() - 4];
    let n_pieces = header.pieces;
    let capacity = n_pieces.min(body.len() as u64) as usize;
    let mut pieces = SortedPieces {
        bytes: Vec::with_capacity(2 * body.len()),
        ends: Vec::with_capacity(capacity),
        counts: Vec::with_capacity(capacity),
        text_bytes: header.text_bytes,
        dropped: header.dropped,
    };
    let mut reader = Records { data: body, at };
    let mut previous = 0..0;
    let mut occurrences = 0u64;
    for record in 0..n_pieces {
        let start = reader.at;
        let bad = |what: &str| damaged(format!("record {record} (at byte {start}): {what}"));
        let shared = reader
            .varint()
            .ok_or_else(|| bad("truncated or bad length"))? as usize;
        let rest = reader
            .varint()
            .ok_or_else(|| bad("truncated or bad length"))? as usize;
        if shared > previous.len() {
            return Err(bad("shares more bytes than the previous piece has"));
        }
        let tail = reader.bytes(rest).ok_or_else(|| bad("truncated piece"))?;
        let count = reader
            .varint()
            .ok_or_else(|| bad("truncated or bad count"))?;
        if shared + tail.len() == 0 || count == 0 {
            return Err(bad("an empty piece or a count of 0"));
        }
        // With the shared bytes equal, the order is that of what follows.
        if record > 0 && tail <= &pieces.bytes[previous.start + shared..previous.end] {
            return Err(bad("pieces out of order or repeated"));
        }
        occurrences = occurrences
            .checked_add(count)
            .ok_or_else(|| bad("counts overflow"))?;
        let start = pieces.bytes.len();
        pieces
            .bytes
            .extend_from_within(previous.start..previous.start + shared);
        pieces.bytes.extend_from_slice(tail);
        previous = start..pieces.bytes.len();
        pieces.ends.push(previous.end);
        pieces.counts.push(count);
    }
    if reader.at != body.len() {
        return Err(damaged(format!(
            "{} bytes after the {n_pieces} pieces its header announces",
            body.len() - reader.at
        )));
    }
    if occurrences != header.occurrences {
        return Err(damaged(format!(
            "its pieces hold {occurrences} occurrences, its header says {}",
            header.occurrences
        )));
    }
    Ok((header.counter, pieces))
}

/// A cursor over the records.
pub(super) struct Records<'a> {
    pub data: &'a [u8],
    pub at: usize,
}

impl<'a> Records<'a> {
    pub fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.data.get(self.at)?;
            self.at += 1;
            value |= ((byte & 0x7F) as u64).checked_shl(shift)?;
            if byte < 0x80 {
                return Some(value);
            }
        }
        None
    }

    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let bytes = self.data.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::pattern::Pattern;

    fn counted(texts: &[&str]) -> (Counter, PieceCounts) {
        let counter = Counter::new(Pattern::Cl100k, vec!["<|endoftext|>".into()]).unwrap();
        let counts = counter.count_texts(texts).unwrap();
        (counter, counts)
    }

    #[test]
    fn counts_survive_a_round_trip_byte_for_byte() {
        let (counter, mut counts) =
            counted(&["Hello world, hello again.", "naïve café\n\n  日本語 123456"]);
        counts.prune(8);
        let data = write(&counter, &counts);
        let (read_counter, read_counts) = read(&data, "x.counts").unwrap();
        assert_eq!(read_counter.description(), counter.description());
        assert_eq!(read_counts.pieces, counts.pieces);
        assert_eq!(read_counts.text_bytes, counts.text_bytes);
        assert_eq!(read_counts.dropped, counts.dropped);
        assert!(counts.dropped.pieces > 0);
        assert_eq!(write(&read_counter, &read_counts), data);
    }

    #[test]
    fn every_damage_is_named() {
        let (counter, counts) = counted(&["one two three two one"]);
        let data = write(&counter, &counts);
        let message = |data: &[u8]| read(data, "x.counts").err().unwrap().to_string();
        assert!(message(b"hello").contains("not a polytok count file"));
        let mut version = data.clone();
        version[15] = 2;
        assert!(message(&version).contains("version 2"));
        assert!(message(&data[..data.len() - 3]).contains("checksum"));
        let mut flipped = data.clone();
        let last = flipped.len() - 6;
        flipped[last] ^= 1;
        assert!(message(&flipped).contains("checksum"));
        assert!(message(&data[..20]).starts_with("x.counts: "));
    }

    /// A file of `records` (shared, rest, count) under a header that
    /// announces `pieces` and `occurrences`, with a valid checksum: damage
    /// that only the reader's checks behind the checksum can find.
    fn sealed(records: &[(u64, &[u8], u64)], pieces: u64, occurrences: u64) -> Vec<u8> {
        let (counter, _) = counted(&[]);
        let header = json!({
            "counter": counter.description(), "text_bytes": 0, "pieces": pieces,
            "occurrences": occurrences, "dropped": {"pieces": 0, "occurrences": 0},
        })
        .to_string();
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        for &(shared, rest, count) in records {
            put_varint(&mut out, shared);
            put_varint(&mut out, rest.len() as u64);
            out.extend_from_slice(rest);
            put_varint(&mut out, count);
        }
        let checksum = crc32fast::hash(&out);
        out.extend_from_slice(&checksum.to_le_bytes());
        out
    }

    #[test]
    fn damage_behind_a_valid_checksum_is_named() {
        let message = |data: Vec<u8>| read(&data, "x.counts").err().unwrap().to_string();
        let (good, _) = read(&sealed(&[(0, b"ab", 2), (1, b"c", 3)], 2, 5), "x.counts").unwrap();
        assert_eq!(good.description()["kind"], "pattern");
        let cases: [(Vec<u8>, &str); 6] = [
            (
                sealed(&[(0, b"ab", 2), (1, b"a", 3)], 2, 5),
                "record 1 (at byte",
            ),
            (
                sealed(&[(0, b"ab", 2), (2, b"", 3)], 2, 5),
                "out of order or repeated",
            ),
            (
                sealed(&[(0, b"ab", 2), (3, b"c", 3)], 2, 5),
                "shares more bytes",
            ),
            (sealed(&[(0, b"ab", 0)], 1, 0), "a count of 0"),
            (sealed(&[(0, b"ab", 2)], 2, 2), "truncated"),
            (sealed(&[(0, b"ab", 2)], 1, 7), "its header says 7"),
        ];
        for (data, what) in cases {
            let e = message(data);
            assert!(e.starts_with("x.counts: ") && e.contains(what), "{e}");
        }
        assert!(message(sealed(&[(0, b"ab", 2), (1, b"a", 3)], 2, 5)).contains("out of order"));
    }

    #[test]
    fn pruning_keeps_the_most_frequent_and_records_the_rest() {
        let (_, mut counts) = counted(&["a a a b b c"]);
        let total = counts.occurrences();
        counts.prune(2);
        assert_eq!(counts.len(), 2);
        assert_eq!(counts.occurrences() + counts.dropped.occurrences, total);
        assert!(counts.get(b" a").is_some());
    }
}
