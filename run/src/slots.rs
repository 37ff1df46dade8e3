//! Run slots: a scratch directory (a run's HOME and TMPDIR) with the sandbox rules made for it
//! (Linux: a Landlock ruleset and cgroups), made once and reused run after run.
//!
//! Making them per run cost more than everything else the server does for a run (two `mkdir`s
//! on ext4 with their `rmdir`s and block discards, two cgroups, a ruleset of a dozen paths). A
//! slot goes back to the pool after its run only when nothing of the run is left: no process is
//! in its cgroups, its `/dev/shm` is empty, and its directory holds only its empty output folder
//! (both with mode 0700). That check runs on a blocking thread after the run's lease is dropped,
//! off the run's response path; until it has passed the slot is in no one's hands, and a run
//! that needs a slot meanwhile waits for it rather than making a new one. A slot that fails the
//! check is cleaned there too and then returned, or dropped (removing its directory and cgroups)
//! when it cannot be cleaned; runs do not wait for a clean-up.
//!
//! Each slot's output folder (`PYRUN_OUTPUT_DIR`) is made with the slot and kept from run to run
//! (made again by the check when a run's artifacts took it): a slot handed out has it, empty.
//!
//! The scratch root is named `pyrun-mcp-<pid>-…`: a server killed before it could remove its
//! root (SIGKILL, power loss) leaves it behind, and the next server to start removes the roots
//! whose pid is no longer running (Unix; Windows' own temp clean-up handles its temp folder).
//!
//! Every removal (a run's clean-up, a slot or the pool dropped, the sweep) goes through
//! [`remove_tree`]: a run may `chmod 000` a folder it made (or its scratch itself), which its
//! owner can then neither list nor empty; owner rwx is given back to every folder first.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pyrun_sandbox::{Sandbox, SandboxError, SandboxSlot};

#[derive(Debug, thiserror::Error)]
pub enum SlotError {
    #[error("a scratch directory for the run could not be created: {0}")]
    Scratch(io::Error),
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
}

/// The free slots of one runner, under one private scratch root (removed with the pool).
#[derive(Debug)]
pub struct SlotPool {
    free: Mutex<Free>,
    /// Fired each time a check of a returned slot ends (the slot free, or being cleaned).
    checked: tokio::sync::Notify,
    next: AtomicU64,
    root: tempfile::TempDir,
}

#[derive(Debug, Default)]
struct Free {
    slots: Vec<Slot>,
    /// Slots returned by their run whose check has not ended yet.
    checking: usize,
}

impl Drop for SlotPool {
    fn drop(&mut self) {
        // Each slot removes its own rules and directory first; then whatever is left in the root
        // (`TempDir`'s own removal gives up on a folder its owner cannot enter).
        if let Ok(free) = self.free.get_mut() {
            free.slots.clear();
        }
        let _ = remove_tree(self.root.path());
    }
}

#[derive(Debug)]
pub struct Slot {
    dir: PathBuf,
    rules: SandboxSlot,
    /// Folders the sandbox made in `dir` for the run's view to mount on
    /// ([`Sandbox::scratch_mount_points`]): kept, empty, from run to run.
    mount_points: Vec<std::ffi::OsString>,
}

impl Slot {
    /// The slot's scratch directory: HOME and TMPDIR of its runs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn rules(&self) -> &SandboxSlot {
        &self.rules
    }

    /// True when the slot holds nothing of an earlier run: no process in its cgroups (looked at
    /// first: once none is left, nothing can change what is looked at next), and nothing in its
    /// directory but its own empty output folder (made when a run's artifacts took it), both
    /// given back mode 0700 if a run changed it.
    fn is_reusable(&self) -> bool {
        if !self.rules.is_idle() || !is_private_dir(&self.dir) {
            return false;
        }
        let output = self.dir.join(OUTPUT_DIR_NAME);
        let mut has_output = false;
        let only_output = std::fs::read_dir(&self.dir).is_ok_and(|entries| {
            entries.into_iter().all(|entry| {
                entry.is_ok_and(|e| {
                    if self.mount_points.contains(&e.file_name()) {
                        return is_empty_private_dir(&e.path());
                    }
                    has_output = e.file_name() == OUTPUT_DIR_NAME;
                    has_output && is_empty_private_dir(&output)
                })
            })
        });
        only_output && (has_output || make_private_dir(&output).is_ok())
    }

    /// Kills what the run left in the slot's cgroups and empties its directory (blocking).
    fn clean(&self) -> bool {
        self.rules.kill_leftovers();
        // First: a scratch the run made unreadable (`chmod 000 $HOME`) cannot be listed.
        let is_real_dir = std::fs::symlink_metadata(&self.dir).is_ok_and(|m| m.is_dir());
        let emptied = is_real_dir
            && set_private(&self.dir).is_ok()
            && match std::fs::read_dir(&self.dir) {
                Ok(entries) => entries.flatten().all(|entry| {
                    // The view's mount points stay (removing one would take its mount away).
                    if self.mount_points.contains(&entry.file_name()) {
                        return true;
                    }
                    let path = entry.path();
                    // `file_type` does not follow symlinks: a link is removed, never its target.
                    match entry.file_type() {
                        Ok(t) if t.is_dir() => remove_tree(&path).is_ok(),
                        Ok(_) => std::fs::remove_file(&path).is_ok(),
                        Err(_) => false,
                    }
                }),
                Err(_) => false,
            };
        emptied && self.is_reusable()
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // The rules (cgroups) go with `self.rules`; the directory and what is left in it here.
        let _ = remove_tree(&self.dir);
    }
}

impl SlotPool {
    pub fn new() -> io::Result<Self> {
        let temp = std::env::temp_dir();
        // tempfile makes the root owner-only (0700) on Unix.
        let root = tempfile::Builder::new()
            .prefix(&format!("{ROOT_PREFIX}{}-", std::process::id()))
            .tempdir_in(&temp)?;
        #[cfg(unix)]
        {
            // Off the start-up path: hundreds of stale roots take a while to remove.
            let _ = std::thread::Builder::new()
                .name("pyrun-sweep".into())
                .spawn(move || sweep_stale_roots(&temp));
        }
        Ok(Self {
            free: Mutex::new(Free::default()),
            checked: tokio::sync::Notify::new(),
            next: AtomicU64::new(0),
            root,
        })
    }

    /// A free slot (waiting for the checks of slots just returned, a few syscalls each), or a
    /// new one with `sandbox`'s rules. Dropping the lease gives it back.
    pub async fn take(self: &Arc<Self>, sandbox: &Sandbox) -> Result<SlotLease, SlotError> {
        let free = loop {
            let mut checked = std::pin::pin!(self.checked.notified());
            {
                let mut free = self.lock();
                if let Some(slot) = free.slots.pop() {
                    break Some(slot);
                }
                if free.checking == 0 {
                    break None;
                }
                // Registered before the lock is let go: a check that ends now is not missed.
                checked.as_mut().enable();
            }
            checked.await;
        };
        let slot = match free {
            Some(slot) => slot,
            None => self.make(sandbox)?,
        };
        Ok(SlotLease {
            pool: Arc::clone(self),
            slot: Some(slot),
        })
    }

    /// The private folder every slot's scratch is made in.
    pub fn root(&self) -> &Path {
        self.root.path()
    }

    /// Slots ready for a run now.
    pub fn free_count(&self) -> usize {
        self.lock().slots.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Free> {
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn make(&self, sandbox: &Sandbox) -> Result<Slot, SlotError> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let dir = self.root.path().join(format!("slot-{n}"));
        make_private_dir(&dir).map_err(SlotError::Scratch)?;
        if let Err(e) = make_private_dir(&dir.join(OUTPUT_DIR_NAME)) {
            let _ = remove_tree(&dir);
            return Err(SlotError::Scratch(e));
        }
        match sandbox.slot(&dir) {
            Ok(rules) => Ok(Slot {
                dir,
                rules,
                mount_points: sandbox.scratch_mount_points().to_vec(),
            }),
            Err(e) => {
                let _ = remove_tree(&dir);
                Err(e.into())
            }
        }
    }

    /// Checks a slot its run gave back, on a blocking thread (at once without a runtime):
    /// free again when nothing of the run is left, else cleaned (no run waits for that).
    fn give_back(self: Arc<Self>, slot: Slot) {
        self.lock().checking += 1;
        let check = Check(self);
        let check = move || {
            if slot.is_reusable() {
                check.done(Some(slot));
                return;
            }
            let pool = check.done(None);
            if slot.clean() {
                pool.lock().slots.push(slot);
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn_blocking(check)),
            Err(_) => check(),
        }
    }
}

/// A returned slot's check in progress: runs that want a slot wait for it to end, also when it
/// never ran (its thread refused at shutdown).
struct Check(Arc<SlotPool>);

impl Check {
    /// Ends the check, putting `slot` back when it passed.
    fn done(self, slot: Option<Slot>) -> Arc<SlotPool> {
        if let Some(slot) = slot {
            self.0.lock().slots.push(slot);
        }
        Arc::clone(&self.0)
    }
}

impl Drop for Check {
    fn drop(&mut self) {
        let mut free = self.0.lock();
        free.checking = free.checking.saturating_sub(1);
        drop(free);
        self.0.checked.notify_waiters();
    }
}

const ROOT_PREFIX: &str = "pyrun-mcp-";

/// Removes the scratch roots in `temp` of servers that are no longer running.
#[cfg(unix)]
fn sweep_stale_roots(temp: &Path) {
    remove_dead_servers_folders(temp, ROOT_PREFIX);
}

/// Removes the folders in `dir` named `{prefix}{pid}-…` whose server is no longer running: the
/// name carries the pid, and `kill(pid, 0)` answering ESRCH means no such process. Only real
/// folders this user owns are touched; a symlink is never followed (nor taken for a folder).
#[cfg(unix)]
pub(super) fn remove_dead_servers_folders(dir: &Path, prefix: &str) {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let me = rustix::process::geteuid().as_raw();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw)
        else {
            continue;
        };
        let gone = matches!(
            rustix::process::test_kill_process(pid),
            Err(rustix::io::Errno::SRCH)
        );
        let ours =
            std::fs::symlink_metadata(entry.path()).is_ok_and(|m| m.is_dir() && m.uid() == me);
        if gone && ours {
            let _ = remove_tree(&entry.path());
        }
    }
}

/// Removes the directory `path` and all it holds (a symlink at `path` is removed itself), also
/// when folders in it were made unreadable or unwritable to their owner: after a failed first
/// try, owner rwx is given back to every folder (without following symlinks) and it tries again.
/// Root needs no such help (it bypasses file modes), every other user does.
fn remove_tree(path: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            #[cfg(unix)]
            let _ = open_up(path);
            std::fs::remove_dir_all(path)
        }
        _ => Ok(()),
    }
}

/// How deep [`open_up`] goes: one open folder per level is held while walking.
#[cfg(unix)]
const OPEN_UP_MAX_DEPTH: usize = 256;

/// Gives owner rwx back to the folder `path` and every folder below it. Walks by file
/// descriptor and never follows a symlink: a name swapped for a link on the way is refused by
/// `O_NOFOLLOW` or `AT_SYMLINK_NOFOLLOW`, so no mode outside the tree is ever changed.
#[cfg(unix)]
fn open_up(path: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let name = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in a path"))?;
    pyrun_sandbox::os::let_owner_in(rustix::fs::CWD, &name)?;
    open_up_below(open_dir_at(rustix::fs::CWD, &name)?, 0)
}

#[cfg(unix)]
fn open_up_below(dir: std::os::fd::OwnedFd, depth: usize) -> io::Result<()> {
    use rustix::fs::{AtFlags, FileType};
    if depth >= OPEN_UP_MAX_DEPTH {
        return Err(io::Error::other("folders nested too deep to open up"));
    }
    let mut folders = Vec::new();
    for entry in rustix::fs::Dir::read_from(&dir)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == c"." || name == c".." {
            continue;
        }
        let is_dir = match entry.file_type() {
            FileType::Directory => true,
            // Some filesystems do not say in the listing.
            FileType::Unknown => rustix::fs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| FileType::from_raw_mode(st.st_mode) == FileType::Directory),
            _ => false,
        };
        if is_dir {
            folders.push(name.to_owned());
        }
    }
    // Best effort: a folder that cannot be opened up leaves the others to try.
    let mut first_error = None;
    for name in folders {
        let opened = pyrun_sandbox::os::let_owner_in(&dir, &name)
            .and_then(|()| open_dir_at(&dir, &name))
            .and_then(|sub| open_up_below(sub, depth + 1));
        if let Err(e) = opened {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[cfg(unix)]
fn open_dir_at(
    dir: impl std::os::fd::AsFd,
    name: &std::ffi::CStr,
) -> io::Result<std::os::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::openat(dir, name, flags, Mode::empty())?)
}

/// The name of a run's output folder inside its slot's scratch (`PYRUN_OUTPUT_DIR`).
pub const OUTPUT_DIR_NAME: &str = "output";

/// A real folder (not a link to one), empty, with (given back) its owner-only mode.
fn is_empty_private_dir(dir: &Path) -> bool {
    is_private_dir(dir) && std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_none())
}

/// A real folder (not a link to one), with its owner-only mode (given back if a run changed it:
/// a `chmod` only then).
fn is_private_dir(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir).is_ok_and(|meta| {
        #[cfg(unix)]
        let private = {
            use std::os::unix::fs::PermissionsExt;
            meta.permissions().mode() & 0o7777 == 0o700
        };
        #[cfg(not(unix))]
        let private = true;
        meta.is_dir() && (private || set_private(dir).is_ok())
    })
}

/// Makes the owner-only folder `dir`.
fn make_private_dir(dir: &Path) -> io::Result<()> {
    #[cfg_attr(not(unix), allow(unused_mut))]
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Gives `dir` back its owner-only mode, whatever a run set.
fn set_private(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        Ok(())
    }
}

/// A slot in use by one run; back to the pool (or cleaned, or removed) when dropped.
#[derive(Debug)]
pub struct SlotLease {
    pool: Arc<SlotPool>,
    slot: Option<Slot>,
}

impl std::ops::Deref for SlotLease {
    type Target = Slot;

    fn deref(&self) -> &Slot {
        // Only `drop` takes the slot out.
        self.slot.as_ref().unwrap_or_else(|| unreachable!())
    }
}

impl Drop for SlotLease {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            Arc::clone(&self.pool).give_back(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pyrun_sandbox::{SandboxMode, SandboxPolicy};

    fn off() -> Sandbox {
        Sandbox::new(SandboxPolicy::bare(SandboxMode::Off)).unwrap()
    }

    /// A slot taken outside any runtime: its lease's drop checks it at once.
    fn take(pool: &Arc<SlotPool>, sandbox: &Sandbox) -> SlotLease {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(pool.take(sandbox)).unwrap()
    }

    /// The names in a slot's folder: a clean one holds only its empty output folder.
    fn entries(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn an_untouched_slot_is_reused_as_is() {
        let pool = Arc::new(SlotPool::new().unwrap());
        let sandbox = off();
        let first = take(&pool, &sandbox);
        let dir = first.dir().to_path_buf();
        drop(first);
        assert_eq!(pool.free_count(), 1);
        let again = take(&pool, &sandbox);
        assert_eq!(again.dir(), dir);
        // Two at once get two different directories.
        let other = take(&pool, &sandbox);
        assert_ne!(other.dir(), again.dir());
    }

    #[test]
    fn a_used_slot_comes_back_empty_and_private() {
        let pool = Arc::new(SlotPool::new().unwrap());
        let sandbox = off();
        let lease = take(&pool, &sandbox);
        let dir = lease.dir().to_path_buf();
        std::fs::create_dir_all(dir.join(".local/lib/site-packages")).unwrap();
        std::fs::write(dir.join(".local/lib/site-packages/evil.pth"), "import os").unwrap();
        std::fs::write(dir.join("note.txt"), "left behind").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep.txt"), "not ours").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::os::unix::fs::symlink(outside.path(), dir.join("link")).unwrap();
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        // No runtime here: the slot is cleaned at once.
        drop(lease);
        let again = take(&pool, &sandbox);
        assert_eq!(again.dir(), dir);
        assert_eq!(entries(&dir), [OUTPUT_DIR_NAME], "slot not emptied");
        assert_eq!(entries(&dir.join(OUTPUT_DIR_NAME)).len(), 0);
        assert!(
            outside.path().join("keep.txt").exists(),
            "cleaning followed a symlink out of the slot"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700);
        }
    }

    /// The view's mount points (an interpreter under `/tmp`) are part of a clean slot: kept by
    /// the check and by the clean-up, whose removal would take the interpreter out of the view.
    #[test]
    fn a_slots_mount_points_are_kept_by_the_check_and_the_clean_up() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("slot");
        make_private_dir(&dir).unwrap();
        make_private_dir(&dir.join(OUTPUT_DIR_NAME)).unwrap();
        make_private_dir(&dir.join("interp")).unwrap();
        let slot = Slot {
            rules: off().slot(&dir).unwrap(),
            dir: dir.clone(),
            mount_points: vec!["interp".into()],
        };
        assert!(slot.is_reusable());
        std::fs::write(dir.join("note.txt"), "left behind").unwrap();
        assert!(!slot.is_reusable());
        assert!(slot.clean());
        let mut left = entries(&dir);
        left.sort();
        assert_eq!(left, ["interp", OUTPUT_DIR_NAME]);
    }

    /// In the server the check runs after the lease is dropped, on a blocking thread: the next
    /// run waits for it and gets the same slot (a new one would build its cgroups and view), and
    /// never a slot that still holds something of the last run.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_returned_slot_is_checked_before_the_next_run_gets_it() {
        let pool = Arc::new(SlotPool::new().unwrap());
        let sandbox = off();
        let lease = pool.take(&sandbox).await.unwrap();
        let dir = lease.dir().to_path_buf();
        assert_eq!(
            entries(&dir),
            [OUTPUT_DIR_NAME],
            "a new slot has its output folder"
        );
        for _ in 0..20 {
            let returned = pool.take(&sandbox).await.unwrap();
            assert_ne!(returned.dir(), dir, "a slot in use was handed out twice");
            let again = returned.dir().to_path_buf();
            drop(returned);
            let next = pool.take(&sandbox).await.unwrap();
            assert_eq!(
                next.dir(),
                again,
                "a new slot was made while one was being checked"
            );
        }
        let dirty = pool.take(&sandbox).await.unwrap();
        std::fs::write(dirty.dir().join("left.txt"), "x").unwrap();
        std::fs::remove_dir(dirty.dir().join(OUTPUT_DIR_NAME)).unwrap();
        drop(dirty);
        let after = pool.take(&sandbox).await.unwrap();
        assert_eq!(
            entries(after.dir()),
            [OUTPUT_DIR_NAME],
            "handed out before it was clean"
        );
        drop(lease);
    }

    #[cfg(unix)]
    #[test]
    fn roots_of_dead_servers_are_swept_and_live_ones_kept() {
        let temp = tempfile::tempdir().unwrap();
        // A pid that cannot be running (above Linux's and macOS's pid_max).
        let dead = temp.path().join(format!("{ROOT_PREFIX}2100000000-abc"));
        std::fs::create_dir_all(dead.join("slot-0/.cache")).unwrap();
        std::fs::write(dead.join("slot-0/.cache/x"), "left").unwrap();
        let live = temp
            .path()
            .join(format!("{ROOT_PREFIX}{}-abc", std::process::id()));
        std::fs::create_dir(&live).unwrap();
        let not_ours = temp.path().join("pyrun-mcp-notapid");
        std::fs::create_dir(&not_ours).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep.txt"), "not ours").unwrap();
        let link = temp.path().join(format!("{ROOT_PREFIX}2100000001-lnk"));
        std::os::unix::fs::symlink(outside.path(), &link).unwrap();

        sweep_stale_roots(temp.path());

        assert!(!dead.exists(), "a dead server's root was kept");
        assert!(live.exists(), "a running server's root was removed");
        assert!(not_ours.exists(), "a directory without a pid was removed");
        assert!(
            outside.path().join("keep.txt").exists(),
            "the sweep followed a symlink"
        );
    }

    /// Root bypasses file modes, so a folder its owner cannot enter shows nothing when the tests
    /// run as root: then the test runs again in a child as `nobody`. True in the parent, whose
    /// job is done once the child passed.
    #[cfg(unix)]
    fn rerun_as_nobody(test: &str) -> bool {
        use std::os::unix::process::CommandExt;
        const CHILD: &str = "PYRUN_TEST_AS_NOBODY";
        if std::env::var_os(CHILD).is_some() || !rustix::process::geteuid().is_root() {
            return false;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([test, "--exact", "--test-threads=1", "--nocapture"])
            .env(CHILD, "1")
            .env_remove("TMPDIR")
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && said.contains("1 passed"),
            "as nobody: {said}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        true
    }

    /// `dir/d/e/f.txt` with `d` and `e` made unreadable to their owner (`chmod 000`), and a
    /// link `d/e/out` to `outside`.
    #[cfg(unix)]
    fn locked_tree(dir: &Path, outside: &Path) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir.join("d/e")).unwrap();
        std::fs::write(dir.join("d/e/f.txt"), "x").unwrap();
        std::os::unix::fs::symlink(outside, dir.join("d/e/out")).unwrap();
        for locked in ["d/e", "d"] {
            std::fs::set_permissions(dir.join(locked), std::fs::Permissions::from_mode(0o000))
                .unwrap();
        }
    }

    #[cfg(unix)]
    fn mode(path: &Path) -> u32 {
        use std::os::unix::fs::PermissionsExt;
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    }

    #[cfg(unix)]
    #[test]
    fn folders_a_run_locked_go_with_the_clean_up_the_pool_and_the_sweep() {
        use std::os::unix::fs::PermissionsExt;
        // This test's path in the test binary (`slots::tests::...`: the module path less the
        // crate's name).
        let module = module_path!();
        let name = format!(
            "{}::folders_a_run_locked_go_with_the_clean_up_the_pool_and_the_sweep",
            module.split_once("::").map_or(module, |(_, path)| path)
        );
        if rerun_as_nobody(&name) {
            return;
        }
        // A folder the walk must not touch (its mode would become 0700), reached through a link
        // in the locked tree.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep.txt"), "not ours").unwrap();
        std::fs::set_permissions(outside.path(), std::fs::Permissions::from_mode(0o750)).unwrap();

        // The run's clean-up: a locked tree, and the scratch itself locked.
        let pool = Arc::new(SlotPool::new().unwrap());
        let sandbox = off();
        let lease = take(&pool, &sandbox);
        let dir = lease.dir().to_path_buf();
        locked_tree(&dir, outside.path());
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o000)).unwrap();
        drop(lease);
        assert_eq!(pool.free_count(), 1, "the slot was not cleaned for reuse");
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(entries(&dir), [OUTPUT_DIR_NAME], "slot not emptied");
        assert_eq!(mode(outside.path()), 0o750, "the walk followed a symlink");
        assert!(outside.path().join("keep.txt").exists());

        // The pool's drop (what is left in its root, as after a slot that could not be cleaned).
        let root = pool.root.path().to_path_buf();
        locked_tree(&root.join("stray"), outside.path());
        drop(pool);
        assert!(!root.exists(), "scratch root left behind");

        // The sweep of a dead server's root.
        let temp = tempfile::tempdir().unwrap();
        let dead = temp.path().join(format!("{ROOT_PREFIX}2100000000-abc"));
        std::fs::create_dir_all(dead.join("slot-0")).unwrap();
        locked_tree(&dead.join("slot-0"), outside.path());
        std::fs::set_permissions(dead.join("slot-0"), std::fs::Permissions::from_mode(0o000))
            .unwrap();
        sweep_stale_roots(temp.path());
        assert!(!dead.exists(), "a dead server's locked root was kept");
        assert_eq!(mode(outside.path()), 0o750, "the walk followed a symlink");
    }

    #[test]
    fn slots_and_their_root_go_with_the_pool() {
        let pool = Arc::new(SlotPool::new().unwrap());
        let root = pool.root.path().to_path_buf();
        let lease = take(&pool, &off());
        std::fs::write(lease.dir().join("x"), "1").unwrap();
        drop(lease);
        drop(pool);
        assert!(!root.exists(), "scratch root left behind");
    }
}
