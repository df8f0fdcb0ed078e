//! The defaults and skip tests that the saved forms of polytok's steps and
//! models share (`#[serde(default = "crate::serde_defaults::yes")]`, ...).

/// A setting that is on unless a file says otherwise.
pub(crate) fn yes() -> bool {
    true
}

/// A flag left out of a file when off.
pub(crate) fn is_false(value: &bool) -> bool {
    !*value
}
