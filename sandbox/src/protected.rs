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
//! - Each folder is opened from its parent's held descriptor and listed on it (`beneath.rs`):
//!   no absolute path is joined, so depth is no limit, and one descriptor per folder on the
//!   current path is held (a folder deeper than [`MAX_DEPTH`] is counted whole). A folder the
//!   server owns but cannot list gets its owner's access back, and the result says so.
//! - Each protected entry is found with its identity (device, inode). After a run, what is at
//!   a protected path with another identity than before is new, and an identity recorded
//!   before the run is the user's own wherever it is now: a run that renames a folder above a
//!   `.git` and plants its own at the old path loses the planted one, never the user's.

use std::cell::OnceCell;
use std::collections::{HashMap, HashSet};
use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::beneath::{Closed, EntryId, Folder, Kind, Stamp};
use crate::policy::{is_protected_name, RunProject, WriteScope};

/// The entries that make git take a folder for a repository (its `is_git_directory`): `HEAD`,
/// and `objects` and `refs` in the folder itself or in the one its `commondir` names.
const GIT_DIR_PARTS: [&str; 3] = [GIT_HEAD, "objects", "refs"];
const GIT_HEAD: &str = "HEAD";
const GIT_COMMONDIR: &str = "commondir";

/// How old a folder's mtime must be for its listing to be trusted later.
const RACY: Duration = Duration::from_secs(2);

/// How deep below the walked part's root the walk enters, holding one descriptor per folder on
/// the current path (never more, whatever the depth a run made): a folder deeper is counted
/// whole ([`Why::TooDeep`]) instead.
pub(crate) const MAX_DEPTH: usize = 256;

/// The part of the projects folder a run may write.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Writable {
    Nothing,
    /// A tree, relative to the projects folder (empty: the whole folder).
    Tree(PathBuf),
    /// The projects folder's own entries, not its subfolders.
    TopEntries,
}

/// Why an entry is protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Why {
    /// Its name (see [`is_protected_name`](crate::is_protected_name)).
    Name,
    /// A folder holding a `pyvenv.cfg`: a venv, whatever its name.
    Venv,
    /// A folder git takes for a repository (`HEAD` with `objects` and `refs`, or with a
    /// `commondir`), whatever its name; or the walked project's own `HEAD` when the project
    /// itself is one.
    GitDir,
    /// The folder a repository's `commondir` names: its config and hooks are the repository's.
    CommonDir,
    /// A folder the server cannot list (another user's, without read access for it):
    /// protected whole, since what is inside cannot be looked at.
    Unlistable,
    /// A folder deeper than the walk goes (256 levels below the walked part): not entered,
    /// counted whole.
    TooDeep,
}

/// A protected entry found in the part a run may write, relative to the projects folder.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Found {
    pub path: PathBuf,
    /// A real file or folder the view can bind read-only; false for a symbolic link (a bind
    /// would follow it) and for a folder too deep for a path.
    pub real: bool,
    /// Its identity when it was found: what tells the user's entry from one put at its path.
    pub id: Option<EntryId>,
    pub why: Why,
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

/// What a run left in the part of the projects folder it could write, found once it was over:
/// see [`Sandbox::created_protected`](crate::Sandbox::created_protected).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeftBehind {
    /// Protected entries that were not there before the run: to move to the quarantine.
    pub created: Vec<Left>,
    /// The user's own protected entries (same identity as before the run) now at another path:
    /// never moved, reported.
    pub moved: Vec<Moved>,
    /// Folders the walk could not list until it gave their owner (the server) its access back.
    pub opened: Vec<PathBuf>,
    /// The identities of the protected entries found before the run: the quarantine moves none
    /// of them, whatever path it finds one at.
    pub kept: HashSet<EntryId>,
}

impl LeftBehind {
    /// Nothing to move and nothing to report.
    pub fn is_empty(&self) -> bool {
        self.created.is_empty() && self.moved.is_empty() && self.opened.is_empty()
    }
}

/// One protected entry a run left (relative to the projects folder).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Left {
    pub path: PathBuf,
    /// Its identity as the walk found it: the quarantine moves it only while it still is.
    pub id: Option<EntryId>,
    /// Something else was at this path before the run (a protected entry replaced).
    pub replaced: bool,
    pub why: Why,
}

/// A protected entry of the user's that the run moved (by renaming it or a folder above it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Moved {
    pub from: PathBuf,
    pub to: PathBuf,
}

/// One folder's listing, as it was when its stamp was taken.
#[derive(Debug)]
struct Memo {
    stamp: Stamp,
    /// Real subfolders that are not protected: walked into.
    subdirs: Vec<OsString>,
    /// Entries with a protected name: (name, real, identity).
    protected: Vec<(OsString, bool, Option<EntryId>)>,
    /// It holds a `pyvenv.cfg`: a venv, protected whole.
    venv: bool,
    /// Git takes it for a repository of its own (a bare one, or any with `core.bare = false` in
    /// its `config`), whatever its name, and runs its `core.fsmonitor`, hooks and pager for a
    /// user whose shell merely enters it: `HEAD` with `objects` and `refs`, or `HEAD` with a
    /// `commondir` (a linked worktree's form: the rest lives where that file points).
    git_dir: bool,
    /// Its `HEAD`'s identity, when `git_dir`.
    head: Option<EntryId>,
    /// Where its `commondir` points, relative to the projects folder when it is inside it.
    commondir: Option<PathBuf>,
    /// Watched since before it was listed: valid until an event names it.
    watched: bool,
}

impl Stamp {
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

/// The listings (keyed on their path relative to the projects folder), and the watches that
/// keep them valid.
#[derive(Debug, Default)]
struct Memos {
    listings: HashMap<PathBuf, Arc<Memo>>,
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
        let ((protected, subfolders), opened) = self.walk(&writable, None);
        for folder in opened {
            tracing::warn!(
                folder = %folder.display(),
                "a folder of the projects folder could not be listed: its owner's access was \
                 given back"
            );
        }
        RunScope {
            writable,
            protected,
            subfolders,
        }
    }

    /// What was left in `scope`'s writable part since it was made (by the run, or by someone
    /// else meanwhile): protected entries that were not there, told apart by identity, not by
    /// path; the user's own ones found at another path; the folders that had to be opened.
    ///
    /// `held`: the run's view bound the real protected entries read-only, so the run could not
    /// remove one and have its inode number reused for a planted entry. Only then does an
    /// identity recorded before the run, found at another path, mean the user's own entry
    /// moved; without a view (or for a link, which is not bound) an entry counts as the user's
    /// only at its own path, with its own identity.
    pub(crate) fn created(&self, scope: &RunScope, held: bool) -> LeftBehind {
        let ((now, _), opened) = self.walk(&scope.writable, Some(&scope.subfolders));
        let before_at: HashMap<&Path, Option<EntryId>> = scope
            .protected
            .iter()
            .map(|f| (f.path.as_path(), f.id))
            .collect();
        let before_id: HashMap<EntryId, &Path> = scope
            .protected
            .iter()
            .filter(|f| held && f.real)
            .filter_map(|f| Some((f.id?, f.path.as_path())))
            .collect();
        let mut left = LeftBehind {
            opened,
            kept: before_id.keys().copied().collect(),
            ..LeftBehind::default()
        };
        for found in now {
            let at = before_at.get(found.path.as_path());
            if at == Some(&found.id) {
                continue;
            }
            if let Some(from) = found.id.and_then(|id| before_id.get(&id)) {
                left.moved.push(Moved {
                    from: from.to_path_buf(),
                    to: found.path,
                });
                continue;
            }
            left.created.push(Left {
                replaced: at.is_some(),
                path: found.path,
                id: found.id,
                why: found.why,
            });
        }
        left
    }

    /// The projects folder (canonical).
    pub(crate) fn projects(&self) -> &Path {
        &self.projects
    }

    /// The protected entries of `writable` and, for [`Writable::TopEntries`], the top folder's
    /// subfolders; and the folders given their owner's access back to be listed. With `known`
    /// (the subfolders a run's view held read-only), the subfolders not among them are walked
    /// whole: a run of the top folder made them, and may have put a protected name anywhere
    /// inside.
    fn walk(&self, writable: &Writable, known: Option<&[PathBuf]>) -> (Walked, Vec<PathBuf>) {
        let Ok(mut memo) = self.memo.lock() else {
            return ((Vec::new(), Vec::new()), Vec::new());
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
            return (walked.clone(), Vec::new());
        }
        let mut walk = Walk {
            projects: &self.projects,
            memo,
            now: SystemTime::now(),
            all_watched: true,
            found: Vec::new(),
            opened: Vec::new(),
            commondirs: Vec::new(),
        };
        let mut subfolders = Vec::new();
        let top = Lazy::root(self.projects.clone());
        match writable {
            Writable::Nothing => {}
            Writable::TopEntries => {
                if let Listing::Listed(listing) = walk.listing(&top, Path::new("")) {
                    walk.all_watched &= listing.watched;
                    if listing.git_dir {
                        walk.found.push(Found {
                            path: PathBuf::from(GIT_HEAD),
                            real: true,
                            id: listing.head,
                            why: Why::GitDir,
                        });
                        let common = listing.commondir.clone();
                        walk.commondirs.extend(common.map(|c| (PathBuf::new(), c)));
                    }
                    walk.found
                        .extend(listing.protected.iter().map(|(name, real, id)| Found {
                            path: PathBuf::from(name),
                            real: *real,
                            id: *id,
                            why: Why::Name,
                        }));
                    subfolders.extend(listing.subdirs.iter().map(PathBuf::from));
                    if let Some(known) = known {
                        for name in &listing.subdirs {
                            let rel = PathBuf::from(name);
                            if !known.contains(&rel) {
                                walk.visit(&top.child(name), &rel, 1, true);
                            }
                        }
                    }
                }
            }
            Writable::Tree(root) => {
                let root_dir = Lazy::root(self.projects.join(root));
                walk.visit(&root_dir, root, 0, false);
            }
        }
        walk.resolve_commondirs(writable);
        let Walk {
            mut found,
            opened,
            all_watched,
            memo,
            ..
        } = walk;
        found.sort();
        // One entry per path (a `commondir` may name what is protected anyway).
        found.dedup_by(|a, b| a.path == b.path);
        subfolders.sort();
        if all_watched {
            memo.walks.insert(key, (found.clone(), subfolders.clone()));
        }
        ((found, subfolders), opened)
    }
}

/// A folder the walk may need to open: from its parent's descriptor, once, when first asked
/// (a folder whose listing is memoized and watched is never opened).
struct Lazy<'p> {
    origin: Origin<'p>,
    folder: OnceCell<Result<Folder, Closed>>,
}

enum Origin<'p> {
    /// The projects folder, or the project walked (a path the server chose).
    Root(PathBuf),
    Child(&'p Lazy<'p>, &'p OsStr),
}

impl<'p> Lazy<'p> {
    fn root(path: PathBuf) -> Self {
        Self {
            origin: Origin::Root(path),
            folder: OnceCell::new(),
        }
    }

    fn child(&'p self, name: &'p OsStr) -> Self {
        Self {
            origin: Origin::Child(self, name),
            folder: OnceCell::new(),
        }
    }

    fn get(&self) -> &Result<Folder, Closed> {
        self.folder.get_or_init(|| match &self.origin {
            Origin::Root(path) => Folder::open_root(path).map_err(|_| Closed::Gone),
            Origin::Child(parent, name) => match parent.get() {
                Ok(parent) => parent.open_child(name),
                Err(_) => Err(Closed::Gone),
            },
        })
    }

    /// Its identity, as its parent sees it, without opening it.
    fn id(&self) -> Option<EntryId> {
        match &self.origin {
            Origin::Root(_) => self.get().as_ref().ok()?.stamp().ok()?.id,
            Origin::Child(parent, name) => parent.get().as_ref().ok()?.id_of(name),
        }
    }
}

enum Listing {
    Listed(Arc<Memo>),
    Unlistable(Option<EntryId>),
    Gone,
}

/// One walk's state: the memo it reads and fills, and what it found.
struct Walk<'a> {
    projects: &'a Path,
    memo: &'a mut Memos,
    now: SystemTime,
    all_watched: bool,
    found: Vec<Found>,
    opened: Vec<PathBuf>,
    /// The repositories found with a `commondir`, and where it points (both relative to the
    /// projects folder).
    commondirs: Vec<(PathBuf, PathBuf)>,
}

impl Walk<'_> {
    /// Walks folder `rel` (held by `dir`), `depth` below the walked part's root; `counts`: the
    /// folder itself may be a protected entry (it is not the project whose run this is).
    fn visit(&mut self, dir: &Lazy, rel: &Path, depth: usize, counts: bool) {
        if depth > MAX_DEPTH {
            self.found.push(Found {
                path: rel.to_path_buf(),
                real: false,
                id: dir.id(),
                why: Why::TooDeep,
            });
            return;
        }
        let listing = match self.listing(dir, rel) {
            Listing::Listed(listing) => listing,
            Listing::Unlistable(id) => {
                self.found.push(Found {
                    path: rel.to_path_buf(),
                    real: true,
                    id,
                    why: Why::Unlistable,
                });
                return;
            }
            Listing::Gone => return,
        };
        self.all_watched &= listing.watched;
        if listing.git_dir {
            let common = listing.commondir.clone();
            self.commondirs
                .extend(common.map(|c| (rel.to_path_buf(), c)));
        }
        if (listing.venv || listing.git_dir) && (counts || depth > 0) {
            self.found.push(Found {
                path: rel.to_path_buf(),
                real: true,
                id: listing.stamp.id,
                why: if listing.venv { Why::Venv } else { Why::GitDir },
            });
            return;
        }
        if listing.git_dir {
            // The root itself cannot move: without its `HEAD`, git no longer takes it for a
            // repository.
            self.found.push(Found {
                path: rel.join(GIT_HEAD),
                real: true,
                id: listing.head,
                why: Why::GitDir,
            });
        }
        self.found
            .extend(listing.protected.iter().map(|(name, real, id)| Found {
                path: rel.join(name),
                real: *real,
                id: *id,
                why: Why::Name,
            }));
        for name in &listing.subdirs {
            let child = dir.child(name);
            self.visit(&child, &rel.join(name), depth + 1, counts);
        }
    }

    /// The listing of folder `rel`, from the memo while it holds (watched, or its stamp the
    /// same), else listed now through `dir`.
    fn listing(&mut self, dir: &Lazy, rel: &Path) -> Listing {
        if let Some(memo) = self.memo.listings.get(rel).filter(|m| m.watched) {
            return Listing::Listed(Arc::clone(memo));
        }
        let folder = match dir.get() {
            Ok(folder) => folder,
            Err(closed) => {
                self.memo.listings.remove(rel);
                return match closed {
                    Closed::Unlistable(id) => Listing::Unlistable(*id),
                    Closed::Gone => Listing::Gone,
                };
            }
        };
        if folder.restored {
            self.opened.push(rel.to_path_buf());
        }
        let Ok(stamp) = folder.stamp() else {
            return Listing::Gone;
        };
        if let Some(memo) = self.memo.listings.get(rel).filter(|m| m.stamp == stamp) {
            return Listing::Listed(Arc::clone(memo));
        }
        // The watch first: a change made while the folder is listed is then an event.
        #[cfg(target_os = "linux")]
        let watched = self
            .memo
            .watches
            .as_mut()
            .is_some_and(|w| w.watch(&folder.proc_path(), rel));
        #[cfg(not(target_os = "linux"))]
        let watched = false;
        let Some(mut listed) = list(folder, stamp, rel, self.projects) else {
            return Listing::Gone;
        };
        listed.watched = watched;
        // Not settled: a listing keyed on a stamp a later change might share. It is kept for
        // this walk, with a stamp no later look matches.
        if !watched && !stamp.settled(self.now) {
            listed.stamp.mtime = None;
        }
        let listed = Arc::new(listed);
        self.memo
            .listings
            .insert(rel.to_path_buf(), Arc::clone(&listed));
        Listing::Listed(listed)
    }

    /// Adds the folders the repositories found point at with `commondir`, where they lie in
    /// the writable part: their `config` and `hooks` are those repositories'.
    fn resolve_commondirs(&mut self, writable: &Writable) {
        let inside = |p: &Path| match writable {
            Writable::Nothing => false,
            Writable::Tree(root) => p.starts_with(root) && p != root,
            Writable::TopEntries => !p.as_os_str().is_empty(),
        };
        for (repo, target) in std::mem::take(&mut self.commondirs) {
            // Never the project itself, nor a folder holding the repository (the repository goes
            // anyway): a `commondir` of `..` must not make the server move the user's folders.
            if !inside(&target) || repo.starts_with(&target) {
                continue;
            }
            let root = Lazy::root(self.projects.to_path_buf());
            let id = id_beneath(&root, &target);
            if id.is_some() {
                self.found.push(Found {
                    path: target,
                    real: true,
                    id,
                    why: Why::CommonDir,
                });
            }
        }
    }
}

/// The identity of folder `rel` below `root`'s folder, reached one component at a time.
fn id_beneath(root: &Lazy, rel: &Path) -> Option<EntryId> {
    let names: Vec<&OsStr> = rel.iter().collect();
    let (last, parents) = names.split_last()?;
    fn down(at: &Lazy, rest: &[&OsStr], last: &OsStr) -> Option<EntryId> {
        match rest.split_first() {
            None => at.get().as_ref().ok()?.id_of(last),
            Some((name, rest)) => down(&at.child(name), rest, last),
        }
    }
    down(root, parents, last)
}

/// Lists `folder` (at `rel` in `projects`).
fn list(folder: &Folder, stamp: Stamp, rel: &Path, projects: &Path) -> Option<Memo> {
    let mut memo = Memo {
        stamp,
        subdirs: Vec::new(),
        protected: Vec::new(),
        venv: false,
        git_dir: false,
        head: None,
        commondir: None,
        watched: false,
    };
    let mut git_parts = [false; 3];
    let mut commondir = false;
    for (name, kind) in folder.entries().ok()? {
        let bytes = name.as_encoded_bytes();
        // A link too: Python opens the file through it.
        if bytes == b"pyvenv.cfg" && kind != Kind::Dir {
            memo.venv = true;
        }
        // Any kind: git follows links for each of them.
        if let Some(at) = GIT_DIR_PARTS.iter().position(|p| p.as_bytes() == bytes) {
            git_parts[at] = true;
        }
        if bytes == GIT_COMMONDIR.as_bytes() {
            commondir = true;
        }
        if is_protected_name(bytes) {
            let real = matches!(kind, Kind::Dir | Kind::File);
            let id = folder.id_of(&name);
            memo.protected.push((name, real, id));
        } else if kind == Kind::Dir {
            memo.subdirs.push(name);
        }
    }
    let [head, objects, refs] = git_parts;
    memo.git_dir = head && ((objects && refs) || commondir);
    if memo.git_dir {
        memo.head = folder.id_of(OsStr::new(GIT_HEAD));
        if commondir {
            memo.commondir = folder
                .read_small(OsStr::new(GIT_COMMONDIR), 4096)
                .and_then(|text| common_dir(&text, rel, projects));
        }
    }
    Some(memo)
}

/// Where a `commondir` file's `text` points, as git reads it (trimmed; relative to the folder
/// holding it, `rel`), relative to the projects folder; `None` outside it.
fn common_dir(text: &[u8], rel: &Path, projects: &Path) -> Option<PathBuf> {
    let text = std::str::from_utf8(text)
        .ok()?
        .trim_end_matches(['\n', '\r']);
    let target = Path::new(text);
    let joined = if target.is_absolute() {
        target.strip_prefix(projects).ok()?.to_path_buf()
    } else {
        rel.join(target)
    };
    let mut out = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::Normal(name) => out.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

#[cfg(target_os = "linux")]
mod watch {
    //! The inotify watches that keep listings valid (see the module header).

    use std::collections::HashMap;
    use std::os::fd::OwnedFd;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use rustix::fs::inotify::{self, ReadFlags, WatchFlags};

    use super::Memo;

    /// The most folders one server watches (a project of 10,000 files has a few hundred).
    pub(super) const MAX_WATCHES: usize = 4096;

    #[derive(Debug)]
    pub(super) struct Watches {
        fd: OwnedFd,
        /// Each watch's folder (relative to the projects folder), as last listed.
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

        /// Watches the folder `call` names (its descriptor's `/proc/self/fd` path: the very
        /// folder, however deep, never a link's target), memoized at `rel`; false when it
        /// cannot be.
        /// How many folders are watched.
        #[cfg(test)]
        pub(super) fn count(&self) -> usize {
            self.dirs.len()
        }

        pub(super) fn watch(&mut self, call: &Path, rel: &Path) -> bool {
            // No DONT_FOLLOW: the magic link is what names the folder held.
            let flags = WatchFlags::CREATE
                | WatchFlags::DELETE
                | WatchFlags::MOVED_FROM
                | WatchFlags::MOVED_TO
                | WatchFlags::DELETE_SELF
                | WatchFlags::MOVE_SELF
                | WatchFlags::ONLYDIR
                | WatchFlags::EXCL_UNLINK;
            // A cap: watches count against the server's user's host-wide limit
            // (`max_user_watches`), and a run can make folders by the ten thousand; past it a
            // folder is memoized by its stamp instead (one `stat` a walk).
            if self.dirs.len() >= MAX_WATCHES {
                return false;
            }
            match inotify::add_watch(&self.fd, call, flags) {
                Ok(wd) => {
                    self.dirs.insert(wd, rel.to_path_buf());
                    true
                }
                Err(_) => false,
            }
        }

        /// Reads every queued event and forgets the listings they make stale: the folder an
        /// entry changed in, and a folder that went (with everything memoized below it). True
        /// when there was any event.
        pub(super) fn drain(&mut self, listings: &mut HashMap<PathBuf, Arc<Memo>>) -> bool {
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

    fn forget_tree(listings: &mut HashMap<PathBuf, Arc<Memo>>, dir: &Path) {
        listings.retain(|path, _| !path.starts_with(dir));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paths of what a run left that is to be moved away.
    fn created(guard: &ProjectGuard, scope: &RunScope) -> Vec<PathBuf> {
        guard
            .created(scope, true)
            .created
            .into_iter()
            .map(|l| l.path)
            .collect()
    }

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
            created(&guard, &scope),
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
        assert_eq!(created(&guard, &scope), Vec::<PathBuf>::new());
        std::fs::rename(root.join("a/x"), root.join("a/y")).unwrap();
        std::fs::create_dir_all(root.join("a/x/sub/deeper/.git")).unwrap();
        std::fs::create_dir_all(root.join("a/y/sub/.idea")).unwrap();
        assert_eq!(
            created(&guard, &scope),
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
            created(&guard, &scope),
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
            created(&guard, &scope),
            [PathBuf::from("a/HEAD"), PathBuf::from("a/docs")]
        );
        let top = guard.scope(&RunProject::Top);
        repo("");
        assert_eq!(created(&guard, &top), [PathBuf::from("HEAD")]);
    }

    /// Makes a repository's parts (HEAD, objects, refs) at `at`.
    fn repo(at: &Path) {
        for d in ["objects", "refs/heads"] {
            std::fs::create_dir_all(at.join(d)).unwrap();
        }
        std::fs::write(at.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_protected_entry_replaced_at_its_path_is_new_and_the_users_moved_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/sub/.git")).unwrap();
        std::fs::create_dir_all(root.join("a/src/pkg/__pycache__")).unwrap();
        let guard = ProjectGuard::new(root.to_path_buf(), false, WriteScope::Project);
        let scope = guard.scope(&RunProject::Folder("a".into()));
        assert!(scope.protected.iter().all(|f| f.id.is_some()));
        // The parents renamed, new entries made at the old paths.
        std::fs::rename(root.join("a/sub"), root.join("a/sub_old")).unwrap();
        std::fs::create_dir_all(root.join("a/sub/.git")).unwrap();
        std::fs::rename(root.join("a/src/pkg"), root.join("a/src/pkg_old")).unwrap();
        std::fs::create_dir_all(root.join("a/src/pkg/__pycache__")).unwrap();
        let left = guard.created(&scope, true);
        let made: Vec<_> = left
            .created
            .iter()
            .map(|l| (l.path.clone(), l.replaced))
            .collect();
        assert_eq!(
            made,
            [
                (PathBuf::from("a/src/pkg/__pycache__"), true),
                (PathBuf::from("a/sub/.git"), true)
            ]
        );
        let moved: Vec<_> = left
            .moved
            .iter()
            .map(|m| (m.from.clone(), m.to.clone()))
            .collect();
        assert_eq!(
            moved,
            [
                (
                    PathBuf::from("a/src/pkg/__pycache__"),
                    PathBuf::from("a/src/pkg_old/__pycache__")
                ),
                (PathBuf::from("a/sub/.git"), PathBuf::from("a/sub_old/.git"))
            ]
        );
        // The user's entries' identities are what the quarantine must never move.
        let real = scope.protected.iter().filter_map(|f| f.id);
        assert!(real.clone().count() == 2 && real.into_iter().all(|id| left.kept.contains(&id)));
        // Without a view holding them read-only, a run could remove an entry and have its inode
        // number reused: an identity found at another path then proves nothing, and goes too.
        let unheld: Vec<_> = guard
            .created(&scope, false)
            .created
            .into_iter()
            .map(|l| l.path)
            .collect();
        assert!(
            unheld.contains(&PathBuf::from("a/sub_old/.git")),
            "{unheld:?}"
        );
        // A file replaced in place (same path, another inode) is new too. (The old one is kept
        // here: in a run's view it is bound read-only and cannot be removed, so its inode
        // cannot be reused.)
        std::fs::write(root.join("a/.env"), "A=1").unwrap();
        let scope = guard.scope(&RunProject::Folder("a".into()));
        std::fs::write(root.join("a/other"), "A=2").unwrap();
        std::fs::rename(root.join("a/.env"), root.join("a/kept")).unwrap();
        std::fs::rename(root.join("a/other"), root.join("a/.env")).unwrap();
        assert!(created(&guard, &scope).contains(&PathBuf::from("a/.env")));
    }

    #[cfg(unix)]
    #[test]
    fn a_protected_entry_removed_and_made_again_at_its_path_is_new_even_with_its_inode_number() {
        // ext4 gives a removed entry's inode number to the next one made: the user's link
        // `.git` -> their repository, replaced by a link to a planted one, or (where no view
        // holds it) the user's `.git` folder replaced by a planted one, can have the same
        // (dev, ino). Its birth time tells them apart.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/sub")).unwrap();
        std::fs::create_dir_all(root.join("a/w/.git")).unwrap();
        std::os::unix::fs::symlink("../../mine", root.join("a/sub/.git")).unwrap();
        let guard = ProjectGuard::new(root.to_path_buf(), false, WriteScope::Project);
        let scope = guard.scope(&RunProject::Folder("a".into()));
        let ino = |p: &str| {
            use std::os::unix::fs::MetadataExt;
            std::fs::symlink_metadata(root.join(p)).unwrap().ino()
        };
        let (link, folder) = (ino("a/sub/.git"), ino("a/w/.git"));
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::remove_file(root.join("a/sub/.git")).unwrap();
        std::os::unix::fs::symlink("../planted", root.join("a/sub/.git")).unwrap();
        std::fs::remove_dir(root.join("a/w/.git")).unwrap();
        std::fs::create_dir(root.join("a/w/.git")).unwrap();
        let reused = ino("a/sub/.git") == link && ino("a/w/.git") == folder;
        let left: Vec<_> = guard
            .created(&scope, false)
            .created
            .into_iter()
            .map(|l| (l.path, l.replaced))
            .collect();
        assert_eq!(
            left,
            [
                (PathBuf::from("a/sub/.git"), true),
                (PathBuf::from("a/w/.git"), true)
            ],
            "inode numbers reused: {reused}"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn folders_past_the_watch_cap_are_still_looked_at_without_a_watch() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let many = watch::MAX_WATCHES + 200;
        for n in 0..many {
            std::fs::create_dir_all(root.join(format!("a/d{n}"))).unwrap();
        }
        let guard = ProjectGuard::new(root.to_path_buf(), false, WriteScope::Project);
        let scope = guard.scope(&RunProject::Folder("a".into()));
        let watched = |g: &ProjectGuard| g.memo.lock().unwrap().watches.as_ref().map(|w| w.count());
        assert_eq!(watched(&guard), Some(watch::MAX_WATCHES));
        // A protected name made in every folder, watched or not, is found.
        for n in 0..many {
            std::fs::create_dir(root.join(format!("a/d{n}/.git"))).unwrap();
        }
        assert_eq!(created(&guard, &scope).len(), many);
        assert_eq!(watched(&guard), Some(watch::MAX_WATCHES));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_repository_deeper_than_path_max_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a")).unwrap();
        let guard = ProjectGuard::new(root.to_path_buf(), false, WriteScope::Project);
        let scope = guard.scope(&RunProject::Folder("a".into()));
        // Made one folder at a time from a held descriptor: the path is longer than PATH_MAX.
        let mut at = std::fs::File::open(root.join("a")).unwrap();
        let mut rel = PathBuf::from("a");
        for i in 0..30 {
            let name = format!("{i:02}").repeat(100);
            rustix::fs::mkdirat(&at, name.as_str(), rustix::fs::Mode::RWXU).unwrap();
            let next = rustix::fs::openat(
                &at,
                name.as_str(),
                rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY,
                rustix::fs::Mode::empty(),
            )
            .unwrap();
            at = std::fs::File::from(next);
            rel.push(name);
        }
        rustix::fs::mkdirat(&at, ".git", rustix::fs::Mode::RWXU).unwrap();
        assert!(rel.as_os_str().len() > 4096);
        assert_eq!(created(&guard, &scope), [rel.join(".git")]);
    }

    #[test]
    fn a_folder_deeper_than_the_walk_goes_is_counted_whole() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a")).unwrap();
        let guard = ProjectGuard::new(root.to_path_buf(), false, WriteScope::Project);
        let scope = guard.scope(&RunProject::Folder("a".into()));
        let mut deep = PathBuf::from("a");
        for _ in 0..MAX_DEPTH + 3 {
            deep.push("d");
        }
        std::fs::create_dir_all(root.join(&deep)).unwrap();
        let left = guard.created(&scope, true);
        let mut cut = PathBuf::from("a");
        for _ in 0..=MAX_DEPTH {
            cut.push("d");
        }
        assert_eq!(left.created.len(), 1, "{left:?}");
        assert_eq!(left.created[0].path, cut);
        assert_eq!(left.created[0].why, Why::TooDeep);
    }

    #[test]
    fn a_folder_with_head_and_commondir_is_a_repository_and_its_common_dir_is_protected() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a")).unwrap();
        let guard = ProjectGuard::new(root.to_path_buf(), false, WriteScope::Project);
        let scope = guard.scope(&RunProject::Folder("a".into()));
        // git's linked-worktree form: HEAD here, the rest where `commondir` points.
        std::fs::create_dir_all(root.join("a/c/common/objects")).unwrap();
        std::fs::create_dir_all(root.join("a/c/common/refs")).unwrap();
        std::fs::create_dir_all(root.join("a/c/w")).unwrap();
        std::fs::write(root.join("a/c/w/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(root.join("a/c/w/commondir"), "../common\n").unwrap();
        // A `.git` file naming a planted folder of that form; one pointing out of the folder.
        std::fs::create_dir_all(root.join("a/g/work")).unwrap();
        std::fs::write(root.join("a/g/work/.git"), "gitdir: ../planted\n").unwrap();
        std::fs::create_dir_all(root.join("a/g/planted")).unwrap();
        std::fs::write(root.join("a/g/planted/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(root.join("a/g/planted/commondir"), "../../../../../etc\n").unwrap();
        // A `commondir` naming a folder above it: the repository goes, the folder stays.
        std::fs::create_dir_all(root.join("a/k/l")).unwrap();
        std::fs::write(root.join("a/k/l/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(root.join("a/k/l/commondir"), "../..\n").unwrap();
        // HEAD alone is not a repository.
        std::fs::create_dir_all(root.join("a/h")).unwrap();
        std::fs::write(root.join("a/h/HEAD"), "x").unwrap();
        let left = guard.created(&scope, true);
        let found: Vec<_> = left
            .created
            .iter()
            .map(|l| (l.path.clone(), l.why))
            .collect();
        assert_eq!(
            found,
            [
                (PathBuf::from("a/c/common"), Why::CommonDir),
                (PathBuf::from("a/c/w"), Why::GitDir),
                (PathBuf::from("a/g/planted"), Why::GitDir),
                (PathBuf::from("a/g/work/.git"), Why::Name),
                (PathBuf::from("a/k/l"), Why::GitDir),
            ]
        );
        // The same, checked by the host's git when there is one: it takes `a/c/w` for a
        // repository too.
        if let Ok(out) = std::process::Command::new("git")
            .args(["rev-parse", "--git-dir"])
            .current_dir(root.join("a/c/w"))
            .env("GIT_CEILING_DIRECTORIES", root)
            .output()
        {
            assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), ".");
        }
        repo(&root.join("a/plain"));
        assert!(created(&guard, &scope).contains(&PathBuf::from("a/plain")));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_folder_that_cannot_be_listed_is_not_skipped() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a")).unwrap();
        let guard = ProjectGuard::new(root.to_path_buf(), false, WriteScope::Project);
        let scope = guard.scope(&RunProject::Folder("a".into()));
        std::fs::create_dir_all(root.join("a/x/y/.git")).unwrap();
        let shut = std::fs::Permissions::from_mode(0o111);
        std::fs::set_permissions(root.join("a/x/y"), shut.clone()).unwrap();
        std::fs::set_permissions(root.join("a/x"), shut).unwrap();
        let left = guard.created(&scope, true);
        // Root lists it anyway; a server that owns it gives it back its access and looks.
        assert_eq!(
            left.created
                .iter()
                .map(|l| l.path.clone())
                .collect::<Vec<_>>(),
            [PathBuf::from("a/x/y/.git")],
            "{left:?}"
        );
        if !rustix::process::geteuid().is_root() {
            assert_eq!(left.opened, [PathBuf::from("a/x"), PathBuf::from("a/x/y")]);
        }
    }
}
