//! Counts in transit between the processes of one job (a Ray worker's
//! table, sent to the driver): the table's shards as they lie.
//!
//! A count file (`file.rs`) sorts its pieces, so that the same counts
//! always make the same bytes, and a reader adds the sorted pieces into a
//! table at random places. For the two tables of a million pieces that
//! two Ray workers send after counting 300 MB, that took 0.2-0.3 s to
//! write on each worker and as long again to add on the driver: a quarter
//! of the job, after the counting, on one core each.
//!
//! Here nothing is sorted. The table is written shard by shard, each
//! shard's pieces in the order of their slots, with the key it hashes
//! with. The workers of a job count with the driver's key
//! (`PieceTable::with_key`), so their pieces lie in the shards of the
//! driver's table, and within a shard in the order of their places there
//! whatever its size: the driver fills each shard on its own core,
//! sweeping through its slots rather than missing the cache once a piece.
//! Parts hashed with another key are still added, piece by piece.
//!
//! Nothing here is meant to be kept: the bytes depend on the key and on
//! the order of the slots. They are checked as a count file is (a
//! checksum, lengths, counts, sums, and every piece in its shard), and
//! every fault is named.
//!
//! Layout (integers little-endian; "varint" is unsigned LEB128):
//! 1. the 16 bytes `POLYTOK-SHARDS\0\x01` (name, version 1);
//! 2. the count file's header (a `u32` length, then JSON);
//! 3. a `u64`, the key of the table;
//! 4. for each of `SHARDS + 1` sections (the shards', then one for the
//!    pieces too long for a slot), two `u64`s: its length in bytes and
//!    the pieces it holds;
//! 5. the sections: per piece, its varint length, its bytes, its varint
//!    count (at least 1);
//! 6. a `u32`, the CRC-32 (IEEE) of everything before it.

use rayon::prelude::*;

use super::file::{open, put_varint, seal, start, Format, Header, Records};
use super::table::SHARDS;
use super::{Counter, PieceCounts, PieceTable};
use crate::error::{Error, Result};

const FORMAT: Format = Format {
    magic: b"POLYTOK-SHARDS\0\x01",
    name: "count transfer",
};

/// The sections: the shards, then the pieces too long for a slot.
const SECTIONS: usize = SHARDS + 1;

/// The bytes that carry `counts`, made by `counter`, to another process.
pub fn write(counter: &Counter, counts: &PieceCounts) -> Vec<u8> {
    let table = &counts.pieces;
    // Each section with its pieces and occurrences, the shards' on all
    // cores.
    let mut sections: Vec<(Vec<u8>, u64, u64)> = table
        .shards()
        .par_iter()
        .map(|shard| section(shard.iter()))
        .collect();
    sections.push(section(table.outsized()));
    let occurrences = sections
        .iter()
        .map(|&(_, _, occurrences)| occurrences)
        .sum();
    let mut out = start(&FORMAT, counter, counts, occurrences);
    out.extend_from_slice(&table.key().to_le_bytes());
    for (bytes, pieces, _) in &sections {
        out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        out.extend_from_slice(&pieces.to_le_bytes());
    }
    for (bytes, _, _) in &sections {
        out.extend_from_slice(bytes);
    }
    seal(out)
}

/// A section's bytes, pieces and occurrences.
fn section<'a>(pieces: impl Iterator<Item = (&'a [u8], u64)>) -> (Vec<u8>, u64, u64) {
    let mut out = Vec::new();
    let (mut n, mut occurrences) = (0, 0);
    for (piece, count) in pieces {
        put_varint(&mut out, piece.len() as u64);
        out.extend_from_slice(piece);
        put_varint(&mut out, count);
        n += 1;
        occurrences += count;
    }
    (out, n, occurrences)
}

/// One part, checked and cut into its sections.
struct Part<'a> {
    header: Header,
    key: u64,
    sections: Vec<Section<'a>>,
    source: String,
}

struct Section<'a> {
    bytes: &'a [u8],
    /// Where it starts in the part (errors name it).
    offset: usize,
    /// Pieces it holds, as the index says.
    pieces: u64,
}

impl<'a> Part<'a> {
    fn open(data: &'a [u8], source: String) -> Result<Part<'a>> {
        let (body, header) = open(data, &FORMAT, &source)?;
        let end = data.len() - 4;
        let mut at = end - body.len();
        let damaged = |what: String| Error::TokenizerFile(format!("{source}: {what}"));
        let word = |at: usize| {
            data[..end]
                .get(at..at + 8)
                .map(|bytes| u64::from_le_bytes(bytes.try_into().expect("eight bytes")))
                .ok_or_else(|| damaged("truncated before its pieces".into()))
        };
        let key = word(at)?;
        let index = at + 8;
        at = index + 16 * SECTIONS;
        let mut sections = Vec::with_capacity(SECTIONS);
        for i in 0..SECTIONS {
            let (length, pieces) = (word(index + 16 * i)?, word(index + 16 * i + 8)?);
            let bytes = usize::try_from(length)
                .ok()
                .and_then(|length| data[..end].get(at..at.checked_add(length)?))
                .ok_or_else(|| damaged(format!("section {i} (at byte {at}) runs past the end")))?;
            sections.push(Section {
                bytes,
                offset: at,
                pieces,
            });
            at += bytes.len();
        }
        if at != end {
            return Err(damaged(format!(
                "{} bytes after its last section",
                end - at
            )));
        }
        Ok(Part {
            header,
            key,
            sections,
            source,
        })
    }

    /// Hands each piece of section `i` to `add`; the occurrences the
    /// section holds.
    fn read_section(&self, i: usize, mut add: impl FnMut(&'a [u8], u64)) -> Result<u64> {
        let section = &self.sections[i];
        let mut records = Records {
            data: section.bytes,
            at: 0,
        };
        let (mut pieces, mut occurrences) = (0u64, 0u64);
        while records.at < records.data.len() {
            let (at, piece_number) = (section.offset + records.at, pieces);
            let bad = |what: &str| {
                Error::TokenizerFile(format!(
                    "{}: section {i}, piece {piece_number} (at byte {at}): {what}",
                    self.source
                ))
            };
            let length = records
                .varint()
                .and_then(|length| usize::try_from(length).ok())
                .ok_or_else(|| bad("truncated or bad length"))?;
            let piece = records
                .bytes(length)
                .ok_or_else(|| bad("truncated piece"))?;
            let count = records
                .varint()
                .ok_or_else(|| bad("truncated or bad count"))?;
            if piece.is_empty() || count == 0 {
                return Err(bad("an empty piece or a count of 0"));
            }
            add(piece, count);
            pieces += 1;
            occurrences = occurrences
                .checked_add(count)
                .ok_or_else(|| bad("counts overflow"))?;
        }
        if pieces != section.pieces {
            return Err(Error::TokenizerFile(format!(
                "{}: section {i} holds {pieces} pieces, its index says {}",
                self.source, section.pieces
            )));
        }
        Ok(occurrences)
    }

    /// A `TokenizerFile` error unless the part holds the occurrences its
    /// header announces (`occurrences`, section by section), and as many
    /// pieces.
    fn check_sums(&self, mut occurrences: impl Iterator<Item = u64>) -> Result<()> {
        let pieces: u64 = self.sections.iter().map(|section| section.pieces).sum();
        let occurrences = occurrences.try_fold(0u64, |sum, n| sum.checked_add(n));
        let header = &self.header;
        if pieces != header.pieces || occurrences != Some(header.occurrences) {
            return Err(Error::TokenizerFile(format!(
                "{}: it holds {pieces} pieces and {} occurrences, its header says {} and {}",
                self.source,
                occurrences.map_or("too many".into(), |n| n.to_string()),
                header.pieces,
                header.occurrences
            )));
        }
        Ok(())
    }
}

/// The sum of the counts that `parts` carry (`source` names them in
/// errors, each with its index): the counter that made them (an
/// `InvalidArgument` names the setting where two differ), and the counts,
/// in a table of the first part's key.
pub fn read(parts: &[&[u8]], source: &str) -> Result<(Counter, PieceCounts)> {
    let mut parts = open_all(parts, source)?;
    let Some(first) = parts.first() else {
        return Err(Error::invalid("no counts to read"));
    };
    let mut counts = PieceCounts {
        pieces: PieceTable::with_key(first.key, 0),
        ..PieceCounts::default()
    };
    add_parts(&mut counts, &first.header.counter, &parts)?;
    Ok((parts.swap_remove(0).header.counter, counts))
}

/// Adds the counts that `parts` carry into `counts`, made by `counter`
/// (`source` names the parts in errors, each with its index; a part made
/// by another counter is an `InvalidArgument` naming the setting that
/// differs). Parts hashed with the key of `counts` are added shard by
/// shard on all cores. Nothing is added unless every part is sound.
pub fn add(
    counts: &mut PieceCounts,
    counter: &Counter,
    parts: &[&[u8]],
    source: &str,
) -> Result<()> {
    add_parts(counts, counter, &open_all(parts, source)?)
}

fn open_all<'a>(parts: &[&'a [u8]], source: &str) -> Result<Vec<Part<'a>>> {
    parts
        .par_iter()
        .enumerate()
        .map(|(i, data)| Part::open(data, format!("{source} {i}")))
        .collect()
}

fn add_parts(counts: &mut PieceCounts, counter: &Counter, parts: &[Part]) -> Result<()> {
    for part in parts {
        if let Some(difference) = counter.difference(&part.header.counter) {
            return Err(Error::invalid(difference));
        }
    }
    // Every section read once to check it, on all cores, before anything
    // is added: then adding cannot fail half way.
    let occurrences = parts
        .par_iter()
        .flat_map(|part| (0..SECTIONS).into_par_iter().map(move |i| (part, i)))
        .map(|(part, i)| part.read_section(i, |_, _| {}))
        .collect::<Result<Vec<u64>>>()?;
    for (part, sums) in parts.iter().zip(occurrences.chunks(SECTIONS)) {
        part.check_sums(sums.iter().copied())?;
    }
    let key = counts.pieces.key();
    let (aligned, rekeyed): (Vec<&Part>, Vec<&Part>) =
        parts.iter().partition(|part| part.key == key);
    // Each shard's own pieces, in the order of their places; a piece that
    // is not (a part altered behind its checksum) is added with the rest.
    let misplaced: Vec<Vec<(&[u8], u64)>> = counts.pieces.fill_shards(
        // Room for the most pieces already there or in one part, and a
        // quarter of the others (counts of one corpus share most pieces).
        |i, present| {
            let sizes = aligned.iter().map(|part| part.sections[i].pieces as usize);
            let (largest, all) = sizes.fold((present, present), |(m, s), n| (m.max(n), s + n));
            largest + (all - largest) / 4
        },
        |i, filler| {
            let mut misplaced = Vec::new();
            for part in &aligned {
                part.read_section(i, |piece, count| {
                    if !filler.add(piece, count) {
                        misplaced.push((piece, count));
                    }
                })?;
            }
            Ok::<_, Error>(misplaced)
        },
    )?;
    // The pieces too long for a slot, and the parts of other keys, are
    // added piece by piece.
    let mut lists = misplaced;
    for part in &aligned {
        let mut outsized = Vec::new();
        part.read_section(SHARDS, |piece, count| outsized.push((piece, count)))?;
        lists.push(outsized);
    }
    for part in rekeyed {
        let mut list = Vec::new();
        for i in 0..SECTIONS {
            part.read_section(i, |piece, count| list.push((piece, count)))?;
        }
        lists.push(list);
    }
    counts
        .pieces
        .add_lists(&lists.iter().map(Vec::as_slice).collect::<Vec<_>>());
    for part in parts {
        counts.text_bytes += part.header.text_bytes;
        counts.dropped += part.header.dropped;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counting::table::MAX_LEN;
    use crate::text::pattern::Pattern;

    fn counter() -> Counter {
        Counter::new(Pattern::Cl100k, vec!["<|endoftext|>".into()]).unwrap()
    }

    /// Counts of `texts` in a table hashing with `key`, with a piece too
    /// long for a slot.
    fn counted(key: u64, texts: &[&str]) -> PieceCounts {
        let mut counts = PieceCounts {
            pieces: PieceTable::with_key(key, 0),
            ..PieceCounts::default()
        };
        counter()
            .count_many(texts.iter().copied().map(Ok), &mut counts)
            .unwrap();
        counts.pieces.add(&vec![b'x'; MAX_LEN + 1], 2);
        counts
    }

    fn texts(part: usize) -> Vec<String> {
        (0..2000)
            .map(|i| {
                format!(
                    "Text {i} of part {part}: naïve café, 日本語 {} and more words",
                    i * 7919 % 1000
                )
            })
            .collect()
    }

    fn part(key: u64, n: usize) -> PieceCounts {
        let texts = texts(n);
        counted(key, &texts.iter().map(String::as_str).collect::<Vec<_>>())
    }

    #[test]
    fn parts_add_up_whatever_their_keys() {
        let parts = [part(1, 0), part(1, 1), part(2, 2), part(3, 1)];
        let mut expected = PieceCounts::default();
        for part in &parts {
            expected.add(part);
        }
        let data: Vec<Vec<u8>> = parts.iter().map(|part| write(&counter(), part)).collect();
        let (read_counter, read_counts) =
            read(&data.iter().map(Vec::as_slice).collect::<Vec<_>>(), "part").unwrap();
        assert_eq!(read_counter.description(), counter().description());
        assert_eq!(read_counts.pieces.key(), 1);
        assert!(read_counts.pieces == expected.pieces);
        assert_eq!(read_counts.text_bytes, expected.text_bytes);
        assert_eq!(read_counts.pieces.get(&vec![b'x'; MAX_LEN + 1]), Some(8));
        // One part alone comes back as it went.
        let (_, alone) = read(&[&data[2]], "part").unwrap();
        assert!(alone.pieces == parts[2].pieces);
        assert_eq!(alone.pieces.key(), 2);
    }

    /// `data` with its checksum made good again after `damage`.
    fn resealed(data: &[u8], damage: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut body = data[..data.len() - 4].to_vec();
        damage(&mut body);
        seal(body)
    }

    #[test]
    fn every_damage_is_named() {
        let counts = counted(5, &["one two three two one"]);
        let data = write(&counter(), &counts);
        let message = |data: &[u8]| read(&[data], "worker").err().unwrap().to_string();
        assert!(message(b"hello").contains("worker 0: not a polytok count transfer"));
        let mut version = data.clone();
        version[15] = 2;
        assert!(message(&version).contains("count transfer version 2"));
        assert!(message(&data[..data.len() - 1]).contains("checksum"));
        // Where the index and the sections start.
        let header = u32::from_le_bytes(data[16..20].try_into().unwrap()) as usize;
        let index = 20 + header + 8;
        let sections = index + 16 * SECTIONS;
        let first_full = (0..SHARDS)
            .find(|&i| data[index + 16 * i + 8] != 0)
            .unwrap();
        let start_of = |i: usize| {
            sections
                + (0..i)
                    .map(|k| {
                        u64::from_le_bytes(
                            data[index + 16 * k..index + 16 * k + 8].try_into().unwrap(),
                        ) as usize
                    })
                    .sum::<usize>()
        };
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                resealed(&data, |d| d[index + 16 * first_full + 8] += 1),
                "its index says",
            ),
            (
                resealed(&data, |d| d[index + 16 * SHARDS] -= 1),
                "1 bytes after its last section",
            ),
            (
                resealed(&data, |d| d[index + 16 * first_full + 1] = 0xff),
                "runs past the end",
            ),
            (
                // The first piece's count: its length byte, its bytes.
                resealed(&data, |d| {
                    let at = start_of(first_full);
                    let length = d[at] as usize;
                    d[at + 1 + length] = 0;
                }),
                "a count of 0",
            ),
            (
                resealed(&data, |d| {
                    let at = start_of(first_full);
                    let length = d[at] as usize;
                    d[at + 1 + length] += 1;
                }),
                "its header says",
            ),
        ];
        for (data, what) in cases {
            let e = message(&data);
            assert!(
                e.starts_with("worker 0: ") && e.contains(what),
                "{what}: {e}"
            );
        }
        // Every shard's pieces in the first section: each is still counted,
        // in its own shard.
        let merged = resealed(&data, |d| {
            let (mut bytes, mut pieces) = (0u64, 0u64);
            for i in 0..SHARDS {
                let entry = index + 16 * i;
                bytes += u64::from_le_bytes(d[entry..entry + 8].try_into().unwrap());
                pieces += u64::from_le_bytes(d[entry + 8..entry + 16].try_into().unwrap());
                d[entry..entry + 16].fill(0);
            }
            d[index..index + 8].copy_from_slice(&bytes.to_le_bytes());
            d[index + 8..index + 16].copy_from_slice(&pieces.to_le_bytes());
        });
        let (_, read_back) = read(&[&merged], "worker").unwrap();
        assert!(read_back.pieces == counts.pieces);
    }

    #[test]
    fn nothing_is_added_unless_every_part_is_sound() {
        let counts = counted(5, &["one two three two one"]);
        let good = write(&counter(), &counts);
        let bad = resealed(&good, |d| {
            let last = d.len() - 1;
            d[last] = 0;
        });
        let mut total = counted(5, &["four"]);
        let before = total.clone();
        assert!(add(&mut total, &counter(), &[&good, &bad], "worker").is_err());
        assert!(total.pieces == before.pieces && total.text_bytes == before.text_bytes);
        add(&mut total, &counter(), &[&good, &good], "worker").unwrap();
        assert_eq!(total.pieces.get(b" two"), Some(4));
        assert_eq!(total.text_bytes, before.text_bytes + 2 * counts.text_bytes);
    }

    #[test]
    fn parts_made_another_way_are_refused_by_name() {
        let other = Counter::new(Pattern::O200k, vec!["<|endoftext|>".into()]).unwrap();
        let counts = counted(1, &["a b"]);
        let (a, b) = (write(&counter(), &counts), write(&other, &counts));
        let e = read(&[&a, &b], "worker").err().unwrap();
        assert!(
            matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("pattern"),
            "{e}"
        );
        assert!(read(&[], "worker").is_err());
    }
}
