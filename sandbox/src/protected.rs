//! What of the projects folder a run may write ([`RunScope`]), and the protected names in that
//! part: found before a run (the slot's view binds them read-only) and again after it (what the
//! run created there does not stay: the run layer moves it to a quarantine).
//!
//! Design, cheapest correct first:
//! - Only the part a run may write needs looking at: the rest of the projects folder is
//!   read-only in its view already (one bind), protected names included. Under the default
//!   write scope that is the run's own project (its top-level folder, or the top folder's own
//!   entries for a script directly in it); `--write-scope all` makes it the whole folder.
//! - That part is walked through a memo of each folder's listing; the folders under a protected
//!   name (`.git/objects`, a venv's `site-packages`) are never entered: they are read-only
//!   whole. A fresh walk of 10,000 files costs tens of milliseconds.
//! - Linux: each folder listed gets an inotify watch first (entries created, deleted or moved
//!   in it), and a walk begins by draining the queue: a folder with no event since its listing
//!   is taken from the memo without a syscall, so a walk costs a read of the queue and a map
//!   lookup per folder. The events of a run are queued by the syscalls that made them, so the
//!   walk after the run (its processes dead) sees every one. A lost queue (overflow) empties
//!   the memo.
//! - Where there is no watch (other systems, the watch limit reached), a memo is keyed on the
//!   folder's identity and times (dev, inode, mtime, ctime): a folder's mtime changes whenever
//!   an entry is added, removed or renamed in it, so a walk is one `stat` per folder. Such a
//!   folder whose mtime is younger than [`RACY`] when it is listed is not memoized (as git does
//!   for its index): a file system with coarse timestamps could give a change made just after
//!   the listing the same mtime.
//! - Symbolic links are never followed. A link with a protected name is reported when a run
//!   made it (it could point the user's tools anywhere) but not bound (a bind would follow it).

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use crate::policy::{is_protected_name, RunProject, WriteScope};

/// The entries that make git take a folder for a repository (its `is_git_directory`).
const GIT_DIR_PARTS: [&str; 3] = [GIT_HEAD, "objects", "refs"];
const GIT_HEAD: &str = "HEAD";

/// How old a folder's mtime must be for its listing to be trusted later.
const RACY: Duration = Duration::from_secs(2);

/// The part of the projects folder a run may write.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Writable {
    Nothing,
    /// A tree, relative to the projects folder (empty: the whole folder).
    Tree(PathBuf),
    /// The projects folder's own entries, not its subfolders.
    TopEntries,
}

/// A protected entry found in the part a run may write, relative to the projects folder.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Found {
    pub path: PathBuf,
    /// A real file or folder (a bind can hold it read-only); false for a symbolic link.
    pub real: bool,
}

/// What a run may write and what is protected in it, as found when the run starts: the slot's
/// view is keyed on it. Made by [`Sandbox::run_scope`](crate::Sandbox::run_scope).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RunScope {
    pub(crate) writable: Writable,
    pub(crate) protected: Vec<Found>,
    /// With [`Writable::TopEntries`]: the top folder's subfolders, each read-only.
    pub(crate) subfolders: Vec<PathBuf>,
}

impl RunScope {
    /// A run that writes nothing of the projects folder.
    pub(crate) fn nothing() -> Self {
        Self {
            writable: Writable::Nothing,
            protected: Vec::new(),
            subfolders: Vec::new(),
        }
    }

    /// The paths (relative) the view binds read-only inside the writable part.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub(crate) fn read_only_binds(&self) -> Vec<PathBuf> {
        let mut binds: Vec<PathBuf> = self
            .protected
            .iter()
            .filter(|f| f.real)
            .map(|f| f.path.clone())
            .collect();
        binds.extend(self.subfolders.iter().cloned());
        binds
    }
}

/// One folder's listing, as it was when its stamp was taken.
#[derive(Debug)]
struct Memo {
    stamp: Stamp,
    /// Real subfolders that are not protected: walked into.
    subdirs: Vec<OsString>,
    /// Entries with a protected name: (name, real).
    protected: Vec<(OsString, bool)>,
    /// It holds a `pyvenv.cfg`: a venv, protected whole.
    venv: bool,
    /// It holds `HEAD`, `objects` and `refs`: git takes it for a repository of its own (a bare
    /// one, or any with `core.bare = false` in its `config`), whatever its name, and runs its
    /// `core.fsmonitor`, hooks and pager for a user whose shell merely enters it.
    git_dir: bool,
    /// Watched since before it was listed: valid until an event names it.
    watched: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    mtime: Option<SystemTime>,
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Self {
                dev: meta.dev(),
                ino: meta.ino(),
                mtime: meta.modified().ok(),
                ctime: (meta.ctime(), meta.ctime_nsec()),
            }
        }
        #[cfg(not(unix))]
        Self {
            dev: 0,
            ino: 0,
            mtime: meta.modified().ok(),
            ctime: (0, 0),
        }
    }

    /// Whether a listing taken now may be trusted while the stamp stays the same.
    fn settled(&self, now: SystemTime) -> bool {
        self.mtime
            .and_then(|m| now.duration_since(m).ok())
            .is_some_and(|age| age >= RACY)
    }
}

/// A walk's question: the part, and the subfolders a top-level run's view held.
type WalkKey = (Writable, Option<Vec<PathBuf>>);
/// A walk's answer: the protected entries, and the top folder's subfolders.
type Walked = (Vec<Found>, Vec<PathBuf>);

/// The projects folder's write rules and the memo of its listings; one per sandbox.
#[derive(Debug)]
pub(crate) struct ProjectGuard {
    projects: PathBuf,
    read_only: bool,
    scope: WriteScope,
    memo: Mutex<Memos>,
}

/// The listings, and the watches that keep them valid.
#[derive(Debug, Default)]
struct Memos {
    listings: HashMap<PathBuf, Memo>,
    /// Whole walks whose every folder was watched, valid until the next event.
    walks: HashMap<WalkKey, Walked>,
    #[cfg(target_os = "linux")]
    watches: Option<watch::Watches>,
}

impl ProjectGuard {
    pub(crate) fn new(projects: PathBuf, read_only: bool, scope: WriteScope) -> Self {
        Self {
            projects,
            read_only,
            scope,
            memo: Mutex::new(Memos {
                listings: HashMap::new(),
                walks: HashMap::new(),
                #[cfg(target_os = "linux")]
                watches: watch::Watches::new(),
            }),
        }
    }

    /// What a run of `project` may write, and what is protected there now.
    pub(crate) fn scope(&self, project: &RunProject) -> RunScope {
        let writable = match (self.read_only, self.scope, project) {
            (true, _, _) => Writable::Nothing,
            (false, WriteScope::All, _) => Writable::Tree(PathBuf::new()),
            (false, WriteScope::Project, RunProject::None) => Writable::Nothing,
            (false, WriteScope::Project, RunProject::Top) => Writable::TopEntries,
            (false, WriteScope::Project, RunProject::Folder(name)) => Writable::Tree(name.clone()),
        };
        let (protected, subfolders) = self.walk(&writable, None);
        RunScope {
            writable,
            protected,
            subfolders,
        }
    }

    /// The protected entries in `scope`'s writable part now that were not there when it was
    /// made (by the run, or by someone else meanwhile), relative to the projects folder.
    pub(crate) fn created(&self, scope: &RunScope) -> Vec<PathBuf> {
        let (now, _) = self.walk(&scope.writable, Some(&scope.subfolders));
        now.into_iter()
            .filter(|found| !scope.protected.iter().any(|f| f.path == found.path))
            .map(|found| found.path)
            .collect()
    }

    /// The projects folder (canonical).
    pub(crate) fn projects(&self) -> &Path {
        &self.projects
    }

    /// The protected entries of `writable` and, for [`Writable::TopEntries`], the top folder's
    /// subfolders. With `known` (the subfolders a run's view held read-only), the subfolders
    /// not among them are walked whole: a run of the top folder made them, and may have put a
    /// protected name anywhere inside.
    fn walk(&self, writable: &Writable, known: Option<&[PathBuf]>) -> Walked {
        let Ok(mut memo) = self.memo.lock() else {
            return (Vec::new(), Vec::new());
        };
        let memo = &mut *memo;
        #[cfg(target_os = "linux")]
        if let Some(watches) = &mut memo.watches {
            if watches.drain(&mut memo.listings) {
                memo.walks.clear();
            }
        }
        // `known` matters only to the top folder's walk.
        let known = known.filter(|_| *writable == Writable::TopEntries);
        let key = (writable.clone(), known.map(<[PathBuf]>::to_vec));
        if let Some(walked) = memo.walks.get(&key) {
            return walked.clone();
        }
        let mut all_watched = true;
        let now = SystemTime::now();
        let mut found = Vec::new();
        let mut subfolders = Vec::new();
        // Trees to walk whole: (root, whether the root itself may be a new venv).
        let mut trees = Vec::new();
        match writable {
            Writable::Nothing => {}
            Writable::TopEntries => {
                if let Some(top) = self.listing(memo, Path::new(""), now) {
                    all_watched &= top.watched;
                    if top.git_dir {
                        found.push(Found {
                            path: PathBuf::from(GIT_HEAD),
                            real: true,
                        });
                    }
                    found.extend(top.protected.iter().map(|(name, real)| Found {
                        path: PathBuf::from(name),
                        real: *real,
                    }));
                    subfolders.extend(top.subdirs.iter().map(PathBuf::from));
                }
                if let Some(known) = known {
                    let new = subfolders.iter().filter(|s| !known.contains(s));
                    trees.extend(new.map(|s| (s.clone(), true)));
                }
            }
            Writable::Tree(root) => trees.push((root.clone(), false)),
        }
        for (root, root_counts) in trees {
            let mut pending = vec![root.clone()];
            while let Some(rel) = pending.pop() {
                let Some(listing) = self.listing(memo, &rel, now) else {
                    continue;
                };
                all_watched &= listing.watched;
                let whole = listing.venv || listing.git_dir;
                if whole && (root_counts || rel != root) {
                    found.push(Found {
                        path: rel,
                        real: true,
                    });
                    continue;
                }
                if listing.git_dir {
                    // The root itself cannot move: without its `HEAD`, git no longer takes it
                    // for a repository.
                    found.push(Found {
                        path: rel.join(GIT_HEAD),
                        real: true,
                    });
                }
                found.extend(listing.protected.iter().map(|(name, real)| Found {
                    path: rel.join(name),
                    real: *real,
                }));
                pending.extend(listing.subdirs.iter().map(|name| rel.join(name)));
            }
        }
        found.sort();
        subfolders.sort();
        if all_watched {
            memo.walks.insert(key, (found.clone(), subfolders.clone()));
        }
        (found, subfolders)
    }

    /// The listing of folder `rel`, from the memo while its stamp holds; `None` when it is no
    /// real folder (any more).
    fn listing<'m>(&self, memo: &'m mut Memos, rel: &Path, now: SystemTime) -> Option<&'m Memo> {
        let dir = self.projects.join(rel);
        if memo.listings.get(&dir).is_some_and(|m| m.watched) {
            return memo.listings.get(&dir);
        }
        let memo_of = &mut memo.listings;
        let meta = std::fs::symlink_metadata(&dir).ok().filter(|m| m.is_dir());
        let Some(meta) = meta else {
            memo_of.remove(&dir);
            return None;
        };
        let stamp = Stamp::of(&meta);
        let fresh = memo_of.get(&dir).is_some_and(|m| m.stamp == stamp);
        if !fresh {
            // The watch first: a change made while the folder is listed is then an event.
            #[cfg(target_os = "linux")]
            let watched = memo.watches.as_mut().is_some_and(|w| w.watch(&dir));
            #[cfg(not(target_os = "linux"))]
            let watched = false;
            let memo_of = &mut memo.listings;
            let mut listed = list(&dir, stamp)?;
            listed.watched = watched;
            // Not settled: a listing keyed on a stamp a later change might share. It is kept
            // for this walk, with a stamp no later `stat` matches.
            let listed = if watched || stamp.settled(now) {
                listed
            } else {
                Memo {
                    stamp: Stamp {
                        mtime: None,
                        ..stamp
                    },
                    ..listed
                }
            };
            memo_of.insert(dir.clone(), listed);
        }
        memo.listings.get(&dir)
    }
}

fn list(dir: &Path, stamp: Stamp) -> Option<Memo> {
    let mut memo = Memo {
        stamp,
        subdirs: Vec::new(),
        protected: Vec::new(),
        venv: false,
        git_dir: false,
        watched: false,
    };
    let mut git_parts = [false; 3];
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name();
        // The entry's own type, never its link's target.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let bytes = name.as_encoded_bytes();
        if bytes == b"pyvenv.cfg" && kind.is_file() {
            memo.venv = true;
        }
        // Any kind: git follows links for each of them.
        if let Some(at) = GIT_DIR_PARTS.iter().position(|p| p.as_bytes() == bytes) {
            git_parts[at] = true;
        }
        if is_protected_name(bytes) {
            let real = kind.is_dir() || kind.is_file();
            memo.protected.push((name, real));
        } else if kind.is_dir() {
            memo.subdirs.push(name);
        }
    }
    memo.git_dir = git_parts.iter().all(|p| *p);
    Some(memo)
}

#[cfg(target_os = "linux")]
mod watch {
    //! The inotify watches that keep listings valid (see the module header).

    use std::collections::HashMap;
    use std::os::fd::OwnedFd;
    use std::path::{Path, PathBuf};

    use rustix::fs::inotify::{self, ReadFlags, WatchFlags};

    use super::Memo;

    #[derive(Debug)]
    pub(super) struct Watches {
        fd: OwnedFd,
        /// Each watch's folder, as last listed.
        dirs: HashMap<i32, PathBuf>,
    }

    impl Watches {
        pub(super) fn new() -> Option<Self> {
            let flags = inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK;
            match inotify::init(flags) {
                Ok(fd) => Some(Self {
                    fd,
                    dirs: HashMap::new(),
                }),
                Err(e) => {
                    tracing::debug!(%e, "no inotify: protected names are looked for by stat");
                    None
                }
            }
        }

        /// Watches `dir` (a real folder, never through a link); false when it cannot be.
        pub(super) fn watch(&mut self, dir: &Path) -> bool {
            let flags = WatchFlags::CREATE
                | WatchFlags::DELETE
                | WatchFlags::MOVED_FROM
                | WatchFlags::MOVED_TO
                | WatchFlags::DELETE_SELF
                | WatchFlags::MOVE_SELF
                | WatchFlags::ONLYDIR
                | WatchFlags::DONT_FOLLOW
                | WatchFlags::EXCL_UNLINK;
            match inotify::add_watch(&self.fd, dir, flags) {
                Ok(wd) => {
                    self.dirs.insert(wd, dir.to_path_buf());
                    true
                }
                Err(_) => false,
            }
        }

        /// Reads every queued event and forgets the listings they make stale: the folder an
        /// entry changed in, and a folder that went (with everything memoized below it). True
        /// when there was any event.
        pub(super) fn drain(&mut self, listings: &mut HashMap<PathBuf, Memo>) -> bool {
            let mut any = false;
            let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
            let mut reader = inotify::Reader::new(&self.fd, &mut buf);
            // Until EAGAIN: the queue is empty.
            while let Ok(event) = reader.next() {
                any = true;
                let flags = event.events();
                if flags.contains(ReadFlags::QUEUE_OVERFLOW) {
                    listings.clear();
                    continue;
                }
                let Some(dir) = self.dirs.get(&event.wd()).cloned() else {
                    continue;
                };
                if flags.contains(ReadFlags::IGNORED) {
                    self.dirs.remove(&event.wd());
                }
                if flags.intersects(ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF) {
                    forget_tree(listings, &dir);
                    continue;
                }
                listings.remove(&dir);
                // A folder moved or deleted here: what was memoized below its old path is
                // no longer there.
                let gone = ReadFlags::MOVED_FROM | ReadFlags::DELETE | ReadFlags::MOVED_TO;
                if flags.contains(ReadFlags::ISDIR) && flags.intersects(gone) {
                    if let Some(name) = event.file_name() {
                        let name = std::ffi::OsStr::from_bytes(name.to_bytes());
                        forget_tree(listings, &dir.join(name));
                    }
                }
            }
            any
        }
    }

    use std::os::unix::ffi::OsStrExt;

    fn forget_tree(listings: &mut HashMap<PathBuf, Memo>, dir: &Path) {
        listings.retain(|path, _| !path.starts_with(dir));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(found: &[Found]) -> Vec<String> {
        found
            .iter()
            .map(|f| f.path.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_project_run_finds_protected_names_anywhere_in_its_project_and_nowhere_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in [
            ".git/hooks",
            "a/.venv/lib",
            "a/deep/er/.github",
            "a/env/lib",
            "a/src/__pycache__",
            "b/.git",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("a/env/pyvenv.cfg"), "home = /usr/bin").unwrap();
        std::fs::write(root.join("a/deep/.env.local"), "X=1").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("/etc", root.join("a/.idea")).unwrap();
        let guard = ProjectGuard::new(root.to_path_buf(), false, WriteScope::Project);
        let scope = guard.scope(&RunProject::Folder("a".into()));
        let mut want = vec![
            "a/.venv",
            "a/deep/.env.local",
            "a/deep/er/.github",
            "a/env",
            "a/src/__pycache__",
        ];
        if cfg!(unix) {
            want.insert(0, "a/.idea");
        }
        assert_eq!(paths(&scope.protected), want);
        assert!(!scope.read_only_binds().contains(&PathBuf::from("a/.idea")));

        // A script at the top: the top's own protected names, and its subfolders read-only.
        let top = guard.scope(&RunProject::Top);
        assert_eq!(paths(&top.protected), [".git"]);
        assert_eq!(top.subfolders, [PathBuf::from("a"), PathBuf::from("b")]);
        // No project, or read-only projects: nothing is writable, nothing to find.
        assert_eq!(guard.scope(&RunProject::None), RunScope::nothing());
        let read_only = ProjectGuard::new(root.to_path_buf(), true, WriteScope::All);
        assert_eq!(
            read_only.scope(&RunProject::Folder("a".into())),
            RunScope::nothing()
        );
        // The whole folder writable: protected names anywhere.
        let all = ProjectGuard::new(root.to_path_buf(), false, WriteScope::All);
        let found = paths(&all.scope(&RunProject::Folder("a".into())).protected);
        assert!(found.contains(&".git".to_owned()) && found.contains(&"b/.git".to_owned()));
    }

    #[test]
    fn names_created_after_the_scope_was_made_are_found_through_the_memo() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/src/pkg")).unwrap();
        let guard = ProjectGuard::new(root.to_path_buf(), false, WriteScope::Project);
        let scope = guard.scope(&RunProject::Folder("a".into()));
        assert!(scope.protected.is_empty());
        std::fs::create_dir_all(root.join("a/src/pkg/__pycache__")).unwrap();
        std::fs::create_dir_all(root.join("a/.vscode")).unwrap();
        std::fs::create_dir_all(root.join("a/new/deeper/.git")).unwrap();
        assert_eq!(
            guard.created(&scope),
            [
                PathBuf::from("a/.vscode"),
                PathBuf::from("a/new/deeper/.git"),
                PathBuf::from("a/src/pkg/__pycache__")
            ]
        );
    }

    #[test]
    fn a_folder_moved_away_and_made_again_is_listed_anew() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/x/sub/deeper")).unwrap();
        let guard = ProjectGuard::new(root.to_path_buf(), false, WriteScope::Project);
        let scope = guard.scope(&RunProject::Folder("a".into()));
        // Walked twice: the second walk comes from the memo.
        assert_eq!(guard.created(&scope), Vec::<PathBuf>::new());
        std::fs::rename(root.join("a/x"), root.join("a/y")).unwrap();
        std::fs::create_dir_all(root.join("a/x/sub/deeper/.git")).unwrap();
        std::fs::create_dir_all(root.join("a/y/sub/.idea")).unwrap();
        assert_eq!(
            guard.created(&scope),
            [
                PathBuf::from("a/x/sub/deeper/.git"),
                PathBuf::from("a/y/sub/.idea")
            ]
        );
    }

    #[test]
    fn a_top_level_run_leaves_no_protected_name_in_a_subfolder_it_made() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("old/.git")).unwrap();
        let guard = ProjectGuard::new(root.to_path_buf(), false, WriteScope::Project);
        let scope = guard.scope(&RunProject::Top);
        assert_eq!(scope.subfolders, [PathBuf::from("old")]);
        std::fs::create_dir_all(root.join("made/deep/.git/hooks")).unwrap();
        std::fs::create_dir_all(root.join("env/bin")).unwrap();
        std::fs::write(root.join("env/pyvenv.cfg"), "home = /usr/bin").unwrap();
        assert_eq!(
            guard.created(&scope),
            [PathBuf::from("env"), PathBuf::from("made/deep/.git")]
        );
    }

    #[test]
    fn a_folder_git_takes_for_a_repository_is_protected_whatever_its_name() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let repo = |at: &str| {
            for d in ["objects", "refs/heads"] {
                std::fs::create_dir_all(root.join(at).join(d)).unwrap();
            }
            std::fs::write(root.join(at).join("HEAD"), "ref: refs/heads/main\n").unwrap();
        };
        std::fs::create_dir_all(root.join("a/half/objects")).unwrap();
        std::fs::write(root.join("a/half/HEAD"), "x").unwrap();
        let guard = ProjectGuard::new(root.to_path_buf(), false, WriteScope::Project);
        let scope = guard.scope(&RunProject::Folder("a".into()));
        assert!(scope.protected.is_empty(), "{:?}", scope.protected);
        repo("a/docs");
        repo("a");
        // A folder inside goes whole; the project itself loses its `HEAD`.
        assert_eq!(
            guard.created(&scope),
            [PathBuf::from("a/HEAD"), PathBuf::from("a/docs")]
        );
        let top = guard.scope(&RunProject::Top);
        repo("");
        assert_eq!(guard.created(&top), [PathBuf::from("HEAD")]);
    }
}
