//! `notifications/resources/list_changed`: one watcher of the projects folder per server, and the
//! sessions that hear it.
//!
//! Steps: the first session to subscribe starts the watcher (so a server no client opened watches
//! nothing). The OS watcher (Linux: inotify of our own, see [`os`]; elsewhere `notify`: FSEvents,
//! ReadDirectoryChangesW) watches each served folder on its own, not recursively, so hidden
//! folders such as `.git` or `.venv` cost no watches and their churn wakes nothing. An event that
//! names a served path marks the folder dirty;
//! [`DEBOUNCE`] later the folder is walked again (which also watches new folders and drops gone
//! ones), and only when the set of served files differs does every session hear `list_changed`.
//!
//! Sessions: a session that initialized (protocol versions with `initialize`) is a [`Peer`] in a
//! list, dropped as soon as its transport is closed; a 2026-07-28 `subscriptions/listen` holds a
//! [`tokio::sync::watch`] receiver for as long as the subscription lives. A send that does not
//! finish in [`NOTIFY_TIMEOUT`] is dropped, so a stuck client stalls no one.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use rmcp::service::Peer;
use rmcp::RoleServer;
use tokio::sync::{watch, Notify};

use crate::mcp::present::reply::NOTIFY_TIMEOUT;
use pyrun_run::paths::{ListedFile, ProjectRoot};

/// Quiet time after the first event before the folder is walked again: a burst of changes
/// (a `git checkout`, a script writing many files) makes one notification.
pub const DEBOUNCE: Duration = Duration::from_secs(1);
/// How long the walk behind a first `resources/list` page answers the pages after it: a client
/// paging through a big folder walks it once, not once per page, and sees one snapshot.
const LISTING_TTL: Duration = Duration::from_secs(30);

/// The projects folder's watcher and the sessions that hear it. Cheap until a session subscribes.
#[derive(Debug)]
pub struct ProjectWatch {
    inner: Arc<Inner>,
    start: Once,
    /// The last walk for `resources/list`.
    listing: Mutex<Option<Listing>>,
}

/// A walk of the folder, when it was made and the change count then.
#[derive(Debug)]
struct Listing {
    at: Instant,
    changes: u64,
    files: Arc<Vec<ListedFile>>,
}

#[derive(Debug)]
struct Inner {
    root: ProjectRoot,
    /// Sessions that initialized, until their transport closes.
    peers: Mutex<Vec<Peer<RoleServer>>>,
    /// Bumped on every change; `subscriptions/listen` waits on it.
    changes: watch::Sender<u64>,
}

impl ProjectWatch {
    pub fn new(root: ProjectRoot) -> Self {
        Self {
            inner: Arc::new(Inner {
                root,
                peers: Mutex::new(Vec::new()),
                changes: watch::channel(0).0,
            }),
            start: Once::new(),
            listing: Mutex::new(None),
        }
    }

    /// The served files: walked now when `fresh` (a first page), else the last walk while it is
    /// younger than [`LISTING_TTL`] and no change was seen since. Blocking.
    pub fn listing(&self, fresh: bool) -> Arc<Vec<ListedFile>> {
        let changes = *self.inner.changes.borrow();
        let mut cached = self.listing.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(last) = &*cached {
            if !fresh && last.changes == changes && last.at.elapsed() < LISTING_TTL {
                return last.files.clone();
            }
        }
        let files = Arc::new(self.inner.root.list_files());
        *cached = Some(Listing {
            at: Instant::now(),
            changes,
            files: files.clone(),
        });
        files
    }

    /// A session that initialized: it hears `list_changed` until its transport closes. Must be
    /// called inside the tokio runtime.
    pub fn add_peer(&self, peer: Peer<RoleServer>) {
        self.start();
        let mut peers = self.inner.peers.lock().unwrap_or_else(|p| p.into_inner());
        peers.retain(|p| !p.is_transport_closed());
        peers.push(peer);
    }

    /// A receiver that changes each time served files appear or go (for `subscriptions/listen`).
    /// Must be called inside the tokio runtime.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.start();
        self.inner.changes.subscribe()
    }

    fn start(&self) {
        self.start.call_once(|| {
            let inner = self.inner.clone();
            tokio::spawn(async move {
                if let Err(error) = watch_folder(inner).await {
                    tracing::warn!(%error, "the projects folder is not watched: clients are not told when files appear or go");
                }
            });
        });
    }
}

/// The watcher's life: set up, then one debounced walk per burst of events, forever (it ends
/// with the runtime).
async fn watch_folder(inner: Arc<Inner>) -> std::io::Result<()> {
    let dirty = Arc::new(AtomicBool::new(false));
    let wake = Arc::new(Notify::new());
    let changed = {
        let (dirty, wake) = (dirty.clone(), wake.clone());
        move || {
            dirty.store(true, Ordering::Release);
            wake.notify_one();
        }
    };
    let watcher = os::FolderWatcher::new(inner.root.path(), changed)?;
    let walker = Arc::new(Mutex::new(Walker {
        watcher,
        watched: HashSet::new(),
        files: Vec::new(),
    }));
    let walk = |walker: Arc<Mutex<Walker>>, root: ProjectRoot| {
        tokio::task::spawn_blocking(move || {
            let mut walker = walker.lock().unwrap_or_else(|p| p.into_inner());
            walker.walk(&root)
        })
    };
    let _ = walk(walker.clone(), inner.root.clone()).await;
    tracing::debug!("watching the projects folder");
    loop {
        wake.notified().await;
        tokio::time::sleep(DEBOUNCE).await;
        if !dirty.swap(false, Ordering::AcqRel) {
            continue;
        }
        if walk(walker.clone(), inner.root.clone())
            .await
            .unwrap_or(false)
        {
            inner.changes.send_modify(|n| *n = n.wrapping_add(1));
            notify_peers(&inner).await;
        }
    }
}

/// The OS watcher and what it watches.
struct Walker {
    watcher: os::FolderWatcher,
    watched: HashSet<PathBuf>,
    files: Vec<ListedFile>,
}

impl Walker {
    /// Walks the folder: watches new folders, forgets gone ones; whether the files changed.
    fn walk(&mut self, root: &ProjectRoot) -> bool {
        let (files, folders) = root.walk_served();
        let now: HashSet<PathBuf> = folders.into_iter().collect();
        for gone in self.watched.difference(&now) {
            self.watcher.unwatch(gone);
        }
        self.watched.retain(|f| now.contains(f));
        for folder in now {
            if !self.watched.contains(&folder) {
                match self.watcher.watch(&folder) {
                    Ok(()) => {
                        self.watched.insert(folder);
                    }
                    Err(error) => tracing::debug!(%error, "a folder is not watched"),
                }
            }
        }
        let changed = !same_names(&files, &self.files);
        self.files = files;
        changed
    }
}

/// Whether two listings hold the same files (sizes may differ: a file written is not a new file).
fn same_names(a: &[ListedFile], b: &[ListedFile]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.relative == y.relative)
}

/// Linux: inotify with only the events that can change a listing (an entry created, deleted or
/// moved in a watched folder, the folder itself gone, a lost event). `notify`'s fixed mask also
/// holds opens, writes and attribute changes, so every file a run opened or wrote in the projects
/// folder (its script, each project module it imports) woke a server thread for nothing.
#[cfg(target_os = "linux")]
mod os {
    use std::collections::HashMap;
    use std::ffi::CStr;
    use std::io;
    use std::mem::MaybeUninit;
    use std::os::fd::OwnedFd;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use rustix::event::{EventfdFlags, PollFd, PollFlags};
    use rustix::fs::inotify::{self, ReadFlags, WatchFlags};
    use rustix::io::Errno;

    use pyrun_run::paths::is_served_name;

    /// Watches folders one by one (not recursively); a thread of its own reads the events, until
    /// the watcher is dropped.
    pub(super) struct FolderWatcher {
        fd: Arc<OwnedFd>,
        /// Written on drop: the reading thread ends.
        stop: Arc<OwnedFd>,
        watches: HashMap<PathBuf, i32>,
    }

    impl FolderWatcher {
        /// `changed` is called after each batch of events that holds one that may change a
        /// listing.
        pub(super) fn new(_root: &Path, changed: impl Fn() + Send + 'static) -> io::Result<Self> {
            let flags = inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK;
            let fd = Arc::new(inotify::init(flags)?);
            let stop = Arc::new(rustix::event::eventfd(
                0,
                EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK,
            )?);
            let (events, stopped) = (fd.clone(), stop.clone());
            std::thread::Builder::new()
                .name("pyrun-watch".into())
                .spawn(move || read_events(&events, &stopped, changed))?;
            Ok(Self {
                fd,
                stop,
                watches: HashMap::new(),
            })
        }

        /// Watches `folder` (a real folder: a link in its place is not followed).
        pub(super) fn watch(&mut self, folder: &Path) -> io::Result<()> {
            let flags = WatchFlags::CREATE
                | WatchFlags::DELETE
                | WatchFlags::MOVED_FROM
                | WatchFlags::MOVED_TO
                | WatchFlags::DELETE_SELF
                | WatchFlags::MOVE_SELF
                | WatchFlags::ONLYDIR
                | WatchFlags::DONT_FOLLOW
                | WatchFlags::EXCL_UNLINK;
            let wd = inotify::add_watch(&*self.fd, folder, flags)?;
            self.watches.insert(folder.to_path_buf(), wd);
            Ok(())
        }

        pub(super) fn unwatch(&mut self, folder: &Path) {
            if let Some(wd) = self.watches.remove(folder) {
                let _ = inotify::remove_watch(&*self.fd, wd);
            }
        }
    }

    impl Drop for FolderWatcher {
        fn drop(&mut self) {
            let _ = rustix::io::write(&*self.stop, &1u64.to_ne_bytes());
        }
    }

    /// Waits for events (or `stop`), then reads the queue until it is empty.
    fn read_events(fd: &OwnedFd, stop: &OwnedFd, changed: impl Fn()) {
        let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
        loop {
            let mut ready = [
                PollFd::new(fd, PollFlags::IN),
                PollFd::new(stop, PollFlags::IN),
            ];
            match rustix::event::poll(&mut ready, None) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(error) => return lost(error, &changed),
            }
            if !ready[1].revents().is_empty() {
                return;
            }
            let mut relevant = false;
            let mut reader = inotify::Reader::new(fd, &mut buf);
            loop {
                match reader.next() {
                    Ok(event) => relevant |= may_change_listing(event.events(), event.file_name()),
                    Err(Errno::AGAIN) => break,
                    Err(Errno::INTR) => {}
                    Err(error) => return lost(error, &changed),
                }
            }
            if relevant {
                changed();
            }
        }
    }

    /// The watch cannot go on: one last walk, and a warning.
    fn lost(error: Errno, changed: &impl Fn()) {
        tracing::warn!(%error, "the projects folder is no longer watched: clients are not told when files appear or go");
        changed();
    }

    /// Whether an event may change what is listed: a served name created, deleted or moved in a
    /// watched (served) folder, the folder itself gone, or events lost.
    pub(super) fn may_change_listing(flags: ReadFlags, name: Option<&CStr>) -> bool {
        if flags
            .intersects(ReadFlags::QUEUE_OVERFLOW | ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF)
        {
            return true;
        }
        // A watch removed: unwatched, or its folder gone (which the events above said).
        if flags.contains(ReadFlags::IGNORED) {
            return false;
        }
        name.is_none_or(|name| is_served_name(&name.to_string_lossy()))
    }
}

/// Elsewhere: `notify` (FSEvents, ReadDirectoryChangesW), its events filtered here.
#[cfg(not(target_os = "linux"))]
mod os {
    use std::io;
    use std::path::Path;

    use notify::{EventKind, RecursiveMode, Watcher as _};

    use pyrun_run::paths::is_served_name;

    pub(super) struct FolderWatcher(notify::RecommendedWatcher);

    impl FolderWatcher {
        /// `changed` is called for each event that may change a listing of `root`.
        pub(super) fn new(root: &Path, changed: impl Fn() + Send + 'static) -> io::Result<Self> {
            let root = root.to_path_buf();
            let handler = move |event: notify::Result<notify::Event>| {
                let relevant = match &event {
                    Ok(event) => touches_served_files(&root, event),
                    Err(_) => true, // an overflow or a lost watch: walk again to be sure
                };
                if relevant {
                    changed();
                }
            };
            notify::recommended_watcher(handler)
                .map(Self)
                .map_err(io::Error::other)
        }

        pub(super) fn watch(&mut self, folder: &Path) -> io::Result<()> {
            self.0
                .watch(folder, RecursiveMode::NonRecursive)
                .map_err(io::Error::other)
        }

        pub(super) fn unwatch(&mut self, folder: &Path) {
            let _ = self.0.unwatch(folder);
        }
    }

    /// Whether an event may change what is listed: a create, remove or rename of a served path.
    pub(super) fn touches_served_files(root: &Path, event: &notify::Event) -> bool {
        let kind = matches!(
            event.kind,
            EventKind::Create(_)
                | EventKind::Remove(_)
                | EventKind::Modify(notify::event::ModifyKind::Name(_))
                | EventKind::Any
                | EventKind::Other
        );
        if !kind && !event.need_rescan() {
            return false;
        }
        event.paths.is_empty()
            || event.paths.iter().any(|path| {
                path.strip_prefix(root).is_ok_and(|rel| {
                    rel.components()
                        .all(|c| is_served_name(&c.as_os_str().to_string_lossy()))
                })
            })
    }
}

async fn notify_peers(inner: &Inner) {
    let peers: Vec<Peer<RoleServer>> = {
        let mut peers = inner.peers.lock().unwrap_or_else(|p| p.into_inner());
        peers.retain(|p| !p.is_transport_closed());
        peers.clone()
    };
    tracing::debug!(sessions = peers.len(), "project files changed");
    let sends = peers.iter().map(|peer| async move {
        let _ = tokio::time::timeout(NOTIFY_TIMEOUT, peer.notify_resource_list_changed()).await;
    });
    futures::future::join_all(sends).await;
}

#[cfg(test)]
mod tests {
    #[cfg(target_os = "linux")]
    #[test]
    fn only_served_names_created_deleted_or_moved_count() {
        use super::os::may_change_listing;
        use rustix::fs::inotify::ReadFlags;
        for flags in [
            ReadFlags::CREATE,
            ReadFlags::DELETE,
            ReadFlags::MOVED_FROM,
            ReadFlags::MOVED_TO,
        ] {
            assert!(may_change_listing(flags, Some(c"a.py")), "{flags:?}");
            assert!(
                may_change_listing(flags | ReadFlags::ISDIR, Some(c"sub")),
                "{flags:?}"
            );
            for hidden in [c".git", c"__pycache__", c".env", c"venv"] {
                assert!(
                    !may_change_listing(flags, Some(hidden)),
                    "{flags:?} {hidden:?}"
                );
            }
        }
        // The watched folder itself gone, or events lost: walk again.
        assert!(may_change_listing(ReadFlags::DELETE_SELF, None));
        assert!(may_change_listing(ReadFlags::MOVE_SELF, None));
        assert!(may_change_listing(ReadFlags::QUEUE_OVERFLOW, None));
        // A watch removed says nothing of its own.
        assert!(!may_change_listing(ReadFlags::IGNORED, None));
    }

    /// What the server asks the kernel for: a run that opens, reads and writes a project file
    /// wakes nothing (notify's mask queued an event for each), one that makes a file does.
    #[cfg(target_os = "linux")]
    #[test]
    fn opening_and_writing_a_file_wakes_nothing_and_making_one_does() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        use std::time::{Duration, Instant};
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.py"), "print(1)").unwrap();
        let wakes = Arc::new(AtomicUsize::new(0));
        let counter = wakes.clone();
        let mut watcher = super::os::FolderWatcher::new(dir.path(), move || {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .unwrap();
        watcher.watch(dir.path()).unwrap();
        for _ in 0..5 {
            let text = std::fs::read_to_string(dir.path().join("a.py")).unwrap();
            std::fs::write(dir.path().join("a.py"), text).unwrap();
        }
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(wakes.load(Ordering::SeqCst), 0, "woken by opens or writes");
        std::fs::write(dir.path().join("b.py"), "").unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while wakes.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(wakes.load(Ordering::SeqCst) > 0, "a new file woke nothing");
    }

    #[cfg(not(target_os = "linux"))]
    #[test]
    fn only_creates_removes_and_renames_of_served_paths_count() {
        use super::os::touches_served_files;
        use notify::event::{CreateKind, DataChange, ModifyKind, RemoveKind, RenameMode};
        use notify::EventKind;
        use std::path::{Path, PathBuf};
        fn event(kind: EventKind, path: PathBuf) -> notify::Event {
            notify::Event::new(kind).add_path(path)
        }
        let root = Path::new("/p");
        let create = EventKind::Create(CreateKind::File);
        assert!(touches_served_files(root, &event(create, "/p/a.py".into())));
        assert!(touches_served_files(
            root,
            &event(EventKind::Remove(RemoveKind::Any), "/p/sub/b.txt".into())
        ));
        assert!(touches_served_files(
            root,
            &event(
                EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
                "/p/c".into()
            )
        ));
        let write = EventKind::Modify(ModifyKind::Data(DataChange::Content));
        assert!(!touches_served_files(root, &event(write, "/p/a.py".into())));
        for hidden in [
            "/p/.git/index.lock",
            "/p/__pycache__/x.pyc",
            "/p/.env",
            "/p/venv/x",
        ] {
            assert!(
                !touches_served_files(root, &event(create, hidden.into())),
                "{hidden}"
            );
        }
    }
}
