//! The quarantine: where a protected name a run created in the projects folder (a `.git`, a
//! `.vscode/tasks.json`, a forged `__pycache__`, see `pyrun_sandbox::PROTECTED_NAMES`) is moved
//! once the run is over, so that nothing the user's own tools trust and run outside the sandbox
//! stays behind.
//!
//! Moved, never deleted: the same name may be the user's own change made while the run went
//! on, and it stays recoverable. Each run's catch goes to a folder of its own,
//! `<quarantine>/<unix seconds>-<n>/`, holding the entries at their paths relative to the
//! projects folder. The quarantine lies outside the projects folder (under the server's state
//! folder), owner-only; a `rename` where it is on the same file system, a copy then a removal
//! where it is not.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The folder's name under the server's state folder.
pub const QUARANTINE_DIR: &str = "quarantine";

/// A server's quarantine folder (made, owner-only, when first needed).
#[derive(Debug)]
pub struct Quarantine {
    dir: PathBuf,
    next: AtomicU64,
}

/// What became of one protected entry a run created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// Relative to the projects folder, `/`-separated: safe to show.
    pub path: String,
    /// False when it could not be moved (the reason is in the server's log).
    pub moved: bool,
}

/// The paths of the entries of `taken` that were moved away: what a result reports.
pub fn moved_paths(taken: &[Quarantined]) -> Vec<String> {
    taken
        .iter()
        .filter(|q| q.moved)
        .map(|q| q.path.clone())
        .collect()
}

impl Quarantine {
    /// The quarantine in `dir` (an absolute path outside the projects folder).
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir,
            next: AtomicU64::new(0),
        }
    }

    /// The quarantine used when the server names none: a folder of the temp directory.
    pub fn in_temp() -> Self {
        Self::new(std::env::temp_dir().join("pyrun-quarantine"))
    }

    /// Moves each of `created` (relative to `projects`) into a new folder of the quarantine.
    /// Blocking: renames, or copies across file systems.
    pub fn take(&self, projects: &Path, created: &[PathBuf]) -> Vec<Quarantined> {
        if created.is_empty() {
            return Vec::new();
        }
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let batch = self.dir.join(format!("{stamp}-{}-{n}", std::process::id()));
        let made = private_dir(&self.dir).and_then(|()| private_dir(&batch));
        created
            .iter()
            .map(|rel| {
                let moved = made
                    .as_ref()
                    .map_err(|e| io::Error::new(e.kind(), e.to_string()))
                    .and_then(|()| move_out(projects, rel, &batch.join(rel)));
                if let Err(e) = &moved {
                    tracing::warn!(
                        path = %rel.display(),
                        "a protected name a run created could not be moved to the quarantine \
                         ({}): {e}",
                        batch.display()
                    );
                } else {
                    tracing::info!(
                        path = %rel.display(),
                        "a protected name a run created was moved to {}",
                        batch.display()
                    );
                }
                Quarantined {
                    path: rel
                        .components()
                        .map(|c| c.as_os_str().to_string_lossy())
                        .collect::<Vec<_>>()
                        .join("/"),
                    moved: moved.is_ok(),
                }
            })
            .collect()
    }
}

/// Makes `dir` owner-only if it does not exist; an existing one must be a real folder of ours,
/// owner-only (never a link, never a folder someone else made in a shared temp directory).
fn private_dir(dir: &Path) -> io::Result<()> {
    #[cfg_attr(not(unix), allow(unused_mut))]
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(io::Error::other("the quarantine is not a folder"));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if meta.uid() != rustix::process::geteuid().as_raw() || meta.mode() & 0o077 != 0 {
            return Err(io::Error::other(
                "the quarantine is not an owner-only folder of the server's user",
            ));
        }
    }
    Ok(())
}

/// Moves `rel` of `projects` (a file, folder or link, never followed) to `to`, making `to`'s
/// parents. No link on the way to it is followed either: a run still going (another run of the
/// same project) could swap a folder on the way for a link between the walk that found the entry
/// and this move, and have the server move some other project's `.git`, or a host folder's.
#[cfg(target_os = "linux")]
fn move_out(projects: &Path, rel: &Path, to: &Path) -> io::Result<()> {
    use rustix::fs::{openat2, Mode, OFlags, ResolveFlags};
    let name = rel
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no entry name"))?;
    let parent_rel = match rel.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let root = rustix::fs::open(projects, dir_flags, Mode::empty())?;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let parent = openat2(
        &root,
        parent_rel,
        dir_flags | OFlags::NOFOLLOW,
        Mode::empty(),
        resolve,
    )?;
    let to_parent = to.parent().unwrap_or(to);
    std::fs::create_dir_all(to_parent)?;
    let into = rustix::fs::open(to_parent, dir_flags, Mode::empty())?;
    match rustix::fs::renameat(&parent, name, &into, name) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::XDEV) => {
            // Through the folder held open: the path names it, whatever happens to its name.
            use std::os::fd::AsRawFd as _;
            let from = PathBuf::from(format!("/proc/self/fd/{}", parent.as_raw_fd())).join(name);
            copy_tree(&from, to)?;
            remove_entry(&from)
        }
        Err(e) => Err(e.into()),
    }
}

/// See the Linux version; here a link on the way is followed.
#[cfg(not(target_os = "linux"))]
fn move_out(projects: &Path, rel: &Path, to: &Path) -> io::Result<()> {
    let from = projects.join(rel);
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::rename(&from, to) {
        Ok(()) => Ok(()),
        Err(e) if is_cross_device(&e) => {
            copy_tree(&from, to)?;
            remove_entry(&from)
        }
        Err(e) => Err(e),
    }
}

#[cfg_attr(target_os = "linux", allow(dead_code))]
fn is_cross_device(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::CrossesDevices
}

fn copy_tree(from: &Path, to: &Path) -> io::Result<()> {
    let meta = std::fs::symlink_metadata(from)?;
    if meta.is_dir() {
        std::fs::create_dir(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        Ok(())
    } else if meta.file_type().is_symlink() {
        #[cfg(unix)]
        return std::os::unix::fs::symlink(std::fs::read_link(from)?, to);
        #[cfg(not(unix))]
        return std::fs::write(to, std::fs::read_link(from)?.to_string_lossy().as_bytes());
    } else {
        std::fs::copy(from, to).map(drop)
    }
}

fn remove_entry(path: &Path) -> io::Result<()> {
    if std::fs::symlink_metadata(path)?.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_names_are_moved_out_whole_and_kept() {
        let projects = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = projects.path();
        std::fs::create_dir_all(root.join("a/.vscode")).unwrap();
        std::fs::write(root.join("a/.vscode/tasks.json"), "{}").unwrap();
        std::fs::write(root.join("a/keep.py"), "").unwrap();
        let quarantine = Quarantine::new(state.path().join(QUARANTINE_DIR));
        let taken = quarantine.take(root, &[PathBuf::from("a/.vscode")]);
        assert_eq!(
            taken,
            [Quarantined {
                path: "a/.vscode".into(),
                moved: true
            }]
        );
        assert!(!root.join("a/.vscode").exists());
        assert!(root.join("a/keep.py").exists());
        let batch = std::fs::read_dir(state.path().join(QUARANTINE_DIR))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        assert_eq!(
            std::fs::read_to_string(batch.join("a/.vscode/tasks.json")).unwrap(),
            "{}"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_folder_swapped_for_a_link_after_the_walk_moves_nothing_outside_the_project() {
        let projects = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = projects.path();
        // What the walk found: a/p/.git. What a run still going made of it before the move:
        // a/p, a link to another project's folder holding a real .git.
        std::fs::create_dir_all(root.join("b/sub/.git")).unwrap();
        std::fs::write(root.join("b/sub/.git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(root.join("a")).unwrap();
        std::os::unix::fs::symlink("../b/sub", root.join("a/p")).unwrap();
        let quarantine = Quarantine::new(state.path().join(QUARANTINE_DIR));
        let taken = quarantine.take(root, &[PathBuf::from("a/p/.git")]);
        assert_eq!(
            taken,
            [Quarantined {
                path: "a/p/.git".into(),
                moved: false
            }]
        );
        assert_eq!(
            std::fs::read_to_string(root.join("b/sub/.git/config")).unwrap(),
            "[core]\n"
        );
        // The project's own top-level entries still move.
        std::fs::create_dir_all(root.join(".vscode")).unwrap();
        let taken = quarantine.take(root, &[PathBuf::from(".vscode")]);
        assert!(taken[0].moved, "{taken:?}");
    }
}
