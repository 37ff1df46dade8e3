//! Install roots that servers killed without a chance to clean up left in the temp folder (a
//! `kill -9`, the OOM killer, a lost machine): each holds the pip/uv cache of its server, tens of
//! MB. A live root holds a lock for its server's lifetime; a starting server removes every root
//! of the same user whose lock it can take.
//!
//! The lock file gets its name only once it is locked (made under a temporary name, locked, then
//! renamed), so a root whose lock can be taken is never one a starting server is still setting
//! up. A root without a lock file (an older server's, or one just made) is left alone.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

/// The prefix every install root's name starts with.
pub(super) const PREFIX: &str = "pyrun-mcp-install-";
/// The lock file in a root, held by its server.
const HELD: &str = ".held";

/// Locks `root` for this server's lifetime: keep the returned file open.
pub(super) fn hold(root: &Path) -> io::Result<File> {
    let making = root.join(".held.new");
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&making)?;
    file.try_lock().map_err(io::Error::from)?;
    std::fs::rename(&making, root.join(HELD))?;
    Ok(file)
}

/// The roots in `temp` whose server is gone, leaving out `ours`: real folders of this user with
/// a lock file nobody holds. The returned locks are held until the roots are removed.
fn orphans(temp: &Path, ours: &Path) -> Vec<(PathBuf, File)> {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let named = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(PREFIX));
        if !named || path == ours || !owned_folder(&path) {
            continue;
        }
        let Some(lock) = open_lock(&path.join(HELD)) else {
            continue;
        };
        if lock.try_lock().is_ok() && owned_folder(&path) {
            out.push((path, lock));
        }
    }
    out
}

/// A root's lock file, when it is a regular file: never through a link, and never waiting on a
/// FIFO planted under its name (an open for reading would wait for a writer for ever).
fn open_lock(path: &Path) -> Option<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(path).ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// A real folder (never a link) that this process's user owns.
fn owned_folder(path: &Path) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return false;
    };
    if !meta.is_dir() {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.uid() == rustix::process::geteuid().as_raw()
    }
    #[cfg(not(unix))]
    {
        true
    }
}

/// Removes the roots of dead servers in `temp` (never `ours`), on a thread of its own: hundreds
/// of caches take seconds, and nothing waits for them.
pub(super) fn sweep_later(temp: PathBuf, ours: PathBuf) {
    let spawned = std::thread::Builder::new()
        .name("pyrun-stale-installs".into())
        .spawn(move || sweep(&temp, &ours));
    if let Err(e) = spawned {
        tracing::debug!(%e, "no thread to remove dead servers' install roots");
    }
}

/// Removes the roots of dead servers in `temp`; returns how many went.
fn sweep(temp: &Path, ours: &Path) -> usize {
    let mut removed = 0;
    for (root, lock) in orphans(temp, ours) {
        match remove_root(&root) {
            Ok(()) => removed += 1,
            Err(e) => {
                tracing::warn!(%e, root = %root.display(), "a dead server's install root stays")
            }
        }
        drop(lock);
    }
    if removed > 0 {
        tracing::info!(
            removed,
            "removed install roots that killed servers left behind"
        );
    }
    removed
}

/// Removes a dead server's root: its folders opened up for their owner first (a build step may
/// have left one read-only), everything but the lock, then the lock, then the root. A root that
/// cannot be emptied keeps its lock, so that the next server to start tries again.
fn remove_root(root: &Path) -> io::Result<()> {
    open_up(root);
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        if entry.file_name() == HELD {
            continue;
        }
        let path = entry.path();
        if entry.file_type()?.is_dir() {
            std::fs::remove_dir_all(&path)?;
        } else {
            std::fs::remove_file(&path)?;
        }
    }
    std::fs::remove_file(root.join(HELD))?;
    std::fs::remove_dir(root)
}

/// Gives the owner rwx on `dir` and every folder under it (never through a link), so that
/// their entries can be removed. Needless for root, which permissions do not stop.
fn open_up(dir: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if rustix::process::geteuid().is_root() {
            return;
        }
        let Ok(meta) = std::fs::symlink_metadata(dir) else {
            return;
        };
        if !meta.is_dir() {
            return;
        }
        let mode = meta.permissions().mode();
        if mode & 0o700 != 0o700 {
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o700));
        }
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    open_up(&entry.path());
                }
            }
        }
    }
    #[cfg(not(unix))]
    let _ = dir;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(temp: &Path, name: &str) -> PathBuf {
        let path = temp.join(format!("{PREFIX}{name}"));
        std::fs::create_dir(&path).unwrap();
        std::fs::create_dir(path.join("cache")).unwrap();
        std::fs::write(path.join("cache/wheel"), "x").unwrap();
        path
    }

    #[test]
    fn a_held_root_stays_and_an_unheld_one_goes() {
        let temp = tempfile::tempdir().unwrap();
        let live = root(temp.path(), "live");
        let _held = hold(&live).unwrap();
        let dead = root(temp.path(), "dead");
        drop(hold(&dead).unwrap());
        let ours = root(temp.path(), "ours");
        drop(hold(&ours).unwrap());

        assert_eq!(sweep(temp.path(), &ours), 1);
        assert!(live.join("cache/wheel").exists());
        assert!(!dead.exists());
        assert!(ours.join("cache/wheel").exists());
    }

    #[test]
    fn a_root_without_a_lock_another_name_or_a_link_stays() {
        let temp = tempfile::tempdir().unwrap();
        let unlocked = root(temp.path(), "old");
        let other = temp.path().join("someone-else");
        std::fs::create_dir(&other).unwrap();
        drop(hold(&other).unwrap());
        let target = tempfile::tempdir().unwrap();
        drop(hold(target.path()).unwrap());
        #[cfg(unix)]
        std::os::unix::fs::symlink(target.path(), temp.path().join(format!("{PREFIX}link")))
            .unwrap();

        assert_eq!(sweep(temp.path(), Path::new("/nonexistent")), 0);
        assert!(unlocked.join("cache/wheel").exists());
        assert!(other.join(HELD).exists());
        assert!(target.path().join(HELD).exists());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_fifo_for_a_lock_never_blocks_the_sweep() {
        let temp = tempfile::tempdir().unwrap();
        let planted = root(temp.path(), "fifo");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            planted.join(HELD),
            rustix::fs::Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let dead = root(temp.path(), "dead");
        drop(hold(&dead).unwrap());
        assert_eq!(sweep(temp.path(), Path::new("/nonexistent")), 1);
        assert!(planted.exists() && !dead.exists());
    }

    #[test]
    fn a_lock_being_made_is_never_taken_for_a_dead_one() {
        let temp = tempfile::tempdir().unwrap();
        let starting = root(temp.path(), "starting");
        // Between its folder and its lock: no `.held` yet, only the file being made.
        std::fs::write(starting.join(".held.new"), "").unwrap();
        assert_eq!(sweep(temp.path(), Path::new("/nonexistent")), 0);
        assert!(starting.exists());
    }
}
