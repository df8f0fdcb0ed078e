//! Python strings read on the FFI where CPython keeps their characters:
//! the UTF-8 of a batch's texts is made on the pool threads that encode
//! them, that of a single text on the thread that encodes it, in a buffer
//! it reuses (`text::widths`: why).

use std::mem::MaybeUninit;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};

use crate::batch::StrRun;
use crate::text::widths::FixedWidth;

/// The texts of a Python list, each held by a reference taken here: they
/// stay alive while the GIL is released, whatever Python does to the list
/// meanwhile. A `TypeError` names the first item that is not a string
/// (`read_items`).
pub(crate) struct Texts<'py> {
    /// Kept for its references, released on drop (with the GIL: a `Texts`
    /// stays on the thread that made it).
    _held: Vec<Bound<'py, PyString>>,
    /// The characters of each, borrowed from `_held` (hence private:
    /// `texts` lends them for no longer than `self`).
    characters: Vec<FixedWidth<'static>>,
}

impl<'py> Texts<'py> {
    pub(crate) fn of(texts: &Bound<'py, PyList>) -> PyResult<Self> {
        let n = texts.len();
        let (mut held, mut characters) = (Vec::with_capacity(n), Vec::with_capacity(n));
        read_items(
            texts,
            0,
            &mut held,
            &mut characters.spare_capacity_mut()[..n],
        )?;
        // SAFETY: `read_items` wrote the first `n`.
        unsafe { characters.set_len(n) };
        Ok(Texts {
            _held: held,
            characters,
        })
    }

    /// Each text's characters.
    pub(crate) fn texts(&self) -> &[FixedWidth<'_>] {
        &self.characters
    }
}

/// Reads the items of `list` from `start` on, as many as `out` holds,
/// with the GIL held: a reference to each string (pushed on `held`), and
/// where its characters lie (written to `out`, borrowed for as long as
/// `held` keeps the string). On the FFI: this runs on one thread while (or
/// before) the work spreads over every core, and pyo3's item-by-item path
/// (a checked `PyList_GetItem` per item, a vector grown by doubling) took
/// 6 ms of a 68 ms batch of the 284,000 lines of 10 MB of English, on two
/// threads.
pub(crate) fn read_items<'py>(
    list: &Bound<'py, PyList>,
    start: usize,
    held: &mut Vec<Bound<'py, PyString>>,
    out: &mut [MaybeUninit<FixedWidth<'static>>],
) -> PyResult<()> {
    // Items this far ahead are fetched: the strings lie all over memory.
    const AHEAD: usize = 8;
    let (list_ptr, n) = (list.as_ptr(), list.len());
    assert!(start + out.len() <= n, "items past the list's end");
    for (i, slot) in (start..).zip(out) {
        // SAFETY (both): below the list's length, with the GIL held, and no
        // Python code runs while the list is read (an error ends it), so
        // the list does not change; the prefetch only reads an address.
        if i + AHEAD < n {
            crate::prefetch::line(unsafe {
                &*ffi::PyList_GET_ITEM(list_ptr, (i + AHEAD) as isize)
            });
        }
        let item = unsafe { ffi::PyList_GET_ITEM(list_ptr, i as isize) };
        let item = unsafe { Bound::from_borrowed_ptr(list.py(), item) };
        let text = item.cast_into::<PyString>().map_err(|err| {
            let type_name = err.into_inner().get_type().name().map(|n| n.to_string());
            PyTypeError::new_err(format!(
                "texts[{i}] is {}, not str",
                type_name.as_deref().unwrap_or("not a string")
            ))
        })?;
        slot.write(characters_of(&text)?);
        held.push(text);
    }
    Ok(())
}

/// `read` of `text` as UTF-8: where CPython keeps it (an ASCII string, or
/// one whose UTF-8 something asked for before), else made on this thread
/// in a buffer reused from call to call, and not kept in the string. Lone
/// surrogates read as U+FFFD (`text::widths`).
///
/// Why not `PyUnicode_AsUTF8AndSize`: a text with one character past
/// U+FFFF (an emoji) is UCS-4, as is every 1 MB document of the English
/// benchmark corpus, and CPython transcodes it a character at a time into
/// a buffer that grows into fresh memory, then copies it into the string.
/// On a first pass over 10 MB of such documents, that and the kernel's
/// zeroing of its fresh pages took about a tenth of the time; here, about
/// 3 ms.
pub(crate) fn with_utf8<R>(
    text: &Bound<'_, PyString>,
    read: impl FnOnce(&str) -> R,
) -> PyResult<R> {
    let characters = characters_of(text)?;
    if let Some(utf8) = kept_utf8(text) {
        return Ok(read(utf8));
    }
    Ok(FixedWidth::with_strs(&[characters], |strs| read(strs[0])))
}

/// `text`'s UTF-8 where CPython has it already: an ASCII string's
/// characters, or the copy a non-ASCII string keeps once asked for it.
/// (`characters_of` has made the string ready.)
fn kept_utf8<'a>(text: &'a Bound<'_, PyString>) -> Option<&'a str> {
    let text_ptr = text.as_ptr();
    // SAFETY: `text` is a ready string and the GIL is held. A compact
    // ASCII string's data is its UTF-8; a compact string's `utf8` is null
    // or its UTF-8, `utf8_length` bytes, kept as long as the string.
    unsafe {
        let (data, len) = if ffi::PyUnicode_IS_COMPACT_ASCII(text_ptr) != 0 {
            (
                ffi::PyUnicode_DATA(text_ptr).cast::<u8>(),
                ffi::PyUnicode_GET_LENGTH(text_ptr) as usize,
            )
        } else if ffi::PyUnicode_IS_COMPACT(text_ptr) != 0 {
            let compact = &*text_ptr.cast::<ffi::PyCompactUnicodeObject>();
            (compact.utf8.cast::<u8>(), compact.utf8_length as usize)
        } else {
            return None;
        };
        if data.is_null() {
            return None;
        }
        Some(std::str::from_utf8_unchecked(std::slice::from_raw_parts(
            data, len,
        )))
    }
}

/// Where `text`'s characters lie, in its width. They live as long as the
/// string (strings are immutable, and one referenced elsewhere is never
/// resized in place): the `'static` is the caller's to bound, by holding
/// the string for as long as it uses them.
fn characters_of(text: &Bound<'_, PyString>) -> PyResult<FixedWidth<'static>> {
    let text_ptr = text.as_ptr();
    // SAFETY: `text` is a string and the GIL is held; once ready (always,
    // from Python 3.12 on), its kind, data and length describe its
    // characters.
    unsafe {
        #[allow(deprecated)]
        if ffi::PyUnicode_READY(text_ptr) != 0 {
            return Err(PyErr::fetch(text.py()));
        }
        let len = ffi::PyUnicode_GET_LENGTH(text_ptr) as usize;
        if len == 0 {
            return Ok(FixedWidth::Latin1(&[]));
        }
        let data = ffi::PyUnicode_DATA(text_ptr);
        Ok(match ffi::PyUnicode_KIND(text_ptr) {
            ffi::PyUnicode_1BYTE_KIND => {
                FixedWidth::Latin1(std::slice::from_raw_parts(data.cast(), len))
            }
            ffi::PyUnicode_2BYTE_KIND => {
                FixedWidth::Ucs2(std::slice::from_raw_parts(data.cast(), len))
            }
            _ => FixedWidth::Ucs4(std::slice::from_raw_parts(data.cast(), len)),
        })
    }
}
