//! Projects folders too broad to serve by accident: the filesystem's root, a home folder, or a
//! system folder. Scripts read (and, unless `--read-only-projects`, change) everything in the
//! projects folder, so serving one of these takes an explicit `--allow-broad-projects-dir`.

use std::path::Path;

/// Folders whose whole tree is the system's (Linux, macOS).
#[cfg(unix)]
const SYSTEM_TREES: &[&str] = &[
    "/etc",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/boot",
    "/dev",
    "/proc",
    "/sys",
    "/run",
    "/System",
    "/Library",
    "/private/etc",
    "/private/var",
];
/// Folders that hold many people's or programs' files: broad themselves, fine below.
#[cfg(unix)]
const SHARED_FOLDERS: &[&str] = &[
    "/home",
    "/Users",
    "/root",
    "/var",
    "/tmp",
    "/opt",
    "/srv",
    "/mnt",
    "/media",
    "/Volumes",
    "/Applications",
];
#[cfg(windows)]
const SYSTEM_TREES: &[&str] = &[
    r"C:\Windows",
    r"C:\Program Files",
    r"C:\Program Files (x86)",
    r"C:\ProgramData",
];
#[cfg(windows)]
const SHARED_FOLDERS: &[&str] = &[r"C:\Users"];

/// Why `folder` (canonical) is too broad to serve without saying so, or `None`.
pub(super) fn too_broad(folder: &Path) -> Option<&'static str> {
    if folder.parent().is_none() {
        return Some("the root of the filesystem");
    }
    if dirs::home_dir()
        .and_then(|home| dunce::canonicalize(home).ok())
        .is_some_and(|home| home == folder)
    {
        return Some("your home folder");
    }
    let same = |listed: &&str| {
        let listed = Path::new(listed);
        folder == listed || dunce::canonicalize(listed).is_ok_and(|real| real == folder)
    };
    let within = |listed: &&str| {
        let listed = Path::new(listed);
        folder.starts_with(listed)
            || dunce::canonicalize(listed).is_ok_and(|real| folder.starts_with(real))
    };
    if SYSTEM_TREES.iter().any(within) {
        return Some("a system folder");
    }
    if SHARED_FOLDERS.iter().any(same) {
        return Some("a folder shared by many users or programs");
    }
    None
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn the_root_home_and_system_folders_are_broad_and_a_project_folder_is_not() {
        assert!(too_broad(Path::new("/")).is_some());
        assert!(too_broad(Path::new("/etc")).is_some());
        assert!(too_broad(Path::new("/usr/lib/python3")).is_some());
        assert!(too_broad(Path::new("/home")).is_some());
        if let Some(home) = dirs::home_dir().and_then(|h| dunce::canonicalize(h).ok()) {
            assert_eq!(too_broad(&home), Some("your home folder"));
        }
        let project = tempfile::tempdir().unwrap();
        let project = dunce::canonicalize(project.path()).unwrap();
        assert_eq!(too_broad(&project), None);
    }
}
