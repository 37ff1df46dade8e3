//! The run's own kernel uid (the `run-uid` layer): for a root server, runs, sessions and installs
//! run under [`RUN_KUID`], an unprivileged kernel uid and gid that nothing else on the host uses,
//! instead of keeping root's kernel uid 0 inside their user namespace.
//!
//! Why: with uid 0, a run owned every root-owned file it could name; the read-only view and
//! Landlock were all that kept it from them. With its own uid it is "others" to every host file.
//! The folders a run must own (the projects folder, the slot's scratch and `/dev/shm`, the
//! bytecode cache, the support modules, an install's venv and cache) are attached to its view as
//! idmapped mounts that show their on-disk owner as [`RUN_KUID`]: a run reads and writes them as
//! their owner, and what it makes there belongs on disk to the folder's owner, not to the run's
//! uid. Files of any other owner in them stay out of its reach (e.g. a 0600 file of uid 12345).
//!
//! Only root in the host's user namespace may make an idmapped mount (from inside any user
//! namespace it is `EPERM`), so the server clones each folder detached (`open_tree` with
//! `OPEN_TREE_CLONE`), gives the clone its idmap (`mount_setattr` with `MOUNT_ATTR_IDMAP` and a
//! user namespace whose map sends the folder's owner to [`RUN_KUID`], made once per owner and
//! kept), and hands the clone to the child building the view, which attaches it (`move_mount`).
//! A clone is used up by its move: one per placed folder per view build.
//!
//! Filesystems that cannot idmap (overlayfs answers `EINVAL`, NFS, 9p) keep today's behaviour:
//! [`Idmaps::probe`] tries each folder a view places once at start and the server says so.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use super::mount_op::{cstring, MountAttr, AT_RECURSIVE, MOUNT_ATTR_IDMAP, OPEN_TREE_CLONE};
use super::namespaces::{die_with_parent, wait_status};

/// The kernel uid and gid of every run of a root server in this mode: fixed, and far above the
/// ranges distributions hand out (`/etc/login.defs` ends at 60000, systemd's dynamic users at
/// 65519; `subuid` ranges start at 100000 and would need some 32,000 users to reach it). The
/// server keeps uid 0 for runs when `/etc/passwd` or `/etc/group` names it.
pub(super) const RUN_KUID: u32 = 0x7e57_0000 + 0x2a;

/// Set when a projects folder of this process could not be idmapped.
static PROJECTS_CANNOT_IDMAP: AtomicBool = AtomicBool::new(false);

/// The idmap user namespaces made so far, one per on-disk owner (uid, gid).
#[derive(Debug, Default)]
pub(super) struct Idmaps {
    by_owner: Mutex<HashMap<(u32, u32), OwnedFd>>,
}

impl Idmaps {
    /// `Some` when this server may give runs their own uid: it runs as root, and `projects`
    /// (where runs write), each of `owned` (the other folders its views place: cache, support
    /// modules, writable trees) and the temp folder (where slot scratches are made) can be
    /// idmapped. Says why not otherwise.
    ///
    /// An install's sandbox has no projects folder (its folders are granted per install): it
    /// follows the process's projects folder when one was probed and failed (an install's
    /// venv lies in it).
    pub(super) fn probe(projects: Option<&Path>, owned: &[&Path]) -> Option<Self> {
        if !rustix::process::geteuid().is_root() {
            return None;
        }
        if projects.is_none() && PROJECTS_CANNOT_IDMAP.load(Ordering::Relaxed) {
            return None;
        }
        if let Some(file) = named_in_account_files() {
            tracing::warn!(
                "sandbox: runs keep the server's kernel uid 0: {file} names the id runs would \
                 take ({RUN_KUID}); it must belong to nothing else"
            );
            return None;
        }
        let idmaps = Self::default();
        if let Some(Err(e)) = projects.map(|folder| idmaps.clone_tree(folder)) {
            PROJECTS_CANNOT_IDMAP.store(true, Ordering::Relaxed);
            tracing::warn!(
                error = %e,
                "sandbox: runs keep the server's kernel uid 0: the projects folder's \
                 filesystem cannot be idmapped (overlayfs, NFS and 9p cannot)"
            );
            return None;
        }
        let temp = std::env::temp_dir();
        for folder in owned.iter().copied().chain([temp.as_path()]) {
            if let Err(e) = idmaps.clone_tree(folder) {
                tracing::warn!(
                    error = %e,
                    folder = %folder.display(),
                    "sandbox: runs keep the server's kernel uid 0: a folder they must own \
                     (the temp folder holds their scratch) cannot be idmapped (overlayfs, NFS \
                     and 9p cannot)"
                );
                return None;
            }
        }
        Some(idmaps)
    }

    /// A detached copy of the tree at `path` (recursive) that shows the owner of `path` as
    /// [`RUN_KUID`], for a view builder to attach.
    pub(super) fn clone_tree(&self, path: &Path) -> io::Result<OwnedFd> {
        let meta = std::fs::metadata(path)?;
        let userns = self.userns_for(meta.uid(), meta.gid())?;
        let path = cstring(path)?;
        // SAFETY: open_tree takes a NUL-terminated path and flags; the fd it returns is fresh.
        let tree = unsafe {
            libc::syscall(
                libc::SYS_open_tree,
                libc::AT_FDCWD,
                path.as_ptr(),
                OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | AT_RECURSIVE,
            )
        };
        if tree < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `tree` is a fresh fd owned from here.
        let tree = unsafe { OwnedFd::from_raw_fd(tree as libc::c_int) };
        let attr = MountAttr {
            attr_set: MOUNT_ATTR_IDMAP,
            attr_clr: 0,
            propagation: 0,
            userns_fd: userns.as_raw_fd() as u64,
        };
        // SAFETY: mount_setattr on a detached tree we own, with a valid attr struct and its size.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mount_setattr,
                tree.as_raw_fd(),
                c"".as_ptr(),
                libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
                &attr as *const MountAttr,
                std::mem::size_of::<MountAttr>(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(tree)
    }

    /// The user namespace mapping `(uid, gid)` to [`RUN_KUID`], made on first use.
    fn userns_for(&self, uid: u32, gid: u32) -> io::Result<OwnedFd> {
        let mut by_owner = self
            .by_owner
            .lock()
            .map_err(|_| io::Error::other("the idmap cache's lock was poisoned"))?;
        if let Some(fd) = by_owner.get(&(uid, gid)) {
            return fd.try_clone();
        }
        let fd = make_userns(uid, gid)?;
        let copy = fd.try_clone()?;
        by_owner.insert((uid, gid), fd);
        Ok(copy)
    }
}

/// The account file (`/etc/passwd`, `/etc/group`) that gives [`RUN_KUID`] to a user or group.
fn named_in_account_files() -> Option<&'static str> {
    let id = RUN_KUID.to_string();
    ["/etc/passwd", "/etc/group"].into_iter().find(|file| {
        std::fs::read_to_string(file).is_ok_and(|text| {
            text.lines()
                .any(|line| line.split(':').nth(2) == Some(id.as_str()))
        })
    })
}

/// A user namespace with the maps `uid → RUN_KUID` and `gid → RUN_KUID`, held by a child that
/// stops itself until its fd is open here, then is killed.
fn make_userns(uid: u32, gid: u32) -> io::Result<OwnedFd> {
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // SAFETY: fork in a possibly multi-threaded process: the child makes only raw syscalls,
    // then stops or `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        die_with_parent(parent);
        // SAFETY: raw syscalls only.
        unsafe {
            if libc::unshare(libc::CLONE_NEWUSER) != 0 {
                libc::_exit(1);
            }
            libc::kill(libc::getpid(), libc::SIGSTOP);
            libc::_exit(0);
        }
    }
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    let stopped = wait_status(pid, libc::WUNTRACED).is_some_and(|s| libc::WIFSTOPPED(s));
    let made = if stopped {
        let write = |name: &str, text: String| std::fs::write(format!("/proc/{pid}/{name}"), text);
        write("uid_map", format!("{uid} {RUN_KUID} 1"))
            .and_then(|()| write("gid_map", format!("{gid} {RUN_KUID} 1")))
            .and_then(|()| std::fs::File::open(format!("/proc/{pid}/ns/user")))
            .map(OwnedFd::from)
    } else {
        Err(io::Error::other(
            "the idmap namespace's holder did not stop",
        ))
    };
    if stopped {
        // SAFETY: signals our own stopped child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        wait_status(pid, 0);
    }
    made
}
