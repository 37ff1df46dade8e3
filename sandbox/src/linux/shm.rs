//! A slot's own `/dev/shm`: the folder its runs see there, writable, so that POSIX semaphores and
//! shared memory work (multiprocessing's `Pool`, `Queue`, `Lock`, `ProcessPoolExecutor`, joblib)
//! while no run reaches the host's `/dev/shm` or another slot's.
//!
//! It lies beside the slot's scratch (`<scratch>.shm`), not in it: the view binds the folder
//! itself, and a folder removed by a clean-up of the scratch would leave the bind on a deleted
//! folder. The slot empties it after a run that left something ([`SlotShm::empty`], with the
//! cgroups' leftovers) and removes it with the slot. Its size is bounded as the scratch's is:
//! by the file-size limit per file and the disk.

use std::io;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// How deep a run's folders in `/dev/shm` are followed when emptying it.
const MAX_DEPTH: usize = 64;

#[derive(Debug)]
pub(super) struct SlotShm {
    dir: PathBuf,
}

impl SlotShm {
    /// Makes the folder beside `scratch`, owner-only like the scratch.
    pub(super) fn new(scratch: &Path) -> io::Result<Self> {
        let mut name = scratch.as_os_str().to_os_string();
        name.push(".shm");
        let dir = PathBuf::from(name);
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let meta = std::fs::symlink_metadata(&dir)?;
                if !meta.is_dir() {
                    return Err(io::Error::other("a slot's shm folder is not a folder"));
                }
            }
            other => other?,
        }
        let shm = Self { dir };
        shm.empty();
        Ok(shm)
    }

    pub(super) fn path(&self) -> &Path {
        &self.dir
    }

    /// Nothing of a run is left in it.
    pub(super) fn is_empty(&self) -> bool {
        std::fs::read_dir(&self.dir).is_ok_and(|mut entries| entries.next().is_none())
    }

    /// Removes what runs left: links as links, folders a run locked (`chmod 000`) opened first.
    pub(super) fn empty(&self) {
        let _ = std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700));
        empty_dir(&self.dir, 0);
    }
}

impl Drop for SlotShm {
    fn drop(&mut self) {
        self.empty();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn empty_dir(dir: &Path, depth: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        // `file_type` does not follow links: a link is removed, never its target.
        match entry.file_type() {
            Ok(t) if t.is_dir() && depth < MAX_DEPTH => {
                let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700));
                empty_dir(&path, depth + 1);
                let _ = std::fs::remove_dir(&path);
            }
            // Deeper than the walk goes: what a run nested there would otherwise stay on disk,
            // and pile up run after run, until the server ends.
            Ok(t) if t.is_dir() => {
                let _ = std::fs::remove_dir_all(&path);
            }
            _ => {
                let _ = std::fs::remove_file(&path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_run_left_goes_and_the_folder_stays_until_the_slot_goes() {
        let root = tempfile::tempdir().unwrap();
        let scratch = root.path().join("slot-0");
        std::fs::create_dir(&scratch).unwrap();
        let outside = root.path().join("outside");
        std::fs::write(&outside, "keep").unwrap();
        let shm = SlotShm::new(&scratch).unwrap();
        assert!(shm.is_empty());
        std::fs::write(shm.path().join("sem.mp-1"), "x").unwrap();
        let locked = shm.path().join("locked");
        std::fs::create_dir_all(locked.join("deeper")).unwrap();
        std::os::unix::fs::symlink(&outside, locked.join("link")).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
        assert!(!shm.is_empty());
        shm.empty();
        assert!(shm.is_empty());
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        let dir = shm.path().to_path_buf();
        drop(shm);
        assert!(!dir.exists());
    }

    #[test]
    fn a_tree_nested_deeper_than_the_walk_goes_too() {
        let root = tempfile::tempdir().unwrap();
        let scratch = root.path().join("slot-0");
        std::fs::create_dir(&scratch).unwrap();
        let shm = SlotShm::new(&scratch).unwrap();
        let deep = (0..MAX_DEPTH + 16).fold(shm.path().to_path_buf(), |p, _| p.join("d"));
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("kept"), "x").unwrap();
        shm.empty();
        assert!(shm.is_empty());
    }
}
