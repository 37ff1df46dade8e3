//! The steps of a view's mount plan (`mount.rs`) and the path helpers that make them: plain data
//! prepared in the server, run by the building child with raw syscalls. Shared by the plan, the
//! minimal world (`world.rs`) and the idmapped clones (`idmap.rs`).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub(super) const MOUNT_ATTR_RDONLY: u64 = 0x1;
pub(super) const MOUNT_ATTR_NOSUID: u64 = 0x2;
pub(super) const MOUNT_ATTR_NODEV: u64 = 0x4;
pub(super) const MOUNT_ATTR_NOEXEC: u64 = 0x8;
pub(super) const AT_RECURSIVE: libc::c_uint = 0x8000;
pub(super) const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
pub(super) const MOVE_MOUNT_T_EMPTY_PATH: libc::c_uint = 0x40;
pub(super) const OPEN_TREE_CLONE: libc::c_uint = 0x1;
pub(super) const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
pub(super) struct MountAttr {
    pub(super) attr_set: u64,
    pub(super) attr_clr: u64,
    pub(super) propagation: u64,
    pub(super) userns_fd: u64,
}

/// One step of the plan; every path is absolute in the building child's view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Op {
    Mkdir(CString),
    /// An empty file to bind a single file onto.
    File(CString),
    /// A recursive bind of `from` on `to`.
    Bind {
        from: CString,
        to: CString,
    },
    /// A folder runs must own: the server's idmapped clone of `from` (by its index in the
    /// plan's placed folders) moved to `to` when it made one, a recursive bind otherwise.
    Place {
        from: CString,
        to: CString,
        clone: usize,
    },
    Symlink {
        target: CString,
        path: CString,
    },
    /// Fails unless `path` is the file with this device and inode: a folder the server checked
    /// and holds open, bound by its path, is still that folder (not a link swapped in since).
    Expect {
        path: CString,
        dev: u64,
        ino: u64,
    },
    /// A bind of `path` over itself, with these mount attributes: looked up with no symbolic
    /// link anywhere on the way (a run of another slot may rename folders of its project while
    /// this view is built: a link there must not carry the bind elsewhere), the attributes set
    /// on the detached copy before it is attached (a path looked up again could name another
    /// mount by then). Skipped when the path is gone or is a link now: nothing real to hold.
    /// With nothing to set or clear, the copy keeps the attributes it was cloned with.
    Rebind {
        path: CString,
        set: u64,
        clear: u64,
        recursive: bool,
    },
    /// `mount_setattr` on the mount at `path`.
    Attr {
        path: CString,
        set: u64,
        clear: u64,
        recursive: bool,
    },
}

pub(super) fn cstring(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL byte in a path"))
}

pub(super) fn under(prefix: &str, path: &Path) -> io::Result<CString> {
    let mut joined = PathBuf::from(prefix);
    joined.push(path.strip_prefix("/").unwrap_or(path));
    cstring(&joined)
}
