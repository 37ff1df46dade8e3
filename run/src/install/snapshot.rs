//! The venv as it was before an install step, kept so that a failed step leaves nothing: a
//! hard-link copy of the venv's entries, made inside the venv itself
//! (`.venv/.pyrun-install/before/`) before the step, dropped when it succeeds, and moved back in
//! place of whatever the step left when it fails.
//!
//! Why hard links: a venv with numpy, pandas and scikit-learn holds ~11,000 files and ~400 MB; a
//! copy of the bytes costs seconds and the disk twice, a link per file costs no data. pip and uv
//! never write an installed file in place (pip unlinks before writing, writes RECORD beside and
//! renames; uninstalls move files away), so the linked inodes keep the old contents. Code
//! already planted in the venv could write one in place: it could change the venv anyway.
//!
//! Why inside the venv: a run sees the venv read-only, so it cannot write the copy's shared
//! inodes through it; a copy anywhere else in the project would be a second, writable name of
//! the venv's files, and outside the projects folder a link may not reach (another file system).
//!
//! Killed server: the copy is whole once `COMPLETE` exists in `.pyrun-install`; the next
//! install into the project finds it first ([`recover`]) and puts it back: a step that never
//! finished is undone before anything else runs. Putting back has two phases, each a rename per
//! top-level entry, repeated safely after a kill: the step's entries move into
//! `.pyrun-install/failed/` (then `MOVED` marks it done), the copy's back into the venv. A
//! finished snapshot is renamed `.pyrun-discard` (one atomic step), then removed by a
//! [`Discard`]: unlinking ~12,000 names costs seconds, so the caller may do it after answering.

// The copy is made on Linux only, where installs run.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use std::fs::File;
use std::io;

/// The snapshot's folder in the venv, and what a finished one is renamed to.
const SNAPSHOT: &str = ".pyrun-install";
const DISCARD: &str = ".pyrun-discard";
const BEFORE: &str = "before";
const FAILED: &str = "failed";
/// The copy is whole; the step's entries are moved aside.
const COMPLETE: &str = "COMPLETE";
const MOVED: &str = "MOVED";

/// Whether a top-level name of the venv is this module's own.
fn ours(name: &[u8]) -> bool {
    name == SNAPSHOT.as_bytes() || name == DISCARD.as_bytes()
}

/// A taken snapshot of a venv, held by its open folder: put back on drop unless kept.
pub(super) struct VenvSnapshot {
    venv: File,
    settled: bool,
}

impl VenvSnapshot {
    /// Puts back what an earlier, unfinished install left (see [`recover`]), then copies the
    /// venv's entries. Blocking.
    pub(super) fn take(venv: &File) -> io::Result<Self> {
        let venv = venv.try_clone()?;
        recover(&venv)?;
        imp::take(&venv)?;
        Ok(Self {
            venv,
            settled: false,
        })
    }

    /// The step succeeded: the copy is set aside, to be removed. Blocking.
    pub(super) fn keep(mut self) -> io::Result<Discard> {
        self.settled = true;
        imp::retire(&self.venv)?;
        Ok(Discard {
            venv: self.venv.try_clone()?,
        })
    }

    /// The step failed: the venv is put back as it was; what the step left is set aside, to be
    /// removed. Blocking.
    pub(super) fn put_back(mut self) -> io::Result<Discard> {
        self.settled = true;
        imp::put_back(&self.venv)?;
        Ok(Discard {
            venv: self.venv.try_clone()?,
        })
    }
}

/// A snapshot set aside (`.pyrun-discard` in the venv), to be removed.
pub(super) struct Discard {
    venv: File,
}

impl Discard {
    /// Removes it. Blocking; a server that dies first leaves it to the next install's
    /// [`recover`].
    pub(super) fn remove(self) {
        if let Err(e) = imp::remove_retired(&self.venv) {
            tracing::warn!(%e, "an install's venv snapshot was not removed");
        }
    }
}

impl Drop for VenvSnapshot {
    fn drop(&mut self) {
        if !self.settled {
            if let Err(e) = imp::put_back(&self.venv).and_then(|()| imp::remove_retired(&self.venv))
            {
                tracing::warn!(%e, "a venv was not put back after a failed install");
            }
        }
    }
}

/// Makes the snapshot's folder in `venv` (empty, owner-only) before the install step's view is
/// built, and returns it open: the view binds it read-only, so the step (a hostile wheel's
/// `*.data/data/` files land in the venv's root) can neither plant files in the copy that is put
/// back nor forge its markers. Blocking.
pub(super) fn prepare(venv: &File) -> io::Result<File> {
    imp::prepare(venv)
}

/// Its name in the venv, for the view's read-only bind.
pub(super) const SNAPSHOT_DIR: &str = SNAPSHOT;

/// Undoes what an install that never finished left in `venv` (a server killed during a step):
/// a whole copy is put back, a partial one (the step had not started) removed, a discarded one
/// removed. Blocking.
pub(super) fn recover(venv: &File) -> io::Result<()> {
    imp::recover(venv)
}

#[cfg(target_os = "linux")]
mod imp {
    use std::fs::File;
    use std::io;
    use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

    use rustix::fs::{
        linkat, mkdirat, openat, readlinkat, renameat, statat, symlinkat, AtFlags, Dir, FileType,
        Mode, OFlags,
    };

    use super::{ours, BEFORE, COMPLETE, DISCARD, FAILED, MOVED, SNAPSHOT};
    use crate::install::venv::fd_path;

    fn open_dir(at: BorrowedFd<'_>, name: &str) -> io::Result<OwnedFd> {
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        Ok(openat(at, name, flags, Mode::empty())?)
    }

    fn exists(at: BorrowedFd<'_>, name: &str) -> bool {
        statat(at, name, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// The names in a folder, `.` and `..` left out.
    fn names(dir: BorrowedFd<'_>) -> io::Result<Vec<std::ffi::CString>> {
        let mut out = Vec::new();
        for entry in Dir::read_from(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            if name.to_bytes() != b"." && name.to_bytes() != b".." {
                out.push(name.to_owned());
            }
        }
        Ok(out)
    }

    /// Removes `name` in `at`, a folder with everything in it (never through a link).
    fn remove(at: &File, name: &str) -> io::Result<()> {
        match std::fs::remove_dir_all(fd_path(at).join(name)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }

    pub(super) fn prepare(venv: &File) -> io::Result<File> {
        match mkdirat(venv, SNAPSHOT, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let snapshot = open_dir(venv.as_fd(), SNAPSHOT)?;
        if !names(snapshot.as_fd())?.is_empty() {
            return Err(io::Error::other("the venv's snapshot folder is not empty"));
        }
        Ok(File::from(snapshot))
    }

    pub(super) fn take(venv: &File) -> io::Result<()> {
        // Made empty by `prepare` (before the step's view), or here.
        match mkdirat(venv, SNAPSHOT, Mode::from_raw_mode(0o700)) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let snapshot = open_dir(venv.as_fd(), SNAPSHOT)?;
        mkdirat(&snapshot, BEFORE, Mode::from_raw_mode(0o755))?;
        let before = open_dir(snapshot.as_fd(), BEFORE)?;
        for name in names(venv.as_fd())? {
            if !ours(name.to_bytes()) {
                copy(venv.as_fd(), before.as_fd(), &name)?;
            }
        }
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC;
        drop(openat(
            &snapshot,
            COMPLETE,
            flags,
            Mode::from_raw_mode(0o600),
        )?);
        Ok(())
    }

    /// `name` of `from` linked into `to`: folders made anew and walked, files hard-linked,
    /// links copied as links, anything else left out.
    fn copy(from: BorrowedFd<'_>, to: BorrowedFd<'_>, name: &std::ffi::CStr) -> io::Result<()> {
        let stat = statat(from, name, AtFlags::SYMLINK_NOFOLLOW)?;
        match FileType::from_raw_mode(stat.st_mode) {
            FileType::Directory => {
                mkdirat(to, name, Mode::from_raw_mode(stat.st_mode & 0o7777))?;
                let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                let src = openat(from, name, flags, Mode::empty())?;
                let dst = openat(to, name, flags, Mode::empty())?;
                for child in names(src.as_fd())? {
                    copy(src.as_fd(), dst.as_fd(), &child)?;
                }
            }
            FileType::RegularFile => linkat(from, name, to, name, AtFlags::empty())?,
            FileType::Symlink => {
                let target = readlinkat(from, name, Vec::new())?;
                symlinkat(target.as_c_str(), to, name)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// The snapshot renamed out of the way (one atomic step: it is no longer put back).
    pub(super) fn retire(venv: &File) -> io::Result<()> {
        // A `.pyrun-discard` here is an earlier one not yet removed, or one the step made (it
        // may write the venv's root): either goes, or the rename would fail.
        if exists(venv.as_fd(), DISCARD) {
            remove(venv, DISCARD)?;
        }
        match renameat(venv, SNAPSHOT, venv, DISCARD) {
            Ok(()) | Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    pub(super) fn remove_retired(venv: &File) -> io::Result<()> {
        remove(venv, DISCARD)
    }

    pub(super) fn put_back(venv: &File) -> io::Result<()> {
        let snapshot = open_dir(venv.as_fd(), SNAPSHOT)?;
        if !exists(snapshot.as_fd(), COMPLETE) {
            // The copy was never whole: the step never ran, the venv is as it was.
            return retire(venv);
        }
        if !exists(snapshot.as_fd(), MOVED) {
            match mkdirat(&snapshot, FAILED, Mode::from_raw_mode(0o700)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
            let failed = open_dir(snapshot.as_fd(), FAILED)?;
            for name in names(venv.as_fd())? {
                if !ours(name.to_bytes()) {
                    renameat(venv, &name, &failed, &name)?;
                }
            }
            let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::CLOEXEC;
            drop(openat(&snapshot, MOVED, flags, Mode::from_raw_mode(0o600))?);
        }
        let before = open_dir(snapshot.as_fd(), BEFORE)?;
        for name in names(before.as_fd())? {
            renameat(&before, &name, venv, &name)?;
        }
        retire(venv)
    }

    pub(super) fn recover(venv: &File) -> io::Result<()> {
        if exists(venv.as_fd(), DISCARD) {
            remove(venv, DISCARD)?;
        }
        if exists(venv.as_fd(), SNAPSHOT) {
            tracing::warn!("an install that never finished is undone first");
            put_back(venv)?;
            remove_retired(venv)?;
        }
        Ok(())
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::fs::File;
    use std::io;

    // Installs run on Linux only (see `InstallError::Unsupported`).
    pub(super) fn prepare(_: &File) -> io::Result<File> {
        Err(io::Error::other("installs need Linux"))
    }
    pub(super) fn take(_: &File) -> io::Result<()> {
        Err(io::Error::other("installs need Linux"))
    }
    pub(super) fn retire(_: &File) -> io::Result<()> {
        Ok(())
    }
    pub(super) fn remove_retired(_: &File) -> io::Result<()> {
        Ok(())
    }
    pub(super) fn put_back(_: &File) -> io::Result<()> {
        Ok(())
    }
    pub(super) fn recover(_: &File) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::path::Path;

    fn listing(dir: &Path) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let meta = std::fs::symlink_metadata(e.path()).unwrap();
                let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
                if meta.is_dir() {
                    stack.push(e.path());
                }
                out.push((rel, if meta.is_file() { meta.len() } else { 0 }));
            }
        }
        out.sort();
        out
    }

    fn venv() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path().join("lib/site-packages/old");
        std::fs::create_dir_all(&site).unwrap();
        std::fs::write(site.join("__init__.py"), "OLD = 1\n").unwrap();
        std::fs::write(dir.path().join("pyvenv.cfg"), "home = /usr\n").unwrap();
        std::os::unix::fs::symlink("/usr/bin/python3", dir.path().join("python")).unwrap();
        dir
    }

    /// What a failed step did: added a package, replaced a file (unlink, write), removed one.
    fn a_step(dir: &Path) {
        let site = dir.join("lib/site-packages");
        std::fs::create_dir_all(site.join("new")).unwrap();
        std::fs::write(site.join("new/big.bin"), vec![0u8; 4096]).unwrap();
        std::fs::remove_file(site.join("old/__init__.py")).unwrap();
        std::fs::write(site.join("old/__init__.py"), "OLD = 2 # replaced\n").unwrap();
        std::fs::remove_file(dir.join("pyvenv.cfg")).unwrap();
    }

    #[test]
    fn a_failed_step_is_put_back_and_a_kept_one_stays() {
        let dir = venv();
        let before = listing(dir.path());
        let held = File::open(dir.path()).unwrap();
        let snapshot = VenvSnapshot::take(&held).unwrap();
        a_step(dir.path());
        snapshot.put_back().unwrap().remove();
        assert_eq!(listing(dir.path()), before);
        let old = dir.path().join("lib/site-packages/old/__init__.py");
        assert_eq!(std::fs::read_to_string(&old).unwrap(), "OLD = 1\n");

        let snapshot = VenvSnapshot::take(&held).unwrap();
        a_step(dir.path());
        snapshot.keep().unwrap().remove();
        assert!(!dir.path().join(SNAPSHOT).exists() && !dir.path().join(DISCARD).exists());
        assert!(dir.path().join("lib/site-packages/new/big.bin").is_file());
        assert_eq!(
            std::fs::read_to_string(&old).unwrap(),
            "OLD = 2 # replaced\n"
        );
    }

    #[test]
    fn a_snapshot_left_by_a_killed_server_is_put_back_by_the_next_install() {
        let dir = venv();
        let before = listing(dir.path());
        let held = File::open(dir.path()).unwrap();
        let snapshot = VenvSnapshot::take(&held).unwrap();
        a_step(dir.path());
        std::mem::forget(snapshot); // the server died here
        recover(&held).unwrap();
        assert_eq!(listing(dir.path()), before);
        // Killed while putting back, after the step's entries moved aside.
        let snapshot = VenvSnapshot::take(&held).unwrap();
        a_step(dir.path());
        std::mem::forget(snapshot);
        let snap = dir.path().join(SNAPSHOT);
        std::fs::create_dir(snap.join(FAILED)).unwrap();
        std::fs::rename(dir.path().join("lib"), snap.join(FAILED).join("lib")).unwrap();
        recover(&held).unwrap();
        assert_eq!(listing(dir.path()), before);
    }
}
