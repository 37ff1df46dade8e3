//! `~` and `~/x` in path settings (flags, the environment, `.env`) mean the home folder, as a
//! shell would expand them: an assistant's config or a `.env` is not read by a shell.

use std::convert::Infallible;
use std::path::PathBuf;

/// `~` → the home folder, `~/x` → the home folder's `x`; anything else (and `~user`) as given,
/// as is any path when no home folder is known.
pub(super) fn expand_home(given: &str) -> PathBuf {
    let rest = match given.strip_prefix('~') {
        Some("") => "",
        Some(rest) if rest.starts_with('/') || (cfg!(windows) && rest.starts_with('\\')) => {
            &rest[1..]
        }
        _ => return PathBuf::from(given),
    };
    match dirs::home_dir() {
        Some(home) if rest.is_empty() => home,
        Some(home) => home.join(rest),
        None => PathBuf::from(given),
    }
}

/// clap's value parser for path settings.
pub(super) fn path(given: &str) -> Result<PathBuf, Infallible> {
    Ok(expand_home(given))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leading_tilde_is_the_home_folder_and_nothing_else_changes() {
        let Some(home) = dirs::home_dir() else {
            return;
        };
        assert_eq!(expand_home("~"), home);
        assert_eq!(expand_home("~/proj/a"), home.join("proj/a"));
        for kept in ["~user/x", "./~", "/a/~/b", "proj"] {
            assert_eq!(expand_home(kept), PathBuf::from(kept));
        }
    }
}
