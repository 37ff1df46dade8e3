//! `notifications/resources/list_changed`: one watcher of the projects folder per server, and the
//! sessions that hear it.
//!
//! Steps: the first session to subscribe starts the watcher (so a server no client opened watches
//! nothing). The OS watcher (`notify`: inotify, FSEvents, ReadDirectoryChangesW) watches each
//! served folder on its own, not recursively, so hidden folders such as `.git` or `.venv` cost no
//! watches and their churn wakes nothing. An event that names a served path marks the folder dirty;
//! [`DEBOUNCE`] later the folder is walked again (which also watches new folders and drops gone
//! ones), and only when the set of served files differs does every session hear `list_changed`.
//!
//! Sessions: a session that initialized (protocol versions with `initialize`) is a [`Peer`] in a
//! list, dropped as soon as its transport is closed; a 2026-07-28 `subscriptions/listen` holds a
//! [`tokio::sync::watch`] receiver for as long as the subscription lives. A send that does not
//! finish in [`NOTIFY_TIMEOUT`] is dropped, so a stuck client stalls no one.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use notify::{EventKind, RecursiveMode, Watcher as _};
use rmcp::service::Peer;
use rmcp::RoleServer;
use tokio::sync::{watch, Notify};

use crate::mcp::reply::NOTIFY_TIMEOUT;
use pyrun_run::paths::{is_served_name, ListedFile, ProjectRoot};

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
async fn watch_folder(inner: Arc<Inner>) -> notify::Result<()> {
    let dirty = Arc::new(AtomicBool::new(false));
    let wake = Arc::new(Notify::new());
    let root = inner.root.path().to_path_buf();
    let handler = {
        let (dirty, wake, root) = (dirty.clone(), wake.clone(), root.clone());
        move |event: notify::Result<notify::Event>| {
            let relevant = match &event {
                Ok(event) => touches_served_files(&root, event),
                Err(_) => true, // an overflow or a lost watch: walk again to be sure
            };
            if relevant {
                dirty.store(true, Ordering::Release);
                wake.notify_one();
            }
        }
    };
    let watcher = notify::recommended_watcher(handler)?;
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
    watcher: notify::RecommendedWatcher,
    watched: HashSet<PathBuf>,
    files: Vec<ListedFile>,
}

impl Walker {
    /// Walks the folder: watches new folders, forgets gone ones; whether the files changed.
    fn walk(&mut self, root: &ProjectRoot) -> bool {
        let (files, folders) = root.walk_served();
        let now: HashSet<PathBuf> = folders.into_iter().collect();
        for gone in self.watched.difference(&now) {
            let _ = self.watcher.unwatch(gone);
        }
        self.watched.retain(|f| now.contains(f));
        for folder in now {
            if !self.watched.contains(&folder) {
                match self.watcher.watch(&folder, RecursiveMode::NonRecursive) {
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

/// Whether an event may change what is listed: a create, remove or rename of a served path.
fn touches_served_files(root: &Path, event: &notify::Event) -> bool {
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
    use super::*;

    fn event(kind: EventKind, path: PathBuf) -> notify::Event {
        notify::Event::new(kind).add_path(path)
    }

    #[test]
    fn only_creates_removes_and_renames_of_served_paths_count() {
        use notify::event::{CreateKind, DataChange, ModifyKind, RemoveKind, RenameMode};
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
