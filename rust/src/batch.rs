//! Batch encoding on all cores, shared by every model.
//!
//! A batch is cut into chunks of texts; each chunk is encoded on one pool
//! thread into one reused buffer ([`IdRuns`]), with no vector per text,
//! and then handed to a `finish` step on that same thread (the Python layer
//! turns it into lists there, while the other threads go on encoding).
//! Paragraph-sized texts spend a tenth of their time in allocation when each
//! gets its own vector.

use std::cell::RefCell;

use rayon::prelude::*;

use crate::error::Result;

/// Texts per chunk, at least: smaller chunks cost more in scheduling than
/// they gain in balance.
const MIN_CHUNK: usize = 64;

/// A reused buffer above this many ids is dropped after its chunk, so that
/// one batch of huge texts does not hold its memory for good.
const KEEP_IDS: usize = 1 << 22;

/// The ids of a run of texts, one after another: text `i`'s are
/// `ids[ends[i - 1]..ends[i]]`.
#[derive(Default)]
pub struct IdRuns {
    ids: Vec<u32>,
    ends: Vec<usize>,
}

impl IdRuns {
    /// Appends one text's ids, which `encode` appends to the buffer it gets.
    #[inline]
    pub fn push(&mut self, encode: impl FnOnce(&mut Vec<u32>) -> Result<()>) -> Result<()> {
        encode(&mut self.ids)?;
        self.ends.push(self.ids.len());
        Ok(())
    }

    /// Each text's ids, in order.
    pub fn iter(&self) -> impl Iterator<Item = &[u32]> {
        self.ranges().map(|range| &self.ids[range])
    }

    /// Every text's ids, one text after another.
    pub fn all(&self) -> &[u32] {
        &self.ids
    }

    /// Where each text's ids lie in `all`, in order.
    pub fn ranges(&self) -> impl Iterator<Item = std::ops::Range<usize>> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(start, &end)| start..end)
    }

    fn clear(&mut self) {
        self.ids.clear();
        self.ends.clear();
    }

    fn release_if_large(&mut self) {
        if self.ids.capacity() > KEEP_IDS {
            *self = IdRuns::default();
        }
    }
}

thread_local! {
    /// Each pool thread's buffer, reused from chunk to chunk and batch to
    /// batch: a fresh one per chunk would cost page faults.
    static RUNS: RefCell<IdRuns> = RefCell::new(IdRuns::default());
}

/// Texts that a pool thread reads as `&str`, a run at a time: `&str` as they
/// are, strings as themselves, text in a fixed width per character
/// (`text::widths`, how the Python layer passes strings) turned into UTF-8
/// on that thread.
pub trait StrRun: Sync + Sized {
    /// Calls `read` with the texts of `run` as `&str`, in order.
    fn with_strs<R>(run: &[Self], read: impl FnOnce(&[&str]) -> R) -> R;
}

impl StrRun for &str {
    fn with_strs<R>(run: &[Self], read: impl FnOnce(&[&str]) -> R) -> R {
        read(run)
    }
}

impl StrRun for String {
    fn with_strs<R>(run: &[Self], read: impl FnOnce(&[&str]) -> R) -> R {
        read(&run.iter().map(String::as_str).collect::<Vec<_>>())
    }
}

/// Texts per chunk of a batch of `n` on `threads` threads.
pub fn chunk_len(n: usize, threads: usize) -> usize {
    // Several chunks per thread, so that a chunk of long texts does not
    // leave the other threads idle at the end.
    (n / (8 * threads)).max(MIN_CHUNK)
}

/// Encodes one chunk on this thread: `encode` appends the chunk's texts to
/// this thread's emptied [`IdRuns`], and `finish` turns that into the
/// chunk's result.
pub fn encode_chunk<T: StrRun, R>(
    chunk: &[T],
    encode: impl Fn(&[&str], &mut IdRuns) -> Result<()>,
    finish: impl Fn(&IdRuns) -> R,
) -> Result<R> {
    RUNS.with(|runs| {
        let runs = &mut *runs.borrow_mut();
        runs.clear();
        T::with_strs(chunk, |chunk| encode(chunk, runs))?;
        let result = finish(runs);
        runs.release_if_large();
        Ok(result)
    })
}

/// Encodes `texts` in chunks on all cores ([`encode_chunk`]). Results come
/// in text order.
pub fn encode_chunks<T: StrRun, R: Send>(
    texts: &[T],
    encode: impl Fn(&[&str], &mut IdRuns) -> Result<()> + Sync,
    finish: impl Fn(&IdRuns) -> R + Sync,
) -> Result<Vec<R>> {
    texts
        .par_chunks(chunk_len(texts.len(), rayon::current_num_threads()))
        .map(|chunk| encode_chunk(chunk, &encode, &finish))
        .collect()
}

/// Encodes `texts` on all cores into a vector of ids per text (the Rust
/// API's `encode_batch`; see [`encode_chunks`]).
pub fn encode_batch(
    texts: &[&str],
    encode: impl Fn(&[&str], &mut IdRuns) -> Result<()> + Sync,
) -> Result<Vec<Vec<u32>>> {
    let chunks = encode_chunks(texts, encode, |runs| {
        runs.iter().map(<[u32]>::to_vec).collect::<Vec<_>>()
    })?;
    Ok(chunks.into_iter().flatten().collect())
}

/// A chunk's ids, one text after another, and where each text's end.
pub type FlatChunk = (Vec<u32>, Vec<usize>);

/// What a chunk of the flat form keeps (`finish` of [`encode_chunk`]).
pub fn flat_chunk(runs: &IdRuns) -> FlatChunk {
    (runs.ids.clone(), runs.ends.clone())
}

/// Encodes `texts` on all cores into one vector of every id, one text
/// after another, and the `n + 1` offsets where each text's ids start (and
/// the last one's end); see [`join_flat`].
pub fn encode_flat<T: StrRun>(
    texts: &[T],
    encode: impl Fn(&[&str], &mut IdRuns) -> Result<()> + Sync,
) -> Result<(Vec<u32>, Vec<i64>)> {
    let chunks = encode_chunks(texts, encode, flat_chunk)?;
    Ok(join_flat(&chunks, texts.len()))
}

/// The flat form of the texts of one chunk: its ids as they are.
pub fn flat_of_one((ids, ends): FlatChunk) -> (Vec<u32>, Vec<i64>) {
    let offsets = std::iter::once(0).chain(ends.iter().map(|&end| end as i64));
    (ids, offsets.collect())
}

/// The flat form of `texts` texts encoded in `chunks`: every id, and the
/// `n + 1` offsets. The chunks' ids are copied into place on all cores,
/// into memory that nothing wrote before (the vector's spare capacity:
/// neither zeroed first nor touched by this thread), so a copy at memory
/// speed is all that this contiguous form costs.
pub fn join_flat(chunks: &[FlatChunk], texts: usize) -> (Vec<u32>, Vec<i64>) {
    let total = chunks.iter().map(|(ids, _)| ids.len()).sum();
    let mut ids: Vec<u32> = Vec::with_capacity(total);
    let mut offsets = vec![0i64; texts + 1];
    // Each chunk's place in both vectors.
    let mut id_parts = Vec::with_capacity(chunks.len());
    let mut offset_parts = Vec::with_capacity(chunks.len());
    let (mut id_rest, mut offset_rest) =
        (&mut ids.spare_capacity_mut()[..total], &mut offsets[1..]);
    let mut base = 0;
    for (chunk_ids, ends) in chunks {
        let (part, rest) = id_rest.split_at_mut(chunk_ids.len());
        id_parts.push(part);
        id_rest = rest;
        let (part, rest) = offset_rest.split_at_mut(ends.len());
        offset_parts.push((part, base));
        offset_rest = rest;
        base += chunk_ids.len() as i64;
    }
    id_parts
        .into_par_iter()
        .zip(offset_parts)
        .zip(chunks)
        .for_each(|((id_part, (offset_part, base)), (chunk_ids, ends))| {
            for (slot, &id) in id_part.iter_mut().zip(chunk_ids) {
                slot.write(id);
            }
            for (offset, &end) in offset_part.iter_mut().zip(ends) {
                *offset = base + end as i64;
            }
        });
    // SAFETY: the parts cover the first `total` slots exactly once, and
    // each was written above.
    unsafe { ids.set_len(total) };
    (ids, offsets)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in encoder: each byte of a text is an id.
    fn bytes_as_ids(chunk: &[&str], runs: &mut IdRuns) -> Result<()> {
        for text in chunk {
            runs.push(|ids| {
                ids.extend(text.bytes().map(u32::from));
                Ok(())
            })?;
        }
        Ok(())
    }

    #[test]
    fn runs_in_text_order() {
        let texts: Vec<String> = (0..1000).map(|i| "x".repeat(i % 7)).collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let encoded = encode_batch(&texts, bytes_as_ids).unwrap();
        assert_eq!(encoded.len(), texts.len());
        for (ids, text) in encoded.iter().zip(&texts) {
            assert_eq!(ids, &text.bytes().map(u32::from).collect::<Vec<_>>());
        }
    }

    #[test]
    fn flat_ids_and_offsets_in_text_order() {
        let texts: Vec<String> = (0..5000).map(|i| "xy".repeat(i % 5)).collect();
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        let (ids, offsets) = encode_flat(&texts, bytes_as_ids).unwrap();
        assert_eq!(offsets.len(), texts.len() + 1);
        assert_eq!(*offsets.last().unwrap() as usize, ids.len());
        for (i, text) in texts.iter().enumerate() {
            let own = &ids[offsets[i] as usize..offsets[i + 1] as usize];
            assert_eq!(own, &text.bytes().map(u32::from).collect::<Vec<_>>()[..]);
        }
        let chunk = encode_chunk(&texts[..70], bytes_as_ids, flat_chunk).unwrap();
        assert_eq!(
            flat_of_one(chunk),
            encode_flat(&texts[..70], bytes_as_ids).unwrap()
        );
        let (ids, offsets) = encode_flat::<&str>(&[], |_, _| Ok(())).unwrap();
        assert!(ids.is_empty());
        assert_eq!(offsets, [0]);
    }

    #[test]
    fn errors_reach_the_caller() {
        let texts = vec!["ok"; 500];
        let result = encode_batch(&texts, |_, runs| {
            runs.push(|_| Err(crate::Error::invalid("bad text")))
        });
        assert!(result.is_err());
    }
}
