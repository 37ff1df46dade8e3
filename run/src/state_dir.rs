//! Making the `--state-dir` folder (and any folder of private files, such as the audit log's):
//! owner-only, never through a link. Features call [`create_owner_only`] when they first need the
//! folder, so a server that keeps nothing makes nothing.

use std::io;
use std::path::Path;

/// Makes `dir` and its missing parents (`mkdir -p`); the folder itself, when this call makes it,
/// gets mode 0700 on Unix (parents get the default mode, as `mkdir -p` gives them). An existing
/// `dir` is used as it is, unless it is a symbolic link or not a folder: whoever could plant the
/// link would choose where the server's secrets go, so that is refused.
pub fn create_owner_only(dir: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(io::Error::other(format!(
                "'{}' is a symbolic link; the state folder must be a real folder",
                dir.display()
            )));
        }
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => {
            return Err(io::Error::other(format!(
                "'{}' exists and is not a folder",
                dir.display()
            )));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    #[cfg(unix)]
    let builder = {
        let mut builder = std::fs::DirBuilder::new();
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder
    };
    #[cfg(not(unix))]
    let builder = std::fs::DirBuilder::new();
    match builder.create(dir) {
        Ok(()) => Ok(()),
        // Another process made it in between: check what it made.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            match std::fs::symlink_metadata(dir) {
                Ok(meta) if meta.is_dir() => Ok(()),
                _ => Err(e),
            }
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makes_missing_parents_and_an_owner_only_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b/state");
        create_owner_only(&dir).unwrap();
        assert!(dir.is_dir());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{mode:o}");
        }
        // Again: nothing to do, no error.
        create_owner_only(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_link_or_a_file_in_its_place_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let link = tmp.path().join("state");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        let err = create_owner_only(&link).unwrap_err().to_string();
        assert!(err.contains("symbolic link"), "{err}");
        let file = tmp.path().join("file");
        std::fs::write(&file, "").unwrap();
        assert!(create_owner_only(&file).is_err());
    }
}
