//! Folders of the projects folder reached through held descriptors: each folder is opened from
//! its parent's descriptor (Linux: `openat2` beneath it, no link followed on the way nor at the
//! end), listed with `getdents` on that descriptor, its entries looked at with `fstatat` on it.
//! No absolute path is ever joined, so depth is no limit (a path longer than `PATH_MAX` is
//! walked like any other) and a folder renamed or swapped for a link mid-walk is never followed
//! out of the tree. A folder the server owns but cannot list or enter (a run's `chmod 0111`)
//! gets its owner's access back before it is listed, and says so.
//!
//! Elsewhere (no `openat2`), the same calls on joined paths: there is no run-uid or file view
//! to hide anything from there.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::Path;
#[cfg(not(target_os = "linux"))]
use std::path::PathBuf;
use std::time::SystemTime;

/// An entry's identity: its device, inode and birth time, taken before a run and compared after
/// it. The birth time is what tells a planted entry from the user's when the file system gives
/// a removed entry's inode number to the next one made (ext4 does at once): a run that removes
/// a protected link (never bound) or, where no view holds them, a protected folder and makes
/// another at its path gets the same `(dev, ino)` but another birth. `(0, 0)` where the file
/// system keeps none (then the inode alone).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntryId {
    pub dev: u64,
    pub ino: u64,
    pub born: (i64, u32),
}

/// An entry's own type (a link is never followed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File,
    Link,
    Other,
}

/// What [`Folder::stamp`] tells of a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub id: Option<EntryId>,
    pub mtime: Option<SystemTime>,
    pub ctime: (i64, i64),
}

/// Why a folder could not be opened for listing.
#[derive(Debug)]
pub(crate) enum Closed {
    /// No folder there (any more), or a link: nothing to walk.
    Gone,
    /// A real folder the server cannot list, even after trying to give its owner access back
    /// (another user's): its identity.
    Unlistable(Option<EntryId>),
}

/// A folder opened for listing.
#[derive(Debug)]
pub(crate) struct Folder {
    #[cfg(target_os = "linux")]
    fd: std::os::fd::OwnedFd,
    #[cfg(not(target_os = "linux"))]
    path: PathBuf,
    /// Its owner's access was given back before it could be listed.
    pub restored: bool,
}

#[cfg(target_os = "linux")]
mod imp {
    use super::*;
    use std::os::fd::{AsFd, AsRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;

    use rustix::fs::{
        openat2, AtFlags, FileType, Mode, OFlags, RawDir, ResolveFlags, Statx, StatxFlags,
    };
    use rustix::io::Errno;

    const RESOLVE: ResolveFlags = ResolveFlags::BENEATH
        .union(ResolveFlags::NO_SYMLINKS)
        .union(ResolveFlags::NO_MAGICLINKS);
    const LIST: OFlags = OFlags::RDONLY
        .union(OFlags::DIRECTORY)
        .union(OFlags::NOFOLLOW)
        .union(OFlags::CLOEXEC);
    const PATH: OFlags = OFlags::PATH
        .union(OFlags::DIRECTORY)
        .union(OFlags::NOFOLLOW)
        .union(OFlags::CLOEXEC);
    /// What the owner needs of a folder to list it and enter it: all a walk gives back (a
    /// folder the user made read-only stays so; moving an entry out asks for `w` apart).
    pub const WALK_ACCESS: u32 = 0o500;

    /// Opens `name` (one component, never `..`) in `dir`: `openat2` beneath it without links;
    /// where the kernel has no `openat2` (before 5.6), `openat` with `O_NOFOLLOW`, which is
    /// the same for a single component (no folder on the way to follow).
    fn open_in(dir: impl AsFd, name: &OsStr, flags: OFlags) -> rustix::io::Result<OwnedFd> {
        match openat2(&dir, name, flags, Mode::empty(), RESOLVE) {
            Err(Errno::NOSYS) => {
                rustix::fs::openat(&dir, name, flags | OFlags::NOFOLLOW, Mode::empty())
            }
            other => other,
        }
    }

    /// What an identity is read from: `statx`, for the birth time `stat` lacks.
    const ID_MASK: StatxFlags = StatxFlags::BASIC_STATS.union(StatxFlags::BTIME);

    fn id_of(stx: &Statx) -> EntryId {
        let born = if stx.stx_mask & StatxFlags::BTIME.bits() != 0 {
            (stx.stx_btime.tv_sec, stx.stx_btime.tv_nsec)
        } else {
            (0, 0)
        };
        EntryId {
            dev: rustix::fs::makedev(stx.stx_dev_major, stx.stx_dev_minor),
            ino: stx.stx_ino,
            born,
        }
    }

    /// The identity of entry `name` of folder `dir` (never a link's target).
    pub fn entry_id_at(dir: impl AsFd, name: &OsStr) -> io::Result<EntryId> {
        let stx = rustix::fs::statx(dir, name, AtFlags::SYMLINK_NOFOLLOW, ID_MASK)?;
        Ok(id_of(&stx))
    }

    /// The identity of what `fd` holds (`O_PATH` included).
    fn fd_id(fd: impl AsFd) -> io::Result<EntryId> {
        let stx = rustix::fs::statx(fd, "", AtFlags::EMPTY_PATH, ID_MASK)?;
        Ok(id_of(&stx))
    }

    /// Gives the folder held by `fd` (any kind of descriptor, `O_PATH` included) its owner's
    /// `access` bits back when the server is its owner and lacks some: through
    /// `/proc/self/fd`, which names that very folder (never a link's target). True when it
    /// changed anything. Root needs none (it lists and enters any folder).
    pub fn give_back(fd: impl AsFd, access: u32) -> io::Result<bool> {
        let stat = rustix::fs::fstat(&fd)?;
        let me = rustix::process::geteuid();
        let mode = stat.st_mode & 0o7777;
        if me.is_root() || stat.st_uid != me.as_raw() || mode & access == access {
            return Ok(false);
        }
        let path = format!("/proc/self/fd/{}", fd.as_fd().as_raw_fd());
        rustix::fs::chmod(path.as_str(), Mode::from_raw_mode(mode | access))?;
        Ok(true)
    }

    impl Folder {
        pub(crate) fn open_root(path: &Path) -> io::Result<Self> {
            let fd = rustix::fs::open(path, LIST, Mode::empty())?;
            Ok(Self {
                fd,
                restored: false,
            })
        }

        /// Its subfolder `name`, never through a link.
        pub(crate) fn open_child(&self, name: &OsStr) -> Result<Self, Closed> {
            match open_in(&self.fd, name, LIST) {
                Ok(fd) => {
                    // Listable, but perhaps not enterable (no `x`) or not writable.
                    let restored = give_back(&fd, WALK_ACCESS).unwrap_or(false);
                    Ok(Self { fd, restored })
                }
                Err(Errno::ACCESS) => {
                    let held = open_in(&self.fd, name, PATH).map_err(|_| Closed::Gone)?;
                    let id = fd_id(&held).ok();
                    if !give_back(&held, WALK_ACCESS).unwrap_or(false) {
                        return Err(Closed::Unlistable(id));
                    }
                    let fd = open_in(&self.fd, name, LIST).map_err(|_| Closed::Unlistable(id))?;
                    // The same folder as the one given access (not one swapped in meanwhile).
                    let same = fd_id(&fd).ok() == id;
                    if !same {
                        return Err(Closed::Unlistable(id));
                    }
                    Ok(Self { fd, restored: true })
                }
                Err(_) => Err(Closed::Gone),
            }
        }

        pub(crate) fn stamp(&self) -> io::Result<Stamp> {
            let stx = rustix::fs::statx(&self.fd, "", AtFlags::EMPTY_PATH, ID_MASK)?;
            let mtime = SystemTime::UNIX_EPOCH.checked_add(std::time::Duration::new(
                u64::try_from(stx.stx_mtime.tv_sec).unwrap_or(0),
                stx.stx_mtime.tv_nsec,
            ));
            Ok(Stamp {
                id: Some(id_of(&stx)),
                mtime,
                ctime: (stx.stx_ctime.tv_sec, i64::from(stx.stx_ctime.tv_nsec)),
            })
        }

        /// Its entries but `.` and `..`, each with its own type.
        pub(crate) fn entries(&self) -> io::Result<Vec<(OsString, Kind)>> {
            let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 16384];
            let mut dir = RawDir::new(&self.fd, &mut buf);
            let mut out = Vec::new();
            while let Some(entry) = dir.next() {
                let entry = entry?;
                let name = entry.file_name().to_bytes();
                if name == b"." || name == b".." {
                    continue;
                }
                let name = OsStr::from_bytes(name).to_owned();
                let kind = match entry.file_type() {
                    FileType::Directory => Kind::Dir,
                    FileType::RegularFile => Kind::File,
                    FileType::Symlink => Kind::Link,
                    FileType::Unknown => match rustix::fs::statat(
                        &self.fd,
                        name.as_os_str(),
                        AtFlags::SYMLINK_NOFOLLOW,
                    ) {
                        Ok(s) => kind_of(FileType::from_raw_mode(s.st_mode)),
                        Err(_) => Kind::Other,
                    },
                    other => kind_of(other),
                };
                out.push((name, kind));
            }
            Ok(out)
        }

        /// The identity of its entry `name` (never a link's target).
        pub(crate) fn id_of(&self, name: &OsStr) -> Option<EntryId> {
            entry_id_at(&self.fd, name).ok()
        }

        /// The start of its regular file `name` (at most `max` bytes), never through a link.
        pub(crate) fn read_small(&self, name: &OsStr, max: usize) -> Option<Vec<u8>> {
            use std::io::Read as _;
            let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
            let fd: OwnedFd = open_in(&self.fd, name, flags).ok()?;
            let stat = rustix::fs::fstat(&fd).ok()?;
            if FileType::from_raw_mode(stat.st_mode) != FileType::RegularFile {
                return None;
            }
            let mut out = Vec::new();
            std::fs::File::from(fd)
                .take(max as u64)
                .read_to_end(&mut out)
                .ok()?;
            Some(out)
        }

        /// A path naming this very folder, for calls that take one (an inotify watch).
        pub(crate) fn proc_path(&self) -> std::path::PathBuf {
            std::path::PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
        }
    }

    fn kind_of(t: FileType) -> Kind {
        match t {
            FileType::Directory => Kind::Dir,
            FileType::RegularFile => Kind::File,
            FileType::Symlink => Kind::Link,
            _ => Kind::Other,
        }
    }

    /// Opens folder `rel` of `root` one component at a time (`O_PATH`), each beneath the last
    /// and never through a link: a path of any length, and no folder on the way swapped for a
    /// link can lead out. For moving an entry out of the projects folder.
    pub fn open_beneath(root: &Path, rel: &Path) -> io::Result<OwnedFd> {
        let mut at = rustix::fs::open(root, PATH, Mode::empty())?;
        for part in rel.components() {
            let std::path::Component::Normal(name) = part else {
                if matches!(part, std::path::Component::CurDir) {
                    continue;
                }
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "not a plain relative path",
                ));
            };
            at = open_in(&at, name, PATH)?;
        }
        Ok(at)
    }
}

#[cfg(target_os = "linux")]
pub use imp::{entry_id_at, give_back, open_beneath};

/// The identity of the entry `meta` describes (taken without following a link); the birth
/// time where the platform keeps one (macOS, the BSDs).
#[cfg(all(unix, not(target_os = "linux")))]
pub fn entry_id(meta: &std::fs::Metadata) -> EntryId {
    use std::os::unix::fs::MetadataExt;
    let born = meta
        .created()
        .ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map_or((0, 0), |d| {
            (
                i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
                d.subsec_nanos(),
            )
        });
    EntryId {
        dev: meta.dev(),
        ino: meta.ino(),
        born,
    }
}

#[cfg(not(target_os = "linux"))]
impl Folder {
    pub(crate) fn open_root(path: &Path) -> io::Result<Self> {
        Self::at(path.to_path_buf()).map_err(|_| io::Error::from(io::ErrorKind::NotFound))
    }

    fn at(path: PathBuf) -> Result<Self, Closed> {
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => Ok(Self {
                path,
                restored: false,
            }),
            _ => Err(Closed::Gone),
        }
    }

    pub(crate) fn open_child(&self, name: &OsStr) -> Result<Self, Closed> {
        let child = Self::at(self.path.join(name))?;
        match std::fs::read_dir(&child.path) {
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                Err(Closed::Unlistable(self.id_of(name)))
            }
            _ => Ok(child),
        }
    }

    pub(crate) fn stamp(&self) -> io::Result<Stamp> {
        let meta = std::fs::symlink_metadata(&self.path)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Ok(Stamp {
                id: Some(entry_id(&meta)),
                mtime: meta.modified().ok(),
                ctime: (meta.ctime(), meta.ctime_nsec()),
            })
        }
        #[cfg(not(unix))]
        Ok(Stamp {
            id: None,
            mtime: meta.modified().ok(),
            ctime: (0, 0),
        })
    }

    pub(crate) fn entries(&self) -> io::Result<Vec<(OsString, Kind)>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&self.path)?.flatten() {
            let Ok(t) = entry.file_type() else { continue };
            let kind = if t.is_dir() {
                Kind::Dir
            } else if t.is_file() {
                Kind::File
            } else if t.is_symlink() {
                Kind::Link
            } else {
                Kind::Other
            };
            out.push((entry.file_name(), kind));
        }
        Ok(out)
    }

    pub(crate) fn id_of(&self, name: &OsStr) -> Option<EntryId> {
        #[cfg(unix)]
        {
            let meta = std::fs::symlink_metadata(self.path.join(name)).ok()?;
            Some(entry_id(&meta))
        }
        #[cfg(not(unix))]
        {
            let _ = name;
            None
        }
    }

    pub(crate) fn read_small(&self, name: &OsStr, max: usize) -> Option<Vec<u8>> {
        use std::io::Read as _;
        let path = self.path.join(name);
        if !std::fs::symlink_metadata(&path).ok()?.is_file() {
            return None;
        }
        let mut out = Vec::new();
        std::fs::File::open(path)
            .ok()?
            .take(max as u64)
            .read_to_end(&mut out)
            .ok()?;
        Some(out)
    }
}
