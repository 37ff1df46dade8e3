//! A run slot's mount namespace: the filesystem a run sees, made once per slot and joined by each
//! of its runs with `setns` (microseconds).
//!
//! Why: Landlock decides what a run may open, but not who may `chmod`, `chown`, `utime` or set
//! xattrs on what it can name; and a run may keep the server's kernel uid (root's, when the
//! server runs as root and cannot give runs a uid of their own, `idmap.rs`), so it owns every
//! file the server owns. In this namespace every mount is
//! read-only except the projects folder and the slot's scratch, so those calls fail with `EROFS`
//! everywhere else, whatever the uid. It also shows neutral paths: the projects folder at
//! [`RUN_PROJECTS_DIR`] and the scratch at [`RUN_SCRATCH_DIR`], so `os.getcwd()`, `__file__`,
//! `$HOME` and tracebacks carry no host layout.
//!
//! The view, built by a throw-away child inside the shared user namespace (a [`MountPlan`] made
//! here, executed there with raw syscalls only, as bubblewrap does):
//! 1. a private copy of the server's mounts; a tmpfs on the scratch dir as a building site, made
//!    the root with `pivot_root` so the host's root is reachable at `/oldroot`;
//! 2. `/newroot`: every top-level directory of the host bound (recursively), its symlinks copied,
//!    the projects folder at `/projects` and the scratch at `/tmp`, the bytecode cache at
//!    `/pycache` when there is one, the server's support modules at `/pyrun` likewise;
//! 3. everything read-only and `nosuid`; `/tmp` writable again but `noexec`, and of `/projects`
//!    only the part the slot's runs may write ([`Writable`], `protected.rs`): their own project
//!    bound writable (`noexec`) over the read-only rest, or for a script directly in the
//!    projects folder the folder itself with each subfolder bound read-only over itself; inside
//!    that part, the protected names (`.git`, `.venv`, `.env`...) bound read-only over
//!    themselves (a venv keeps `exec`, so its compiled extensions load), and every folder on
//!    the way from that part's root down to one of them bound onto itself as it is ([`pins`]:
//!    a mount point cannot be renamed or removed, so a run cannot move the user's `.git` aside
//!    with its parent and plant its own at the path). These binds are looked up without
//!    following links ([`Op::Rebind`]);
//! 4. `pivot_root` into `/newroot`, the old root detached: nothing else of the host is left.
//!
//! The folders placed for runs to own ([`Op::Place`]: projects, scratch, `/dev/shm`, cache,
//! support modules, an install's folders) are, under `run-uid`, the server's idmapped clones
//! moved into place instead of binds; binds of their subtrees (step 3) keep the idmap.
//!
//! Landlock rules are attached to inodes, and bind mounts share them: the rules made on host
//! paths hold for the same files under their neutral names.

use std::collections::BTreeSet;
use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};

use super::idmap::Idmaps;
use super::mount_op::{cstring, under, Op};
use super::mount_op::{
    MountAttr, AT_RECURSIVE, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NOSUID,
    MOUNT_ATTR_RDONLY, MOVE_MOUNT_F_EMPTY_PATH, MOVE_MOUNT_T_EMPTY_PATH, OPEN_TREE_CLONE,
};
use super::namespaces::wait_status;
use super::world::World;
use crate::policy::{Grant, RUN_PROJECTS_DIR, RUN_PYCACHE_DIR, RUN_SCRATCH_DIR, RUN_SUPPORT_DIR};
use crate::protected::Writable;

/// What a slot's view holds: host paths (canonical) and what runs may write of the projects.
#[derive(Debug, Clone)]
pub(crate) struct ViewSpec<'a> {
    /// The projects folder, shown at [`RUN_PROJECTS_DIR`] with the scratch at
    /// [`RUN_SCRATCH_DIR`] (a run's view). `None`: every folder at its host path (an install's
    /// view: venvs record absolute paths).
    pub projects: Option<&'a Path>,
    pub scratch: &'a Path,
    /// What a run may read of the host, shown at its own path (`world.rs`): system trees and
    /// files, the interpreter's trees, devices.
    pub shown: &'a [PathBuf],
    /// The slot's own folder shown at `/dev/shm`, writable: POSIX semaphores and shared memory
    /// (multiprocessing), emptied with the slot.
    pub shm: Option<&'a Path>,
    /// Folders shown at their host paths besides (an install's project and venv).
    pub grants: &'a [Grant],
    /// Without `projects`: trees writable (and not executable) at their host paths.
    pub host_writable: &'a [PathBuf],
    pub pycache: Option<&'a Path>,
    /// The server's support modules, read-only at [`RUN_SUPPORT_DIR`].
    pub support: Option<&'a Path>,
    /// The part of the projects folder runs of this view may write; the rest is read-only.
    pub writable: &'a Writable,
    /// Paths inside `projects` (relative) that runs may read but not change: the protected
    /// names of the writable part, and the top folder's subfolders when only its own entries
    /// are writable.
    pub read_only: &'a [PathBuf],
    /// With `projects`: the interpreter's trees under [`RUN_SCRATCH_DIR`] (canonical, none
    /// inside another), shown read-only at their own paths inside the scratch's mount; the
    /// scratch holds an empty folder for the first part of each ([`shown_in_scratch`]).
    pub in_scratch: &'a [PathBuf],
}

/// The mounts of one slot's view, as steps prepared in the server (allocation, the host's
/// file types), to be executed by a forked child that may only make raw syscalls.
#[derive(Debug)]
pub(super) struct MountPlan {
    site: CString,
    ops: Vec<Op>,
    /// The host folders of the [`Op::Place`] steps, by index.
    placed: Vec<PathBuf>,
}

impl MountPlan {
    /// The plan for `spec`, looking at the host's file types now.
    pub(super) fn new(spec: &ViewSpec<'_>) -> io::Result<Self> {
        let mut world = World::default();
        // What the run must name at its own path; the folders placed below are not shown twice.
        let placed: Vec<&Path> = [spec.projects, spec.pycache, spec.support]
            .into_iter()
            .flatten()
            .chain(spec.host_writable.iter().map(PathBuf::as_path))
            .collect();
        // A run's /tmp is its scratch: what lies under the host's /tmp is shown inside it.
        let hidden_by_scratch =
            |p: &Path| spec.projects.is_some() && p.starts_with(RUN_SCRATCH_DIR);
        world.show_all(
            spec.shown
                .iter()
                .map(PathBuf::as_path)
                .filter(|p| !placed.iter().any(|b| p.starts_with(b)))
                .filter(|p| !hidden_by_scratch(p)),
        )?;
        let mut writable_at: Vec<(PathBuf, bool)> = Vec::new();
        if let Some(shm) = spec.shm {
            world.place_at(shm, Path::new("/dev/shm"))?;
            writable_at.push((PathBuf::from("/dev/shm"), false));
        }
        let scratch_at = match spec.projects {
            Some(_) => PathBuf::from(RUN_SCRATCH_DIR),
            None => spec.scratch.to_path_buf(),
        };
        // Host-path grants, parents before what lies in them (a venv inside its project).
        let mut grants: Vec<&Grant> = spec.grants.iter().collect();
        grants.sort_by_key(|g| g.at.components().count());
        for grant in grants {
            // A mount cannot be bound from a descriptor of the server's own mount namespace:
            // the path is bound, then proven to be the held folder.
            // Without a held folder, the one the path names now, which must be a real folder.
            use std::os::unix::fs::MetadataExt;
            let meta = match &grant.held {
                Some(held) => std::fs::metadata(held)?,
                None => std::fs::symlink_metadata(&grant.at)?,
            };
            if !meta.is_dir() {
                return Err(io::Error::other(format!(
                    "{} is not a folder (a link?)",
                    grant.at.display()
                )));
            }
            world.place_at(&grant.at, &grant.at)?;
            world.ops.push(Op::Expect {
                path: under("/newroot", &grant.at)?,
                dev: meta.dev(),
                ino: meta.ino(),
            });
            if grant.writable {
                writable_at.push((grant.at.clone(), true));
            }
        }
        for tree in spec.host_writable {
            if tree.is_dir() {
                world.place_at(tree, tree)?;
                writable_at.push((tree.clone(), false));
            }
        }
        let mut ops = std::mem::take(&mut world.ops);
        let mut place = |host: &Path, view: &Path| -> io::Result<()> {
            world.place_at(host, view)?;
            ops.append(&mut world.ops);
            Ok(())
        };
        if let Some(projects) = spec.projects {
            place(projects, Path::new(RUN_PROJECTS_DIR))?;
        }
        place(spec.scratch, &scratch_at)?;
        if let Some(pycache) = spec.pycache {
            place(pycache, Path::new(RUN_PYCACHE_DIR))?;
        }
        if let Some(support) = spec.support {
            place(support, Path::new(RUN_SUPPORT_DIR))?;
        }
        // After the scratch is in place (these mount inside it), before all is made read-only.
        if spec.projects.is_some() {
            ops.extend(shown_in_scratch(spec.in_scratch)?);
        }
        ops.push(Op::Attr {
            path: cstring(Path::new("/newroot"))?,
            set: MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID,
            clear: 0,
            recursive: true,
        });
        let writable = |view: &Path, writable: bool| -> io::Result<Op> {
            Ok(Op::Attr {
                path: under("/newroot", view)?,
                set: MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NODEV,
                clear: if writable { MOUNT_ATTR_RDONLY } else { 0 },
                recursive: false,
            })
        };
        match spec.projects {
            Some(_) => {
                let projects_writable = matches!(spec.writable, Writable::TopEntries)
                    || matches!(spec.writable, Writable::Tree(rel) if rel.as_os_str().is_empty());
                ops.push(writable(Path::new(RUN_PROJECTS_DIR), projects_writable)?);
                ops.push(writable(&scratch_at, true)?);
            }
            // An install's scratch holds the throwaway venv it starts, and its build backends.
            None => writable_at.push((scratch_at, true)),
        }
        for (at, exec) in writable_at {
            ops.push(Op::Attr {
                path: under("/newroot", &at)?,
                set: MOUNT_ATTR_NODEV | if exec { 0 } else { MOUNT_ATTR_NOEXEC },
                clear: MOUNT_ATTR_RDONLY,
                recursive: false,
            });
        }
        if let (Some(_), Writable::Tree(rel)) = (spec.projects, spec.writable) {
            if !rel.as_os_str().is_empty() {
                // The run's own project, writable over the read-only rest.
                ops.push(Op::Rebind {
                    path: under("/newroot", &Path::new(RUN_PROJECTS_DIR).join(rel))?,
                    set: MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NODEV,
                    clear: MOUNT_ATTR_RDONLY,
                    recursive: false,
                });
            }
        }
        let read_only = spec.projects.map_or(&[][..], |_| spec.read_only);
        for rel in pins(spec.writable, read_only) {
            // Bound onto itself, attributes kept: writable as before, but a mount point.
            ops.push(Op::Rebind {
                path: under("/newroot", &Path::new(RUN_PROJECTS_DIR).join(rel))?,
                set: 0,
                clear: 0,
                recursive: false,
            });
        }
        for rel in read_only {
            // A venv's compiled extensions are mapped executable.
            let venv = rel.file_name().is_some_and(|n| n == ".venv" || n == "venv")
                || spec
                    .projects
                    .is_some_and(|p| p.join(rel).join("pyvenv.cfg").is_file());
            ops.push(Op::Rebind {
                path: under("/newroot", &Path::new(RUN_PROJECTS_DIR).join(rel))?,
                set: MOUNT_ATTR_RDONLY,
                clear: if venv { MOUNT_ATTR_NOEXEC } else { 0 },
                recursive: true,
            });
        }
        Ok(Self {
            site: cstring(spec.scratch)?,
            ops,
            placed: world.placed,
        })
    }

    /// Builds the view in a child that has joined `user_ns`, and returns the new mount
    /// namespace's fd. Blocking (about a millisecond: one fork and a few dozen mounts). With
    /// `idmaps`, the placed folders are attached as idmapped clones made here (only the host's
    /// root may make them): their owners are the run's uid in the view.
    pub(super) fn build(
        &self,
        user_ns: &std::os::fd::OwnedFd,
        idmaps: Option<&Idmaps>,
    ) -> io::Result<std::os::fd::OwnedFd> {
        use std::os::fd::AsRawFd;
        let user = user_ns.as_raw_fd();
        let clones = match idmaps {
            Some(idmaps) => self
                .placed
                .iter()
                .map(|folder| idmaps.clone_tree(folder))
                .collect::<io::Result<Vec<_>>>()?,
            None => Vec::new(),
        };
        let clone_fds: Vec<libc::c_int> = clones.iter().map(AsRawFd::as_raw_fd).collect();
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: fork in a possibly multi-threaded process: the child below only makes raw
        // syscalls on data prepared before the fork, then stops or `_exit`s.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            super::namespaces::die_with_parent(parent);
            // SAFETY: raw syscalls on prepared strings; never returns.
            unsafe {
                let code = match self.execute(user, &clone_fds) {
                    Ok(()) => {
                        libc::kill(libc::getpid(), libc::SIGSTOP);
                        0
                    }
                    Err(step) => step,
                };
                libc::_exit(code)
            }
        }
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        let status = wait_status(pid, libc::WUNTRACED);
        let stopped = status.is_some_and(|s| libc::WIFSTOPPED(s));
        let ns = if stopped {
            std::fs::File::open(format!("/proc/{pid}/ns/mnt")).map(std::os::fd::OwnedFd::from)
        } else {
            let failed = status
                .filter(|&s| libc::WIFEXITED(s))
                .map(|s| libc::WEXITSTATUS(s));
            // Steps 9.. are the plan's ops (for the operator's log: host paths).
            let op = failed
                .and_then(|step| usize::try_from(step).ok()?.checked_sub(9))
                .and_then(|i| self.ops.get(i));
            Err(io::Error::other(format!(
                "building the run's file view failed at step {failed:?} ({op:?})"
            )))
        };
        if stopped {
            // SAFETY: signals our own stopped child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            wait_status(pid, 0);
        }
        ns
    }

    /// Runs in the forked child. On failure, the exit code names the step (1-based, after the
    /// fixed steps 1–8). Raw syscalls only.
    unsafe fn execute(
        &self,
        user_ns: libc::c_int,
        clones: &[libc::c_int],
    ) -> Result<(), libc::c_int> {
        let ok = |rc: libc::c_int, step: libc::c_int| if rc == 0 { Ok(()) } else { Err(step) };
        let c = |s: &'static [u8]| s.as_ptr().cast::<libc::c_char>();
        ok(libc::setns(user_ns, libc::CLONE_NEWUSER), 1)?;
        ok(libc::unshare(libc::CLONE_NEWNS), 2)?;
        let none = std::ptr::null::<libc::c_char>();
        ok(
            libc::mount(
                none,
                c(b"/\0"),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ),
            3,
        )?;
        ok(
            libc::mount(
                c(b"tmpfs\0"),
                self.site.as_ptr(),
                c(b"tmpfs\0"),
                libc::MS_NOSUID | libc::MS_NODEV,
                c(b"mode=0755\0").cast(),
            ),
            4,
        )?;
        ok(libc::chdir(self.site.as_ptr()), 5)?;
        ok(libc::mkdir(c(b"newroot\0"), 0o755), 6)?;
        ok(
            libc::mount(
                c(b"newroot\0"),
                c(b"newroot\0"),
                none,
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ),
            7,
        )?;
        ok(libc::mkdir(c(b"oldroot\0"), 0o755), 7)?;
        let pivot = libc::syscall(libc::SYS_pivot_root, self.site.as_ptr(), c(b"oldroot\0"));
        ok(pivot as libc::c_int, 8)?;
        ok(libc::chdir(c(b"/\0")), 8)?;
        for (i, op) in self.ops.iter().enumerate() {
            let step = 9 + i as libc::c_int;
            let rc = match op {
                Op::Mkdir(path) => libc::mkdir(path.as_ptr(), 0o755),
                Op::File(path) => {
                    let fd = libc::open(
                        path.as_ptr(),
                        libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                        0o444,
                    );
                    if fd >= 0 {
                        libc::close(fd);
                        0
                    } else {
                        -1
                    }
                }
                Op::Bind { from, to } => libc::mount(
                    from.as_ptr(),
                    to.as_ptr(),
                    none,
                    libc::MS_BIND | libc::MS_REC,
                    std::ptr::null(),
                ),
                Op::Place { from, to, clone } => match clones.get(*clone) {
                    Some(&tree) => libc::syscall(
                        libc::SYS_move_mount,
                        tree,
                        c"".as_ptr(),
                        libc::AT_FDCWD,
                        to.as_ptr(),
                        MOVE_MOUNT_F_EMPTY_PATH,
                    ) as libc::c_int,
                    None => libc::mount(
                        from.as_ptr(),
                        to.as_ptr(),
                        none,
                        libc::MS_BIND | libc::MS_REC,
                        std::ptr::null(),
                    ),
                },
                Op::Symlink { target, path } => libc::symlink(target.as_ptr(), path.as_ptr()),
                Op::Expect { path, dev, ino } => {
                    let mut st: libc::stat = std::mem::zeroed();
                    let same = libc::lstat(path.as_ptr(), &mut st) == 0
                        && st.st_dev == *dev
                        && st.st_ino == *ino;
                    if same {
                        0
                    } else {
                        -1
                    }
                }
                Op::Rebind {
                    path,
                    set,
                    clear,
                    recursive,
                } => rebind(path, *set, *clear, *recursive),
                Op::Attr {
                    path,
                    set,
                    clear,
                    recursive,
                } => {
                    let attr = MountAttr {
                        attr_set: *set,
                        attr_clr: *clear,
                        propagation: 0,
                        userns_fd: 0,
                    };
                    let flags = if *recursive { AT_RECURSIVE } else { 0 };
                    libc::syscall(
                        libc::SYS_mount_setattr,
                        libc::AT_FDCWD,
                        path.as_ptr(),
                        flags,
                        &attr as *const MountAttr,
                        std::mem::size_of::<MountAttr>(),
                    ) as libc::c_int
                }
            };
            // A read-only host mount stays read-only: clearing the flag is refused, not fatal.
            let refused_clear = matches!(op, Op::Attr { clear, .. } if *clear != 0)
                && rc != 0
                && *libc::__errno_location() == libc::EPERM;
            if !refused_clear {
                ok(rc, step.min(120))?;
            }
        }
        ok(libc::chdir(c(b"/newroot\0")), 121)?;
        let pivot = libc::syscall(libc::SYS_pivot_root, c(b".\0"), c(b".\0"));
        ok(pivot as libc::c_int, 122)?;
        ok(libc::umount2(c(b".\0"), libc::MNT_DETACH), 123)?;
        ok(libc::chdir(c(b"/\0")), 124)?;
        Ok(())
    }
}

/// The folders a view pins (`read_only` relative to the projects folder, in the part
/// `writable`): every folder between the writable part's root and a protected entry, parents
/// first, each once. A rename or removal of a folder that holds a mount point succeeds (the
/// mount moves with it): a run could rename `sub` aside, `.git` and all, and build its own
/// `sub/.git` at the path the user's git will enter. A folder that is itself a mount point in
/// the run's namespace cannot be renamed, removed or replaced (`EBUSY`); the writable root is
/// one already, and so is each entry.
fn pins<'a>(writable: &Writable, read_only: &'a [PathBuf]) -> BTreeSet<&'a Path> {
    let root = match writable {
        Writable::Nothing => return BTreeSet::new(),
        Writable::Tree(rel) => rel.as_path(),
        Writable::TopEntries => Path::new(""),
    };
    read_only
        .iter()
        .flat_map(|entry| entry.ancestors().skip(1))
        .filter(|folder| folder.starts_with(root) && *folder != root)
        .collect()
}

/// Where the building child makes the parents of the trees shown inside the scratch: a folder
/// of the building site (a tmpfs of the view's own, outside `/newroot`), so that nothing but
/// one empty folder per first part is ever made in the slot's scratch on the host.
const SCRATCH_STUBS: &str = "/scratch-stubs";

/// The steps that show `trees` (host paths under [`RUN_SCRATCH_DIR`]) at their own paths in a
/// run's view, after the scratch is placed there: their parents made in [`SCRATCH_STUBS`],
/// each first part's stub bound over the scratch's folder of that name (made with the slot),
/// then each tree bound into it. Made read-only with the rest of `/newroot` (only the scratch's
/// own mount is made writable again, not what is mounted in it), and a mount point cannot be
/// renamed or removed: a run can neither change the interpreter's tree nor put another in
/// its place. Nothing is made when there is no tree under `/tmp` (the usual case).
fn shown_in_scratch(trees: &[PathBuf]) -> io::Result<Vec<Op>> {
    use std::path::Component;
    let mut trees: Vec<&PathBuf> = trees.iter().collect();
    trees.sort_by_key(|t| t.components().count());
    let (mut stubs, mut tops, mut binds) = (Vec::new(), BTreeSet::new(), Vec::new());
    let mut made = BTreeSet::new();
    for tree in trees {
        let Ok(rel) = tree.strip_prefix(RUN_SCRATCH_DIR) else {
            continue;
        };
        let parts: Vec<_> = rel
            .components()
            .filter_map(|c| match c {
                Component::Normal(part) => Some(part),
                _ => None,
            })
            .collect();
        let Some(first) = parts.first() else {
            continue;
        };
        // A link (the one the interpreter is started through) is copied as a link.
        let link = std::fs::symlink_metadata(tree)?
            .file_type()
            .is_symlink()
            .then(|| std::fs::read_link(tree))
            .transpose()?;
        let is_dir = std::fs::metadata(tree)?.is_dir();
        let mut at = PathBuf::from(SCRATCH_STUBS);
        if made.insert(at.clone()) {
            stubs.push(Op::Mkdir(cstring(&at)?));
        }
        for (i, part) in parts.iter().enumerate() {
            at.push(part);
            let last = i + 1 == parts.len();
            match &link {
                Some(target) if last => stubs.push(Op::Symlink {
                    target: cstring(target)?,
                    path: cstring(&at)?,
                }),
                _ if last && !is_dir => stubs.push(Op::File(cstring(&at)?)),
                _ => {
                    if made.insert(at.clone()) {
                        stubs.push(Op::Mkdir(cstring(&at)?));
                    }
                }
            }
        }
        tops.insert(first.to_os_string());
        if link.is_none() {
            binds.push(Op::Bind {
                from: under("/oldroot", tree)?,
                to: under("/newroot", tree)?,
            });
        }
    }
    for top in tops {
        let stub = Path::new(SCRATCH_STUBS).join(&top);
        stubs.push(Op::Bind {
            from: cstring(&stub)?,
            to: under("/newroot", &Path::new(RUN_SCRATCH_DIR).join(&top))?,
        });
    }
    stubs.extend(binds);
    Ok(stubs)
}

/// [`Op::Rebind`], in the building child: raw syscalls only. 0 on success (or when there is
/// nothing real to bind any more), -1 with `errno` set otherwise.
unsafe fn rebind(path: &CString, set: u64, clear: u64, recursive: bool) -> libc::c_int {
    let mut how: libc::open_how = std::mem::zeroed();
    how.flags = (libc::O_PATH | libc::O_CLOEXEC) as u64;
    how.resolve = libc::RESOLVE_NO_SYMLINKS;
    let fd = libc::syscall(
        libc::SYS_openat2,
        libc::AT_FDCWD,
        path.as_ptr(),
        &how as *const libc::open_how,
        std::mem::size_of::<libc::open_how>(),
    ) as libc::c_int;
    if fd < 0 {
        let errno = *libc::__errno_location();
        return if matches!(errno, libc::ENOENT | libc::ELOOP) {
            0
        } else {
            -1
        };
    }
    let empty = c"".as_ptr();
    let tree = libc::syscall(
        libc::SYS_open_tree,
        fd,
        empty,
        OPEN_TREE_CLONE
            | libc::O_CLOEXEC as libc::c_uint
            | libc::AT_EMPTY_PATH as libc::c_uint
            | AT_RECURSIVE,
    ) as libc::c_int;
    if tree < 0 {
        libc::close(fd);
        return -1;
    }
    let attr = |clear: u64| MountAttr {
        attr_set: set,
        attr_clr: clear,
        propagation: 0,
        userns_fd: 0,
    };
    let flags = libc::AT_EMPTY_PATH as libc::c_uint | if recursive { AT_RECURSIVE } else { 0 };
    let setattr = |attr: &MountAttr| {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree,
            empty,
            flags,
            attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    // Nothing to set or clear (a pin): the copy keeps the attributes of the mount it was taken
    // from.
    let mut rc = if set | clear == 0 {
        0
    } else {
        setattr(&attr(clear))
    };
    // A read-only host mount stays read-only: clearing the flag is refused, not fatal.
    if rc != 0 && clear != 0 && *libc::__errno_location() == libc::EPERM {
        rc = setattr(&attr(0));
    }
    if rc == 0 {
        rc = libc::syscall(
            libc::SYS_move_mount,
            tree,
            empty,
            fd,
            empty,
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        );
    }
    libc::close(tree);
    libc::close(fd);
    if rc == 0 {
        0
    } else {
        -1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_binds_the_host_read_only_and_the_run_folders_at_neutral_paths() {
        let projects = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let support = tempfile::tempdir().unwrap();
        let shm = tempfile::tempdir().unwrap();
        let shown = ["/usr", "/etc/ld.so.cache", "/dev/null", "/proc/cpuinfo"].map(PathBuf::from);
        let plan = MountPlan::new(&ViewSpec {
            projects: Some(projects.path()),
            scratch: scratch.path(),
            shown: &shown,
            shm: Some(shm.path()),
            grants: &[],
            host_writable: &[],
            pycache: None,
            support: Some(support.path()),
            writable: &Writable::Tree(PathBuf::new()),
            read_only: &[PathBuf::from(".git"), PathBuf::from("a/.venv")],
            in_scratch: &[],
        })
        .unwrap();
        let text = format!("{:?}", plan.ops);
        assert!(text.contains("\"/oldroot/usr\""), "{text}");
        // A minimal world: only what is listed exists; no other top-level folder of the host.
        for absent in [
            "/oldroot/home",
            "/oldroot/root",
            "/oldroot/etc\"",
            "/oldroot/var",
        ] {
            assert!(!text.contains(absent), "{absent} in {text}");
        }
        assert!(text.contains("\"/oldroot/etc/ld.so.cache\""), "{text}");
        assert!(text.contains("\"/newroot/proc/cpuinfo\""), "{text}");
        // The slot's own /dev/shm, writable but noexec.
        let shm_from = format!("/oldroot{}", shm.path().display());
        assert!(plan
            .ops
            .iter()
            .any(|op| matches!(op, Op::Place { from, to, .. }
            if from.to_bytes() == shm_from.as_bytes() && to.as_bytes() == b"/newroot/dev/shm")));
        assert!(plan
            .ops
            .iter()
            .any(|op| matches!(op, Op::Attr { path, set, clear, .. }
            if path.as_bytes() == b"/newroot/dev/shm" && set & MOUNT_ATTR_NOEXEC != 0
                && clear & MOUNT_ATTR_RDONLY != 0)));
        let usr = plan
            .ops
            .iter()
            .position(|op| matches!(op, Op::Bind { to, .. } if to.as_bytes() == b"/newroot/usr"))
            .expect("usr bound");
        let all_read_only = plan
            .ops
            .iter()
            .position(|op| {
                matches!(op, Op::Attr { path, set, recursive: true, .. }
                    if path.as_bytes() == b"/newroot" && set & MOUNT_ATTR_RDONLY != 0)
            })
            .expect("everything read-only");
        assert!(usr < all_read_only);
        let projects_to = format!("/oldroot{}", projects.path().display());
        assert!(
            plan.ops
                .iter()
                .any(|op| matches!(op, Op::Place { from, to, .. }
            if from.to_bytes() == projects_to.as_bytes() && to.as_bytes() == b"/newroot/projects"))
        );
        // The venv is read-only but keeps exec; .git is read-only.
        let venv = plan.ops.iter().find_map(|op| match op {
            Op::Rebind {
                path, set, clear, ..
            } if path.as_bytes() == b"/newroot/projects/a/.venv" => Some((*set, *clear)),
            _ => None,
        });
        assert_eq!(venv, Some((MOUNT_ATTR_RDONLY, MOUNT_ATTR_NOEXEC)));
        // The support modules at /pyrun, read-only with the rest (only /projects and /tmp are
        // made writable again).
        let support_to = format!("/oldroot{}", support.path().display());
        assert!(plan
            .ops
            .iter()
            .any(|op| matches!(op, Op::Place { from, to, .. }
            if from.to_bytes() == support_to.as_bytes() && to.as_bytes() == b"/newroot/pyrun")));
        assert!(!plan
            .ops
            .iter()
            .any(|op| matches!(op, Op::Attr { path, clear, .. }
            if path.as_bytes().starts_with(b"/newroot/pyrun") && clear & MOUNT_ATTR_RDONLY != 0)));
        // No host /tmp: the scratch is the run's /tmp.
        assert!(!text.contains("\"/oldroot/tmp\""), "{text}");
    }

    #[test]
    fn an_installs_folders_are_shown_at_their_host_paths_and_proven_after_binding() {
        let root = tempfile::tempdir().unwrap();
        let project = root.path().join("p/app");
        let venv = project.join(".venv");
        std::fs::create_dir_all(&venv).unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let held = std::fs::File::open(&venv).unwrap();
        use std::os::fd::AsRawFd;
        let grants = [
            Grant {
                at: project.clone(),
                held: None,
                writable: false,
            },
            Grant {
                at: venv.clone(),
                held: Some(PathBuf::from(format!("/proc/self/fd/{}", held.as_raw_fd()))),
                writable: true,
            },
        ];
        let spec = ViewSpec {
            projects: None,
            scratch: scratch.path(),
            shown: &[PathBuf::from("/usr")],
            shm: None,
            grants: &grants,
            host_writable: &[],
            pycache: None,
            support: None,
            writable: &Writable::Tree(PathBuf::new()),
            read_only: &[],
            in_scratch: &[],
        };
        let plan = MountPlan::new(&spec).unwrap();
        let venv_at = format!("/newroot{}", venv.display());
        // The venv is bound by its path (into the project's bind), proven to be the held folder,
        // and made writable; the scratch is at its own path, not at /tmp.
        let bind = plan.ops.iter().position(|op| {
            matches!(op, Op::Place { to, .. }
            if to.as_bytes() == venv_at.as_bytes())
        });
        let expect = plan.ops.iter().position(|op| {
            matches!(op, Op::Expect { path, .. }
            if path.as_bytes() == venv_at.as_bytes())
        });
        assert!(bind.is_some() && expect > bind, "{:?}", plan.ops);
        assert!(plan
            .ops
            .iter()
            .any(|op| matches!(op, Op::Attr { path, clear, .. }
            if path.as_bytes() == venv_at.as_bytes() && clear & MOUNT_ATTR_RDONLY != 0)));
        let scratch_at = format!("/newroot{}", scratch.path().display());
        assert!(plan.ops.iter().any(|op| matches!(op, Op::Place { to, .. }
            if to.as_bytes() == scratch_at.as_bytes())));
        // A project swapped for a link is refused before anything is built.
        std::fs::rename(&project, root.path().join("p/moved")).unwrap();
        std::os::unix::fs::symlink("/etc", &project).unwrap();
        assert!(MountPlan::new(&spec).is_err());
    }

    #[test]
    fn a_tree_under_tmp_is_bound_inside_the_scratch_after_it_and_read_only_with_the_rest() {
        let projects = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let venv = tempfile::Builder::new().tempdir_in("/tmp").unwrap();
        let tree = venv.path().join("lib");
        std::fs::create_dir(&tree).unwrap();
        let plan = MountPlan::new(&ViewSpec {
            projects: Some(projects.path()),
            scratch: scratch.path(),
            shown: &[PathBuf::from("/usr"), tree.clone()],
            shm: None,
            grants: &[],
            host_writable: &[],
            pycache: None,
            support: None,
            writable: &Writable::Tree(PathBuf::new()),
            read_only: &[],
            in_scratch: std::slice::from_ref(&tree),
        })
        .unwrap();
        let find = |pred: &dyn Fn(&Op) -> bool| plan.ops.iter().position(pred);
        let scratch_at =
            find(&|op| matches!(op, Op::Place { to, .. } if to.as_bytes() == b"/newroot/tmp"));
        let top = venv.path().file_name().unwrap().to_str().unwrap();
        let stub_to = format!("/newroot/tmp/{top}");
        let stub = find(&|op| {
            matches!(op, Op::Bind { from, to }
            if to.to_bytes() == stub_to.as_bytes() && from.to_bytes().starts_with(SCRATCH_STUBS.as_bytes()))
        });
        let tree_to = format!("/newroot{}", tree.display());
        let bound =
            find(&|op| matches!(op, Op::Bind { to, .. } if to.to_bytes() == tree_to.as_bytes()));
        let read_only = find(&|op| {
            matches!(op, Op::Attr { path, recursive: true, .. }
            if path.as_bytes() == b"/newroot")
        });
        let made_writable = find(&|op| {
            matches!(op, Op::Attr { path, recursive: false, .. }
            if path.as_bytes() == b"/newroot/tmp")
        });
        assert!(
            matches!((scratch_at, stub, bound, read_only, made_writable),
                (Some(s), Some(t), Some(b), Some(r), Some(w)) if s < t && t < b && b < r && r < w),
            "{:?}",
            plan.ops
        );
        // Not shown a second time from the host's root (the scratch would cover it).
        assert_eq!(
            plan.ops
                .iter()
                .filter(|op| matches!(op, Op::Bind { to, .. }
            if to.to_bytes() == tree_to.as_bytes()))
                .count(),
            1
        );
    }

    #[test]
    fn only_the_runs_own_project_is_bound_writable_over_the_read_only_projects() {
        let projects = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let plan = MountPlan::new(&ViewSpec {
            projects: Some(projects.path()),
            scratch: scratch.path(),
            shown: &[],
            shm: None,
            grants: &[],
            host_writable: &[],
            pycache: None,
            support: None,
            writable: &Writable::Tree(PathBuf::from("a")),
            read_only: &[PathBuf::from("a/.git")],
            in_scratch: &[],
        })
        .unwrap();
        // /projects stays read-only (noexec added, nothing cleared).
        assert!(plan
            .ops
            .iter()
            .any(|op| matches!(op, Op::Attr { path, clear: 0, .. }
            if path.as_bytes() == b"/newroot/projects")));
        let project = plan.ops.iter().position(|op| {
            matches!(op, Op::Rebind { path, clear, recursive: false, .. }
                if path.as_bytes() == b"/newroot/projects/a" && clear & MOUNT_ATTR_RDONLY != 0)
        });
        let git = plan.ops.iter().position(|op| {
            matches!(op, Op::Rebind { path, set, .. }
                if path.as_bytes() == b"/newroot/projects/a/.git" && set & MOUNT_ATTR_RDONLY != 0)
        });
        // The project writable first, then its protected names read-only over it.
        assert!(
            matches!((project, git), (Some(p), Some(g)) if p < g),
            "{:?}",
            plan.ops
        );
    }

    #[test]
    fn every_folder_between_the_projects_writable_root_and_a_protected_entry_is_pinned_once() {
        let projects = tempfile::tempdir().unwrap();
        let scratch = tempfile::tempdir().unwrap();
        let read_only = [
            "a/sub/.git",
            "a/src/pkg/__pycache__",
            "a/src/.env",
            "a/.venv",
        ]
        .map(PathBuf::from);
        let plan = MountPlan::new(&ViewSpec {
            projects: Some(projects.path()),
            scratch: scratch.path(),
            shown: &[],
            shm: None,
            grants: &[],
            host_writable: &[],
            pycache: None,
            support: None,
            writable: &Writable::Tree(PathBuf::from("a")),
            read_only: &read_only,
            in_scratch: &[],
        })
        .unwrap();
        let rebinds: Vec<(String, u64, u64)> = plan
            .ops
            .iter()
            .filter_map(|op| match op {
                Op::Rebind {
                    path, set, clear, ..
                } => Some((path.to_string_lossy().into_owned(), *set, *clear)),
                _ => None,
            })
            .collect();
        let pinned: Vec<&str> = rebinds
            .iter()
            .filter(|(_, set, clear)| set | clear == 0)
            .map(|(path, ..)| path.as_str())
            .collect();
        // Parents first, each once; not the writable root (a mount point already) nor above.
        assert_eq!(
            pinned,
            [
                "/newroot/projects/a/src",
                "/newroot/projects/a/src/pkg",
                "/newroot/projects/a/sub"
            ]
        );
        // Pinned before the entries are bound read-only inside them.
        let last_pin = rebinds.iter().rposition(|(_, s, c)| s | c == 0);
        let first_entry = rebinds
            .iter()
            .position(|(_, s, _)| s & MOUNT_ATTR_RDONLY != 0);
        assert!(
            matches!((last_pin, first_entry), (Some(p), Some(e)) if p < e),
            "{rebinds:?}"
        );
        // The whole folder writable: its top-level folders are pinned too; a run of the top
        // folder's own entries holds only top-level names (the folder is its mount point).
        let everything = pins(&Writable::Tree(PathBuf::new()), &read_only);
        assert!(everything.contains(Path::new("a")) && everything.contains(Path::new("a/src")));
        assert!(pins(&Writable::TopEntries, &[PathBuf::from(".git")]).is_empty());
        assert!(pins(&Writable::Nothing, &read_only).is_empty());
    }
}
