//! The state folder (`--state-dir`) on disk: made when a feature first needs it, owner-only.

use std::path::Path;

/// Makes `dir` (and missing parents); the folder itself is mode 0700 on Unix. An existing
/// symbolic link is refused: the state must be where the setting says.
pub fn create_owner_only(dir: &Path) -> std::io::Result<()> {
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(std::io::Error::other("it is a symbolic link"));
    }
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}
