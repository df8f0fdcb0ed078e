//! Reading training text from files in chunks, with UTF-8 checked.
//!
//! Files are read in chunks of a few megabytes so that memory stays flat on
//! corpora of any size. A chunk ends after a line break that sits between a
//! visible ASCII character and an ASCII letter or digit: no piece of the
//! preset patterns spans such a point, so counting chunk by chunk gives the
//! same counts as counting whole files. (A file with no such point is cut at
//! any line break, or at last at a character boundary.)

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// What to do with bytes that are not UTF-8.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadBytes {
    /// Fail, naming the file, byte offset and line.
    Error,
    /// Replace each bad sequence with U+FFFD.
    Replace,
}

pub const CHUNK_BYTES: usize = 4 << 20;

/// A file's text, chunk by chunk.
pub struct ChunkReader {
    path: PathBuf,
    file: File,
    bad_bytes: BadBytes,
    chunk_bytes: usize,
    /// Bytes read but not yet handed out (the tail after the last cut).
    pending: Vec<u8>,
    /// File offset of `pending[0]`.
    offset: u64,
    eof: bool,
}

impl ChunkReader {
    pub fn open(path: &Path, bad_bytes: BadBytes) -> Result<Self> {
        Self::with_chunk_size(path, bad_bytes, CHUNK_BYTES)
    }

    pub fn with_chunk_size(path: &Path, bad_bytes: BadBytes, chunk_bytes: usize) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        Ok(ChunkReader {
            path: path.to_owned(),
            file,
            bad_bytes,
            chunk_bytes: chunk_bytes.max(16),
            pending: Vec::new(),
            offset: 0,
            eof: false,
        })
    }

    /// The next chunk of text, or `None` at the end of the file.
    pub fn next_chunk(&mut self) -> Result<Option<String>> {
        while !self.eof && self.pending.len() < self.chunk_bytes {
            let start = self.pending.len();
            self.pending.resize(self.chunk_bytes, 0);
            let read = self
                .file
                .read(&mut self.pending[start..])
                .map_err(|e| Error::io(&self.path, e))?;
            self.pending.truncate(start + read);
            self.eof = read == 0;
        }
        if self.pending.is_empty() {
            return Ok(None);
        }
        let cut = if self.eof {
            self.pending.len()
        } else {
            cut_point(&self.pending)
        };
        let rest = self.pending.split_off(cut);
        let bytes = std::mem::replace(&mut self.pending, rest);
        let chunk_offset = self.offset;
        self.offset += cut as u64;
        match String::from_utf8(bytes) {
            Ok(text) => Ok(Some(text)),
            Err(e) if self.bad_bytes == BadBytes::Replace => {
                Ok(Some(String::from_utf8_lossy(e.as_bytes()).into_owned()))
            }
            Err(e) => {
                let offset = chunk_offset + e.utf8_error().valid_up_to() as u64;
                Err(Error::Corpus(format!(
                    "{}: invalid UTF-8 at byte offset {offset} (line {}); \
                     pass errors=\"replace\" (--errors replace) to replace bad bytes with U+FFFD",
                    self.path.display(),
                    line_of(&self.path, offset)?
                )))
            }
        }
    }
}

/// Where to end a chunk: see the module documentation.
fn cut_point(bytes: &[u8]) -> usize {
    let safe = memchr::memrchr_iter(b'\n', bytes).find(|&i| {
        i > 0
            && i + 1 < bytes.len()
            && bytes[i - 1].is_ascii_graphic()
            && bytes[i + 1].is_ascii_alphanumeric()
    });
    if let Some(i) = safe {
        return i + 1;
    }
    if let Some(i) = memchr::memrchr(b'\n', bytes) {
        return i + 1;
    }
    // No line break at all: do not cut inside the last character.
    let mut start = bytes.len() - 1;
    while start > 0 && bytes.len() - start < 4 && (bytes[start] & 0xC0) == 0x80 {
        start -= 1;
    }
    let char_len = match bytes[start] {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    };
    if start == 0 || start + char_len <= bytes.len() {
        bytes.len()
    } else {
        start
    }
}

/// The 1-based line of a byte offset, for error messages.
fn line_of(path: &Path, offset: u64) -> Result<u64> {
    let mut file = File::open(path).map_err(|e| Error::io(path, e))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut remaining = offset;
    let mut lines = 1;
    while remaining > 0 {
        let want = remaining.min(buf.len() as u64) as usize;
        let read = file
            .read(&mut buf[..want])
            .map_err(|e| Error::io(path, e))?;
        if read == 0 {
            break;
        }
        lines += memchr::memchr_iter(b'\n', &buf[..read]).count() as u64;
        remaining -= read as u64;
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
        let path =
            std::env::temp_dir().join(format!("polytok-corpus-{}-{name}", std::process::id()));
        File::create(&path).unwrap().write_all(bytes).unwrap();
        path
    }

    fn read_all(path: &Path, bad: BadBytes, chunk: usize) -> Result<Vec<String>> {
        let mut reader = ChunkReader::with_chunk_size(path, bad, chunk)?;
        let mut chunks = Vec::new();
        while let Some(chunk) = reader.next_chunk()? {
            chunks.push(chunk);
        }
        Ok(chunks)
    }

    #[test]
    fn chunks_join_to_the_file_and_end_at_safe_points() {
        let text = "Héllo world.\n  indented\nSecond line 123.\n日本語のテキスト\nx\n".repeat(50);
        let path = temp_file("chunks", text.as_bytes());
        let chunks = read_all(&path, BadBytes::Error, 64).unwrap();
        assert!(chunks.len() > 10);
        assert_eq!(chunks.concat(), text);
        for chunk in &chunks[..chunks.len() - 1] {
            assert!(chunk.ends_with('\n'), "{chunk:?}");
        }
    }

    #[test]
    fn bad_utf8_names_file_offset_and_line() {
        let path = temp_file("bad", b"good line\nsecond \xFF line\n");
        let err = read_all(&path, BadBytes::Error, 1 << 20)
            .unwrap_err()
            .to_string();
        assert!(err.contains("byte offset 17"), "{err}");
        assert!(err.contains("line 2"), "{err}");
        assert!(err.contains(&path.display().to_string()), "{err}");
        let replaced = read_all(&path, BadBytes::Replace, 1 << 20)
            .unwrap()
            .concat();
        assert_eq!(replaced, "good line\nsecond \u{FFFD} line\n");
    }

    #[test]
    fn a_file_without_line_breaks_is_cut_at_character_boundaries() {
        let text = "語".repeat(1000);
        let path = temp_file("noline", text.as_bytes());
        assert_eq!(
            read_all(&path, BadBytes::Error, 100).unwrap().concat(),
            text
        );
    }
}
