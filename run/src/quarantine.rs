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
//! where it is not (on Linux through held descriptors, like the walk: any depth, no link
//! followed, a folder of the server's own it may not read given its owner's access back).
//!
//! What moves is told by identity, not by path (`pyrun_sandbox::LeftBehind`): an entry is moved
//! only while its device and inode are still those the after-run walk found (checked on the held
//! parent folder, no link followed, right before the move), and never one whose identity the
//! walk before the run recorded (the user's own: a run that renamed `sub` to `sub_old` and made a
//! new `sub/.git` loses the new one; `sub_old/.git` stays, and the result says it moved).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use pyrun_sandbox::{EntryId, Left, LeftBehind, Why};

/// The folder's name under the server's state folder.
pub const QUARANTINE_DIR: &str = "quarantine";

/// A server's quarantine folder (made, owner-only, when first needed).
#[derive(Debug)]
pub struct Quarantine {
    dir: PathBuf,
    next: AtomicU64,
}

/// What became of one protected entry a run left, or what the check after it had to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quarantined {
    /// Relative to the projects folder, `/`-separated: safe to show.
    pub path: String,
    /// False when it could not be moved, or was not to be (the reason is in `note` or the
    /// server's log).
    pub moved: bool,
    /// What else a result should say of it (a folder that could not be listed, a protected
    /// entry of the user's the run moved); `None` for a plain move.
    pub note: Option<String>,
}

/// What a result lists as quarantined: each entry moved away, and each one with a note (as
/// `path (note)`).
pub fn moved_paths(taken: &[Quarantined]) -> Vec<String> {
    taken
        .iter()
        .filter(|q| q.moved || q.note.is_some())
        .map(|q| match &q.note {
            Some(note) => format!("{} ({note})", q.path),
            None => q.path.clone(),
        })
        .collect()
}

/// `rel` as a result shows it: `/`-separated.
fn shown(rel: &Path) -> String {
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// What a result says of an entry moved for `why` (besides its path).
fn why_note(left: &Left) -> Option<String> {
    let note = match left.why {
        Why::Unlistable => "a folder the server could not list: moved whole",
        Why::TooDeep => "deeper than the check walks: moved whole",
        Why::CommonDir => "where a repository's commondir pointed",
        _ if left.replaced => "put in place of a protected entry",
        _ => return None,
    };
    Some(note.to_owned())
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

    /// Moves each protected entry `left` lists as created (relative to `projects`) into a new
    /// folder of the quarantine, and reports the rest: the user's entries the run moved, the
    /// folders opened to be looked through. Blocking: renames, or copies across file systems.
    pub fn take(&self, projects: &Path, left: &LeftBehind) -> Vec<Quarantined> {
        let mut taken = Vec::new();
        for moved in &left.moved {
            tracing::warn!(
                from = %moved.from.display(),
                to = %moved.to.display(),
                "a run moved a protected entry of the project's: left where it is now"
            );
            taken.push(Quarantined {
                path: shown(&moved.to),
                moved: false,
                note: Some(format!(
                    "the project's own protected entry {}, moved here by the run: left in place",
                    shown(&moved.from)
                )),
            });
        }
        for folder in &left.opened {
            tracing::warn!(
                folder = %folder.display(),
                "a folder a run left could not be listed: its owner's access was given back and \
                 it was looked through"
            );
            taken.push(Quarantined {
                path: shown(folder),
                moved: false,
                note: Some(
                    "a folder the server could not list: its owner's access was given back and \
                     it was looked through"
                        .to_owned(),
                ),
            });
        }
        if left.created.is_empty() {
            return taken;
        }
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let batch = self.dir.join(format!("{stamp}-{}-{n}", std::process::id()));
        let made = private_dir(&self.dir).and_then(|()| private_dir(&batch));
        for (i, entry) in left.created.iter().enumerate() {
            let rel = &entry.path;
            let to = destination(&batch, rel, i);
            let moved = made
                .as_ref()
                .map_err(|e| io::Error::new(e.kind(), e.to_string()))
                .and_then(|()| move_out(projects, rel, &to, entry.id, &left.kept));
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
                    why = ?entry.why,
                    "a protected name a run created was moved to {}",
                    to.display()
                );
            }
            taken.push(Quarantined {
                path: shown(rel),
                moved: moved.is_ok(),
                note: why_note(entry),
            });
        }
        taken
    }
}

/// Where entry `rel` (the `i`th of a batch) goes in `batch`: at its path, or, for a path too
/// long to name in one call, flat under `deep/`.
fn destination(batch: &Path, rel: &Path, i: usize) -> PathBuf {
    const LONGEST: usize = 1024;
    if rel.as_os_str().len() <= LONGEST {
        return batch.join(rel);
    }
    let name = rel.file_name().unwrap_or(rel.as_os_str()).to_string_lossy();
    batch.join("deep").join(format!("{i}-{name}"))
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
/// parents, if it is still the entry `id` names and none of `kept`. No link on the way to it is
/// followed either: a run still going (another run of the same project) could swap a folder on
/// the way for a link between the walk that found the entry and this move, and have the server
/// move some other project's `.git`, or a host folder's. The way is opened one folder at a time
/// from held descriptors (a path longer than `PATH_MAX` is no obstacle); a folder of the
/// server's own that it may not write (a run's `chmod`) gets its owner's access back first.
#[cfg(target_os = "linux")]
fn move_out(
    projects: &Path,
    rel: &Path,
    to: &Path,
    id: Option<EntryId>,
    kept: &std::collections::HashSet<EntryId>,
) -> io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    use std::os::fd::AsFd as _;
    let name = rel
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no entry name"))?;
    let parent_rel = rel.parent().unwrap_or(Path::new(""));
    let parent = pyrun_sandbox::open_beneath(projects, parent_rel)?;
    // The entry as it is now, on the folder held: the one the walk found, and not the user's.
    let now = pyrun_sandbox::entry_id_at(&parent, name)?;
    if id.is_some_and(|id| id != now) {
        return Err(io::Error::other(
            "it changed since the check found it: left in place",
        ));
    }
    if kept.contains(&now) {
        return Err(io::Error::other(
            "it is the project's own protected entry: left in place",
        ));
    }
    let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let to_parent = to.parent().unwrap_or(to);
    std::fs::create_dir_all(to_parent)?;
    let into = rustix::fs::open(to_parent, dir_flags, Mode::empty())?;
    let rename = || rustix::fs::renameat(&parent, name, &into, name);
    let renamed = match rename() {
        // Moving an entry out needs `w` on its folder, and on itself when it is a folder.
        Err(rustix::io::Errno::ACCESS) => {
            let _ = pyrun_sandbox::give_back(&parent, 0o700);
            if let Ok(entry) =
                rustix::fs::openat(&parent, name, dir_flags | OFlags::NOFOLLOW, Mode::empty())
            {
                let _ = pyrun_sandbox::give_back(&entry, 0o700);
            }
            rename()
        }
        other => other,
    };
    match renamed {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::XDEV) => {
            // Another file system: a copy, then the removal, both from the folders held (no
            // path joined: any depth; a folder of the server's own it may not read gets its
            // owner's access back, as the walk did).
            let to_name = to.file_name().unwrap_or(name);
            held::copy_at(parent.as_fd(), name, into.as_fd(), to_name, 0)?;
            held::remove_at(parent.as_fd(), name, 0)
        }
        Err(e) => Err(e.into()),
    }
}

/// Copying and removing a tree through held descriptors, for a quarantine on another file
/// system.
#[cfg(target_os = "linux")]
mod held {
    use std::ffi::{OsStr, OsString};
    use std::io;
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;

    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    use rustix::io::Errno;

    /// Deeper than this, a tree is not copied (its entry stays, reported): it bounds the
    /// descriptors held, one per level.
    const MAX_DEPTH: usize = 512;

    fn too_deep() -> io::Error {
        io::Error::other("a tree too deep to copy to the quarantine")
    }

    /// Opens `name` of `dir` (never through a link) with `flags`; when the server owns it and
    /// may not, its owner's access is given back first.
    fn open(dir: BorrowedFd, name: &OsStr, flags: OFlags) -> io::Result<OwnedFd> {
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        match rustix::fs::openat(dir, name, flags, Mode::empty()) {
            Err(Errno::ACCESS) => {
                let path = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                let held = rustix::fs::openat(dir, name, path, Mode::empty())?;
                pyrun_sandbox::give_back(&held, 0o700)?;
                Ok(rustix::fs::openat(dir, name, flags, Mode::empty())?)
            }
            other => Ok(other?),
        }
    }

    fn entries(dir: &OwnedFd) -> io::Result<Vec<OsString>> {
        let mut out = Vec::new();
        for entry in rustix::fs::Dir::read_from(dir)? {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name != b"." && name != b".." {
                out.push(OsStr::from_bytes(name).to_owned());
            }
        }
        Ok(out)
    }

    /// Copies entry `name` of `from` to a new entry `to_name` of `into`: folders, files and
    /// links as they are (never followed); devices, pipes and sockets are not kept.
    pub(super) fn copy_at(
        from: BorrowedFd,
        name: &OsStr,
        into: BorrowedFd,
        to_name: &OsStr,
        depth: usize,
    ) -> io::Result<()> {
        if depth > MAX_DEPTH {
            return Err(too_deep());
        }
        let stat = rustix::fs::statat(from, name, AtFlags::SYMLINK_NOFOLLOW)?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => {
                rustix::fs::mkdirat(into, to_name, Mode::RWXU)?;
                let src = open(from, name, OFlags::RDONLY | OFlags::DIRECTORY)?;
                // Listable but perhaps not enterable: its entries are opened next.
                pyrun_sandbox::give_back(&src, 0o700)?;
                let dst = open(into, to_name, OFlags::RDONLY | OFlags::DIRECTORY)?;
                for child in entries(&src)? {
                    copy_at(src.as_fd(), &child, dst.as_fd(), &child, depth + 1)?;
                }
            }
            FileType::RegularFile => {
                let src = open(from, name, OFlags::RDONLY | OFlags::NONBLOCK)?;
                let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
                let dst = rustix::fs::openat(
                    into,
                    to_name,
                    flags | OFlags::CLOEXEC,
                    Mode::RUSR | Mode::WUSR,
                )?;
                io::copy(&mut std::fs::File::from(src), &mut std::fs::File::from(dst))?;
            }
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(from, name, Vec::new())?;
                rustix::fs::symlinkat(target.as_c_str(), into, to_name)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Removes entry `name` of `dir`, a whole tree for a folder, never following a link.
    pub(super) fn remove_at(dir: BorrowedFd, name: &OsStr, depth: usize) -> io::Result<()> {
        if depth > MAX_DEPTH {
            return Err(too_deep());
        }
        let stat = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
        if FileType::from_raw_mode(stat.st_mode) == FileType::Directory {
            let sub = open(dir, name, OFlags::RDONLY | OFlags::DIRECTORY)?;
            // Removing its entries needs `w` on it.
            pyrun_sandbox::give_back(&sub, 0o700)?;
            for child in entries(&sub)? {
                remove_at(sub.as_fd(), &child, depth + 1)?;
            }
            rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?;
        } else {
            rustix::fs::unlinkat(dir, name, AtFlags::empty())?;
        }
        Ok(())
    }
}

/// See the Linux version; here a link on the way is followed.
#[cfg(not(target_os = "linux"))]
fn move_out(
    projects: &Path,
    rel: &Path,
    to: &Path,
    id: Option<EntryId>,
    kept: &std::collections::HashSet<EntryId>,
) -> io::Result<()> {
    let from = projects.join(rel);
    #[cfg(unix)]
    {
        let now = pyrun_sandbox::entry_id(&std::fs::symlink_metadata(&from)?);
        if id.is_some_and(|id| id != now) || kept.contains(&now) {
            return Err(io::Error::other(
                "it changed since the check found it, or is the project's own: left in place",
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = (id, kept);
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

#[cfg(not(target_os = "linux"))]
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

#[cfg(not(target_os = "linux"))]
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

    /// What a walk would report of `paths`, created by a run (identities not taken).
    fn left(paths: &[&str]) -> LeftBehind {
        LeftBehind {
            created: paths
                .iter()
                .map(|p| Left {
                    path: PathBuf::from(p),
                    id: None,
                    replaced: false,
                    why: Why::Name,
                })
                .collect(),
            ..LeftBehind::default()
        }
    }

    #[test]
    fn created_names_are_moved_out_whole_and_kept() {
        let projects = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = projects.path();
        std::fs::create_dir_all(root.join("a/.vscode")).unwrap();
        std::fs::write(root.join("a/.vscode/tasks.json"), "{}").unwrap();
        std::fs::write(root.join("a/keep.py"), "").unwrap();
        let quarantine = Quarantine::new(state.path().join(QUARANTINE_DIR));
        let taken = quarantine.take(root, &left(&["a/.vscode"]));
        assert_eq!(
            taken,
            [Quarantined {
                path: "a/.vscode".into(),
                moved: true,
                note: None
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
        let taken = quarantine.take(root, &left(&["a/p/.git"]));
        assert_eq!(
            taken,
            [Quarantined {
                path: "a/p/.git".into(),
                moved: false,
                note: None
            }]
        );
        assert_eq!(
            std::fs::read_to_string(root.join("b/sub/.git/config")).unwrap(),
            "[core]\n"
        );
        // The project's own top-level entries still move.
        std::fs::create_dir_all(root.join(".vscode")).unwrap();
        let taken = quarantine.take(root, &left(&[".vscode"]));
        assert!(taken[0].moved, "{taken:?}");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_entry_is_moved_only_while_it_is_what_the_walk_found_and_never_the_users_own() {
        let projects = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = projects.path();
        let id = |p: &str| {
            let p = Path::new(p);
            let parent = std::fs::File::open(root.join(p.parent().unwrap())).unwrap();
            pyrun_sandbox::entry_id_at(&parent, p.file_name().unwrap()).unwrap()
        };
        std::fs::create_dir_all(root.join("a/sub/.git")).unwrap();
        std::fs::create_dir_all(root.join("a/new/.git")).unwrap();
        let quarantine = Quarantine::new(state.path().join(QUARANTINE_DIR));
        // The user's own (its identity recorded before the run), found at a created path.
        let mut left = left(&["a/sub/.git", "a/new/.git"]);
        left.kept.insert(id("a/sub/.git"));
        // Swapped after the walk: another entry than the one found.
        left.created[1].id = Some(id("a/sub"));
        let taken = quarantine.take(root, &left);
        assert!(taken.iter().all(|q| !q.moved), "{taken:?}");
        assert!(root.join("a/sub/.git").exists() && root.join("a/new/.git").exists());
        // As found: moved.
        let mut left = super::tests::left(&["a/new/.git"]);
        left.created[0].id = Some(id("a/new/.git"));
        assert!(quarantine.take(root, &left)[0].moved);
        assert!(!root.join("a/new/.git").exists());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_entry_is_moved_to_a_quarantine_on_another_file_system_whole_at_any_depth() {
        use std::os::unix::fs::PermissionsExt;
        let shm = Path::new("/dev/shm");
        let same = |a: &Path, b: &Path| {
            use std::os::unix::fs::MetadataExt;
            std::fs::metadata(a).unwrap().dev() == std::fs::metadata(b).unwrap().dev()
        };
        let projects = tempfile::tempdir().unwrap();
        if !shm.is_dir() || same(shm, projects.path()) {
            return; // no second file system to move across
        }
        let state = tempfile::tempdir_in(shm).unwrap();
        let root = projects.path();
        // A planted repository: a link, a shut folder, and a file deeper than PATH_MAX.
        std::fs::create_dir_all(root.join("a/.git/objects/shut")).unwrap();
        std::fs::write(root.join("a/.git/config"), "[core]\n").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("a/.git/link")).unwrap();
        std::fs::write(root.join("a/.git/objects/shut/o"), "x").unwrap();
        let shut = std::fs::Permissions::from_mode(0o000);
        std::fs::set_permissions(root.join("a/.git/objects/shut"), shut).unwrap();
        let mut at = std::fs::File::open(root.join("a/.git")).unwrap();
        for _ in 0..25 {
            let name = "d".repeat(200);
            rustix::fs::mkdirat(&at, name.as_str(), rustix::fs::Mode::RWXU).unwrap();
            let flags = rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY;
            at = rustix::fs::openat(&at, name.as_str(), flags, rustix::fs::Mode::empty())
                .map(std::fs::File::from)
                .unwrap();
        }
        let flags = rustix::fs::OFlags::WRONLY | rustix::fs::OFlags::CREATE;
        rustix::fs::openat(&at, "deep", flags, rustix::fs::Mode::RUSR).unwrap();
        let quarantine = Quarantine::new(state.path().join(QUARANTINE_DIR));
        let taken = quarantine.take(root, &left(&["a/.git"]));
        assert!(taken[0].moved, "{taken:?}");
        assert!(!root.join("a/.git").exists());
        let batch = std::fs::read_dir(state.path().join(QUARANTINE_DIR))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let kept = batch.join("a/.git");
        assert_eq!(
            std::fs::read_to_string(kept.join("config")).unwrap(),
            "[core]\n"
        );
        assert_eq!(
            std::fs::read_link(kept.join("link")).unwrap(),
            Path::new("/etc/passwd")
        );
        assert_eq!(
            std::fs::read_to_string(kept.join("objects/shut/o")).unwrap(),
            "x"
        );
    }
}
