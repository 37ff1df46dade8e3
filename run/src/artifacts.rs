//! The artifact store: the files a run left in its output folder (`PYRUN_OUTPUT_DIR`), copied
//! into a server-owned folder and kept for the retention time, readable only by the run's owner.
//!
//! Steps of [`ArtifactStore::keep`], after the run's whole process tree is dead:
//! 1. walk the output folder by file descriptor (Unix: `openat` from the folder's own fd with
//!    `O_NOFOLLOW`, so a name swapped for a link on the way is refused, never followed), at most
//!    [`ArtifactLimits::max_depth`] folders deep and [`MAX_ENTRIES`] entries in all;
//! 2. judge each entry: a name that is not UTF-8 or holds characters that would disguise a line
//!    (controls, `\`, bidirectional overrides) is skipped; so is anything but a regular file
//!    (symbolic link, FIFO, socket, device), a file over the per-file cap, a file beyond the
//!    count cap, and one for which the store has no room even after dropping the same caller's
//!    older runs (another caller's files stay for their whole retention);
//! 3. copy each kept file from the descriptor it was judged by (`O_NONBLOCK`: a FIFO swapped in
//!    later never blocks; the copy reads at most the cap): the scratch folder and the store may
//!    lie on different filesystems, and a copy from a proven descriptor is never a `rename` across
//!    a link. The store names its copies by number; names live only in memory.
//!
//! Every run's files go in `<store>/<run id>/`; the store is made afresh by each server (runs do
//! not outlive a restart) under `<dir>/<pid>-…`, and a later server removes the folders of
//! servers that are no longer running.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

/// The prefix of run ids; 32 lowercase hex characters (128 random bits) follow it.
pub const RUN_ID_PREFIX: &str = "run_";
/// Entries looked at in one output folder (files, folders, anything): the walk stops there.
pub const MAX_ENTRIES: usize = 4096;
/// Skipped entries named one by one; more are counted in one last note.
const MAX_SKIPPED_NOTES: usize = 64;
/// Longest artifact name kept, in bytes.
const MAX_NAME_BYTES: usize = 1024;

/// A new run id: `run_` and 32 lowercase hex characters from the OS's random source.
pub fn new_run_id() -> io::Result<String> {
    crate::ids::new_id(RUN_ID_PREFIX)
}

/// True for a string shaped like a run id (the only ids that ever name a folder of the store).
pub fn is_run_id(id: &str) -> bool {
    crate::ids::has_id_shape(RUN_ID_PREFIX, id)
}

/// How much one run may leave and the store may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactLimits {
    /// Files kept per run.
    pub max_files: usize,
    /// Folders deep below the output folder.
    pub max_depth: usize,
    /// Largest file kept, in bytes.
    pub max_file_bytes: u64,
    /// All runs' files together, in bytes.
    pub max_total_bytes: u64,
    /// One caller's runs' files together, in bytes. When a new run's files would pass this or
    /// the total, the oldest files of the same caller go first; another caller's are never
    /// dropped before their retention (nor can one caller fill the store for everyone).
    pub max_bytes_per_caller: u64,
}

impl Default for ArtifactLimits {
    fn default() -> Self {
        Self {
            max_files: 64,
            max_depth: 8,
            max_file_bytes: 64 << 20,
            max_total_bytes: 1024 << 20,
            max_bytes_per_caller: 512 << 20,
        }
    }
}

/// What a run left: the files kept and, named with the reason, those that were not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Collected {
    pub kept: Vec<Artifact>,
    pub skipped: Vec<Skipped>,
}

/// One kept file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Artifact {
    /// Its path inside the output folder, `/`-separated, UTF-8 without control characters.
    pub name: String,
    pub size: u64,
    pub mime_type: &'static str,
}

impl Artifact {
    /// A picture MCP clients show inline (PNG, JPEG, GIF, WebP whose bytes say so).
    pub fn is_image(&self) -> bool {
        matches!(
            self.mime_type,
            "image/png" | "image/jpeg" | "image/gif" | "image/webp"
        )
    }
}

/// One entry that was not kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// Its path inside the output folder, escaped (controls, `\` and bytes that are not UTF-8
    /// as `\n`, `\u{..}`, `\x..`): safe to show on one line.
    pub name: String,
    /// A plain sentence: "not a regular file (symbolic link)", "more than 64 files", …
    pub reason: String,
}

/// An artifact opened for reading: streamed from disk by whoever serves it.
#[derive(Debug)]
pub struct ArtifactFile {
    pub file: File,
    pub size: u64,
    pub mime_type: &'static str,
}

#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// An unknown, expired or foreign run, or a name that run did not leave: one error for all,
    /// so nobody learns which runs exist.
    #[error("no such artifact")]
    NotFound,
    #[error("the artifact could not be read: {0}")]
    Io(#[from] io::Error),
}

/// The server's artifact store (one per server).
#[derive(Debug)]
pub struct ArtifactStore {
    limits: ArtifactLimits,
    state: Mutex<State>,
    /// This server's folder, removed with the store.
    dir: tempfile::TempDir,
}

#[derive(Debug, Default)]
struct State {
    /// Oldest first.
    runs: VecDeque<StoredRun>,
    /// Bytes on disk, with those reserved by runs being kept right now.
    used: u64,
    /// The same, by owner (owners with none are not listed).
    used_by: HashMap<String, u64>,
}

impl State {
    fn account(&mut self, owner: &str, bytes: u64) {
        self.used = self.used.saturating_add(bytes);
        *self.used_by.entry(owner.to_owned()).or_default() += bytes;
    }

    fn unaccount(&mut self, owner: &str, bytes: u64) {
        self.used = self.used.saturating_sub(bytes);
        if let Some(used) = self.used_by.get_mut(owner) {
            *used = used.saturating_sub(bytes);
            if *used == 0 {
                self.used_by.remove(owner);
            }
        }
    }

    fn used_by(&self, owner: &str) -> u64 {
        self.used_by.get(owner).copied().unwrap_or(0)
    }
}

#[derive(Debug)]
struct StoredRun {
    id: String,
    owner: String,
    expires: SystemTime,
    files: Vec<Artifact>,
    bytes: u64,
}

impl ArtifactStore {
    /// A store in a new folder of this server's under `dir` (made owner-only when missing; a
    /// symlink there is refused). Folders of servers no longer running are removed (Unix).
    pub fn new(dir: PathBuf, limits: ArtifactLimits) -> io::Result<Self> {
        make_private_dir(&dir)?;
        #[cfg(unix)]
        super::slots::remove_dead_servers_folders(&dir, "");
        let own = tempfile::Builder::new()
            // `<pid>-…`: what `slots::remove_dead_servers_folders` looks for.
            .prefix(&format!("{}-", std::process::id()))
            .tempdir_in(&dir)?;
        Ok(Self {
            limits,
            state: Mutex::new(State::default()),
            dir: own,
        })
    }

    /// A store in the system's temp folder (no state folder), named like the runner's scratch
    /// roots so the same sweep removes it after a crash.
    pub fn temporary(limits: ArtifactLimits) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("pyrun-mcp-{}-runs-", std::process::id()))
            .tempdir()?;
        Ok(Self {
            limits,
            state: Mutex::new(State::default()),
            dir,
        })
    }

    pub fn limits(&self) -> ArtifactLimits {
        self.limits
    }

    /// Copies every regular file of `out_dir` into the store under `run_id`, owned by `owner`
    /// (a `Caller::key()`), kept until `expires`. Blocking: call it off the async threads. A
    /// missing `out_dir` leaves nothing; a bad `run_id` keeps nothing.
    pub fn keep(
        &self,
        run_id: &str,
        owner: &str,
        out_dir: &Path,
        expires: SystemTime,
    ) -> Collected {
        self.sweep(SystemTime::now());
        let mut collected = Collected::default();
        if !is_run_id(run_id) {
            return collected;
        }
        let run_dir = self.dir.path().join(run_id);
        let mut keeper = Keeper {
            store: self,
            owner,
            run_dir: &run_dir,
            made_dir: false,
            reserved: 0,
            collected: &mut collected,
            entries: 0,
            more_skipped: 0,
        };
        walk::walk(out_dir, self.limits.max_depth, &mut keeper);
        let reserved = keeper.reserved;
        if keeper.more_skipped > 0 {
            let more = keeper.more_skipped;
            collected.skipped.push(Skipped {
                name: "…".to_owned(),
                reason: format!("{more} more entries not kept (not listed one by one)"),
            });
        }
        if let Ok(mut state) = self.state.lock() {
            if collected.kept.is_empty() {
                state.unaccount(owner, reserved);
            } else {
                state.runs.push_back(StoredRun {
                    id: run_id.to_owned(),
                    owner: owner.to_owned(),
                    expires,
                    files: collected.kept.clone(),
                    bytes: reserved,
                });
            }
        }
        if collected.kept.is_empty() {
            let _ = std::fs::remove_dir_all(&run_dir);
        }
        collected
    }

    /// One artifact, for its owner only: a foreign, unknown or expired run and a name the run
    /// did not leave give the same [`ArtifactError::NotFound`].
    pub fn read(
        &self,
        owner: &str,
        run_id: &str,
        name: &str,
    ) -> Result<ArtifactFile, ArtifactError> {
        let now = SystemTime::now();
        let (index, artifact) = {
            let state = self.state.lock().map_err(|_| ArtifactError::NotFound)?;
            let run = state
                .runs
                .iter()
                .find(|r| r.id == run_id && r.owner == owner && r.expires > now)
                .ok_or(ArtifactError::NotFound)?;
            let (index, artifact) = run
                .files
                .iter()
                .enumerate()
                .find(|(_, a)| a.name == name)
                .ok_or(ArtifactError::NotFound)?;
            (index, artifact.clone())
        };
        // `run_id` matched a stored id, so it is a run id: no path comes from the caller.
        let file = File::open(self.dir.path().join(run_id).join(index.to_string()))?;
        Ok(ArtifactFile {
            file,
            size: artifact.size,
            mime_type: artifact.mime_type,
        })
    }

    /// The kept files of a run, for its owner only (`None` as for [`ArtifactStore::read`]).
    pub fn list(&self, owner: &str, run_id: &str) -> Option<Vec<Artifact>> {
        let now = SystemTime::now();
        let state = self.state.lock().ok()?;
        state
            .runs
            .iter()
            .find(|r| r.id == run_id && r.owner == owner && r.expires > now)
            .map(|r| r.files.clone())
    }

    /// Drops a run's files.
    pub fn forget(&self, run_id: &str) {
        let gone = self.state.lock().ok().and_then(|mut state| {
            let at = state.runs.iter().position(|r| r.id == run_id)?;
            let run = state.runs.remove(at)?;
            state.unaccount(&run.owner, run.bytes);
            Some(run)
        });
        if let Some(run) = gone {
            self.remove_run_dir(&run.id);
        }
    }

    /// Drops the runs that expired by `now`.
    pub fn sweep(&self, now: SystemTime) {
        let expired: Vec<StoredRun> = match self.state.lock() {
            Ok(mut state) => {
                let (gone, kept): (Vec<_>, Vec<_>) =
                    state.runs.drain(..).partition(|r| r.expires <= now);
                state.runs = kept.into();
                for run in &gone {
                    state.unaccount(&run.owner, run.bytes);
                }
                gone
            }
            Err(_) => Vec::new(),
        };
        for run in expired {
            self.remove_run_dir(&run.id);
        }
    }

    /// Bytes the store holds now (with those reserved by runs being kept).
    pub fn used_bytes(&self) -> u64 {
        self.state.lock().map_or(0, |s| s.used)
    }

    fn remove_run_dir(&self, run_id: &str) {
        if is_run_id(run_id) {
            let _ = std::fs::remove_dir_all(self.dir.path().join(run_id));
        }
    }

    /// Reserves `size` bytes for `owner`, dropping that owner's oldest runs' files while they
    /// do not fit in the owner's share or the total; never another owner's.
    fn reserve(&self, owner: &str, size: u64) -> bool {
        let (cap, share) = (
            self.limits.max_total_bytes,
            self.limits.max_bytes_per_caller,
        );
        if size > cap.min(share) {
            return false;
        }
        let mut dropped = Vec::new();
        let fits = match self.state.lock() {
            Ok(mut state) => {
                let fits = |state: &State| {
                    state.used.saturating_add(size) <= cap
                        && state.used_by(owner).saturating_add(size) <= share
                };
                while !fits(&state) {
                    let Some(at) = state.runs.iter().position(|r| r.owner == owner) else {
                        break;
                    };
                    let Some(oldest) = state.runs.remove(at) else {
                        break;
                    };
                    state.unaccount(owner, oldest.bytes);
                    dropped.push(oldest.id);
                }
                let fits = fits(&state);
                if fits {
                    state.account(owner, size);
                }
                fits
            }
            Err(_) => false,
        };
        for id in dropped {
            tracing::debug!(run = %id, "artifact storage full: the caller's oldest run's files dropped");
            self.remove_run_dir(&id);
        }
        fits
    }

    fn release(&self, owner: &str, size: u64) {
        if let Ok(mut state) = self.state.lock() {
            state.unaccount(owner, size);
        }
    }
}

/// What [`walk::walk`] reports, entry by entry.
enum Entry {
    /// A regular file, opened without following a link, with its size from `fstat`.
    File { name: String, file: File, size: u64 },
    /// Anything else, or a file that could not be judged.
    Skip { name: String, reason: String },
}

/// Receives the walk's entries and keeps what may be kept.
struct Keeper<'a> {
    store: &'a ArtifactStore,
    owner: &'a str,
    run_dir: &'a Path,
    made_dir: bool,
    reserved: u64,
    collected: &'a mut Collected,
    entries: usize,
    more_skipped: usize,
}

impl Keeper<'_> {
    /// Takes one entry; false when the walk must stop (too many entries).
    fn take(&mut self, entry: Entry) -> bool {
        self.entries += 1;
        if self.entries > MAX_ENTRIES {
            self.skip(
                "…".to_owned(),
                format!("more than {MAX_ENTRIES} entries: the rest were not looked at"),
            );
            return false;
        }
        match entry {
            Entry::Skip { name, reason } => self.skip(name, reason),
            Entry::File { name, file, size } => self.file(name, file, size),
        }
        true
    }

    fn skip(&mut self, name: String, reason: String) {
        if self.collected.skipped.len() < MAX_SKIPPED_NOTES {
            self.collected.skipped.push(Skipped { name, reason });
        } else {
            self.more_skipped += 1;
        }
    }

    fn file(&mut self, name: String, file: File, size: u64) {
        let limits = self.store.limits;
        if self.collected.kept.len() >= limits.max_files {
            return self.skip(name, format!("more than {} files", limits.max_files));
        }
        if size > limits.max_file_bytes {
            return self.skip(
                name,
                format!(
                    "larger than the {} limit per file",
                    mib(limits.max_file_bytes)
                ),
            );
        }
        if !self.store.reserve(self.owner, size) {
            return self.skip(
                name,
                format!(
                    "no room in the artifact storage (its limit is {}, {} for one caller)",
                    mib(limits.max_total_bytes),
                    mib(limits.max_bytes_per_caller)
                ),
            );
        }
        let index = self.collected.kept.len();
        match self.copy(&name, file, index, size) {
            Ok((copied, mime_type)) => {
                if copied < size {
                    self.store.release(self.owner, size - copied);
                }
                self.reserved += copied;
                self.collected.kept.push(Artifact {
                    name,
                    size: copied,
                    mime_type,
                });
            }
            Err(reason) => {
                self.store.release(self.owner, size);
                let _ = std::fs::remove_file(self.run_dir.join(index.to_string()));
                self.skip(name, reason);
            }
        }
    }

    /// Copies at most `size` bytes (what `fstat` said: a file that grows is cut at the size it
    /// was judged by); returns the bytes copied and the type its name and first bytes give.
    fn copy(
        &mut self,
        name: &str,
        mut from: File,
        index: usize,
        size: u64,
    ) -> Result<(u64, &'static str), String> {
        let failed = |e: io::Error| {
            tracing::debug!(%e, "artifact copy failed");
            "could not be copied".to_owned()
        };
        if !self.made_dir {
            make_private_dir(self.run_dir).map_err(failed)?;
            self.made_dir = true;
        }
        let mut to = new_private_file(&self.run_dir.join(index.to_string())).map_err(failed)?;
        let mut head = [0u8; 16];
        let mut got = 0;
        while got < head.len() {
            match from.read(&mut head[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(failed(e)),
            }
        }
        let got = got.min(usize::try_from(size).unwrap_or(usize::MAX));
        to.write_all(&head[..got]).map_err(failed)?;
        let rest = io::copy(&mut from.take(size - got as u64), &mut to).map_err(failed)?;
        Ok((got as u64 + rest, mime_type(name, &head[..got])))
    }
}

/// `n` bytes as "64 MiB" (whole MiB) or "1500 bytes".
fn mib(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else {
        format!("{n} bytes")
    }
}

/// The MIME type of a file from its name, and for pictures from its first bytes too: a `.png`
/// that is not a PNG is not shown as a picture.
pub fn mime_type(name: &str, head: &[u8]) -> &'static str {
    super::mime::sniffed(name, head)
}

/// A name segment as a kept artifact's: UTF-8 with no character that would disguise a line
/// when shown, no `\` (a separator on Windows), not `.` or `..`.
fn segment_ok(segment: &str) -> bool {
    !segment.is_empty()
        && segment != "."
        && segment != ".."
        && !segment.chars().any(|c| c == '\\' || disguises(c))
}

/// A character that could break or disguise a line when shown (as `client_message` escapes).
fn disguises(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `bytes` shown on one line: UTF-8 kept except controls, `\` and the line-disguising
/// characters (as `\n`, `\\`, `\u{..}`); bytes that are not UTF-8 as `\x..`.
fn escape(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\\' => out.push_str("\\\\"),
                c if disguises(c) => {
                    let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
                }
                c => out.push(c),
            }
        }
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    out
}

/// Joins a folder's name (already judged) and an entry's raw name: the kept name, or the escaped
/// one with the reason it is refused.
fn child_name(parent: &str, raw: &[u8]) -> Result<String, (String, String)> {
    let shown = |raw: &[u8]| {
        let mut name = String::from(parent);
        if !name.is_empty() {
            name.push('/');
        }
        name.push_str(&escape(raw));
        name
    };
    match std::str::from_utf8(raw) {
        Ok(segment) if segment_ok(segment) => {
            let mut name = String::from(parent);
            if !name.is_empty() {
                name.push('/');
            }
            name.push_str(segment);
            if name.len() > MAX_NAME_BYTES {
                Err((
                    shown(raw),
                    format!("a name longer than {MAX_NAME_BYTES} bytes"),
                ))
            } else {
                Ok(name)
            }
        }
        Ok(_) => Err((
            shown(raw),
            "a name with control characters, a backslash or invisible direction marks".to_owned(),
        )),
        Err(_) => Err((shown(raw), "a name that is not UTF-8".to_owned())),
    }
}

/// Makes `dir` (its parents as `mkdir -p` would) owner-only; an existing real folder is used,
/// a link or a file in its place refused.
fn make_private_dir(dir: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => return Ok(()),
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "a link or a file is where the folder should be",
            ))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    #[cfg_attr(not(unix), allow(unused_mut))]
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

fn new_private_file(path: &Path) -> io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// The walk of an output folder, by platform.
mod walk {
    use super::{child_name, Entry, Keeper};
    use std::path::Path;

    /// The reason for skipping an entry of this kind.
    pub(super) fn not_regular(kind: &str) -> String {
        format!("not a regular file ({kind})")
    }

    /// Unix: every step from a folder's descriptor, never following a link.
    #[cfg(unix)]
    pub(super) fn walk(out_dir: &Path, max_depth: usize, keeper: &mut Keeper<'_>) {
        use rustix::fs::{openat, Mode, OFlags, CWD};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        // A missing folder (the run removed it) leaves nothing; a link in its place neither.
        let Ok(root) = openat(CWD, out_dir, flags, Mode::empty()) else {
            return;
        };
        let _ = walk_dir(&root, "", 0, max_depth, keeper);
    }

    /// Walks one folder; false when the walk must stop.
    #[cfg(unix)]
    fn walk_dir(
        dir: &rustix::fd::OwnedFd,
        prefix: &str,
        depth: usize,
        max_depth: usize,
        keeper: &mut Keeper<'_>,
    ) -> bool {
        use rustix::fs::{fstat, openat, statat, AtFlags, FileType, Mode, OFlags};
        let Ok(listing) = rustix::fs::Dir::read_from(dir) else {
            return true;
        };
        let mut names = Vec::new();
        for entry in listing {
            let Ok(entry) = entry else { break };
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." {
                continue;
            }
            names.push(entry.file_name().to_owned());
            // Listing a folder of a million entries would take long: judge at most MAX_ENTRIES.
            if names.len() > super::MAX_ENTRIES {
                break;
            }
        }
        names.sort();
        for raw in names {
            let name = match child_name(prefix, raw.to_bytes()) {
                Ok(name) => name,
                Err((name, reason)) => {
                    if !keeper.take(Entry::Skip { name, reason }) {
                        return false;
                    }
                    continue;
                }
            };
            let kind = statat(dir, &raw, AtFlags::SYMLINK_NOFOLLOW)
                .map(|s| FileType::from_raw_mode(s.st_mode));
            let entry = match kind {
                Ok(FileType::RegularFile) => {
                    let flags = OFlags::RDONLY
                        | OFlags::NOFOLLOW
                        | OFlags::NONBLOCK
                        | OFlags::NOCTTY
                        | OFlags::CLOEXEC;
                    // Judged again on the descriptor: the name may have been swapped meanwhile.
                    match openat(dir, &raw, flags, Mode::empty())
                        .and_then(|fd| Ok((fstat(&fd)?, fd)))
                    {
                        Ok((stat, fd))
                            if FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile =>
                        {
                            Entry::File {
                                name,
                                size: u64::try_from(stat.st_size).unwrap_or(0),
                                file: std::fs::File::from(fd),
                            }
                        }
                        Ok(_) => Entry::Skip {
                            name,
                            reason: not_regular("changed while it was read"),
                        },
                        Err(rustix::io::Errno::LOOP) => Entry::Skip {
                            name,
                            reason: not_regular("symbolic link"),
                        },
                        Err(_) => Entry::Skip {
                            name,
                            reason: "could not be opened".to_owned(),
                        },
                    }
                }
                Ok(FileType::Directory) => {
                    if depth + 1 > max_depth {
                        Entry::Skip {
                            name,
                            reason: format!("a folder more than {max_depth} levels deep"),
                        }
                    } else {
                        let flags =
                            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
                        match openat(dir, &raw, flags, Mode::empty()) {
                            Ok(sub) => {
                                if !walk_dir(&sub, &name, depth + 1, max_depth, keeper) {
                                    return false;
                                }
                                continue;
                            }
                            Err(_) => Entry::Skip {
                                name,
                                reason: "a folder that could not be opened".to_owned(),
                            },
                        }
                    }
                }
                Ok(FileType::Symlink) => Entry::Skip {
                    name,
                    reason: not_regular("symbolic link"),
                },
                Ok(FileType::Fifo) => Entry::Skip {
                    name,
                    reason: not_regular("FIFO"),
                },
                Ok(FileType::Socket) => Entry::Skip {
                    name,
                    reason: not_regular("socket"),
                },
                Ok(FileType::CharacterDevice | FileType::BlockDevice) => Entry::Skip {
                    name,
                    reason: not_regular("device"),
                },
                Ok(_) => Entry::Skip {
                    name,
                    reason: not_regular("unknown kind"),
                },
                Err(_) => Entry::Skip {
                    name,
                    reason: "could not be looked at".to_owned(),
                },
            };
            if !keeper.take(entry) {
                return false;
            }
        }
        true
    }

    /// Elsewhere (Windows): by path, never following a link or junction to a folder, and files
    /// opened without following a reparse point, then judged on the open handle. The run's job
    /// object is closed before this walk: nothing of the run is left to swap names meanwhile.
    #[cfg(not(unix))]
    pub(super) fn walk(out_dir: &Path, max_depth: usize, keeper: &mut Keeper<'_>) {
        let is_real_dir = std::fs::symlink_metadata(out_dir).is_ok_and(|m| m.is_dir());
        if is_real_dir {
            let _ = walk_dir(out_dir, "", 0, max_depth, keeper);
        }
    }

    #[cfg(not(unix))]
    fn walk_dir(
        dir: &Path,
        prefix: &str,
        depth: usize,
        max_depth: usize,
        keeper: &mut Keeper<'_>,
    ) -> bool {
        let Ok(listing) = std::fs::read_dir(dir) else {
            return true;
        };
        let mut names: Vec<_> = listing
            .flatten()
            .take(super::MAX_ENTRIES + 1)
            .map(|e| e.file_name())
            .collect();
        names.sort();
        for raw in names {
            let path = dir.join(&raw);
            let lossy = raw.to_string_lossy();
            let bytes: &[u8] = match raw.to_str() {
                Some(s) => s.as_bytes(),
                // Not valid Unicode: shown lossily, refused below by the UTF-8 check.
                None => &[0xff],
            };
            let name = match child_name(prefix, bytes) {
                Ok(name) => name,
                Err((_, reason)) => {
                    let name = format!(
                        "{prefix}{}{lossy}",
                        if prefix.is_empty() { "" } else { "/" }
                    );
                    if !keeper.take(Entry::Skip { name, reason }) {
                        return false;
                    }
                    continue;
                }
            };
            let entry = match std::fs::symlink_metadata(&path) {
                Ok(m) if m.file_type().is_symlink() => Entry::Skip {
                    name,
                    reason: not_regular("symbolic link"),
                },
                Ok(m) if m.is_dir() => {
                    if depth + 1 > max_depth {
                        Entry::Skip {
                            name,
                            reason: format!("a folder more than {max_depth} levels deep"),
                        }
                    } else {
                        if !walk_dir(&path, &name, depth + 1, max_depth, keeper) {
                            return false;
                        }
                        continue;
                    }
                }
                Ok(m) if m.is_file() => match open_no_follow(&path) {
                    Ok(file) => match file.metadata() {
                        Ok(m) if m.is_file() => Entry::File {
                            name,
                            size: m.len(),
                            file,
                        },
                        _ => Entry::Skip {
                            name,
                            reason: not_regular("changed while it was read"),
                        },
                    },
                    Err(_) => Entry::Skip {
                        name,
                        reason: "could not be opened".to_owned(),
                    },
                },
                Ok(_) => Entry::Skip {
                    name,
                    reason: not_regular("special file"),
                },
                Err(_) => Entry::Skip {
                    name,
                    reason: "could not be looked at".to_owned(),
                },
            };
            if !keeper.take(entry) {
                return false;
            }
        }
        true
    }

    #[cfg(windows)]
    fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
        use std::os::windows::fs::OpenOptionsExt;
        /// `FILE_FLAG_OPEN_REPARSE_POINT`: open a link itself, never its target.
        const OPEN_REPARSE_POINT: u32 = 0x0020_0000;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(OPEN_REPARSE_POINT)
            .open(path)
    }

    #[cfg(not(any(unix, windows)))]
    fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
        std::fs::File::open(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR rest of a picture";
    const OWNER: &str = "token";

    fn store(limits: ArtifactLimits) -> (tempfile::TempDir, ArtifactStore) {
        let state = tempfile::tempdir().unwrap();
        let store = ArtifactStore::new(state.path().join("runs"), limits).unwrap();
        (state, store)
    }

    fn later() -> SystemTime {
        SystemTime::now() + Duration::from_secs(3600)
    }

    fn id(n: u8) -> String {
        format!("{RUN_ID_PREFIX}{}", format!("{n:02x}").repeat(16))
    }

    fn read_all(store: &ArtifactStore, owner: &str, run: &str, name: &str) -> Vec<u8> {
        let mut file = store.read(owner, run, name).unwrap();
        let mut bytes = Vec::new();
        file.file.read_to_end(&mut bytes).unwrap();
        assert_eq!(bytes.len() as u64, file.size);
        bytes
    }

    fn reasons(c: &Collected) -> Vec<(String, String)> {
        c.skipped
            .iter()
            .map(|s| (s.name.clone(), s.reason.clone()))
            .collect()
    }

    #[test]
    fn run_ids_are_random_and_well_formed() {
        let (a, b) = (new_run_id().unwrap(), new_run_id().unwrap());
        assert!(is_run_id(&a) && is_run_id(&b), "{a} {b}");
        assert_ne!(a, b);
        for bad in [
            "",
            "run_",
            "run_../../etc/passwd0000000000000000000",
            &a.to_uppercase(),
            &format!("{a}0"),
            &a.replace("run_", "RUN_"),
        ] {
            assert!(!is_run_id(bad), "{bad}");
        }
    }

    #[test]
    fn regular_files_are_kept_with_their_names_sizes_and_types() {
        let (_state, store) = store(ArtifactLimits::default());
        let out = tempfile::tempdir().unwrap();
        std::fs::write(out.path().join("plot.png"), PNG).unwrap();
        std::fs::write(out.path().join("table.csv"), "a,b\n1,2\n").unwrap();
        std::fs::create_dir_all(out.path().join("sub/deeper")).unwrap();
        std::fs::write(out.path().join("sub/deeper/notes.txt"), "hi").unwrap();
        // A file named .png that is not a PNG is not a picture.
        std::fs::write(out.path().join("fake.png"), "<script>").unwrap();
        let run = id(1);
        let got = store.keep(&run, OWNER, out.path(), later());
        assert_eq!(got.skipped, []);
        let kept: Vec<_> = got
            .kept
            .iter()
            .map(|a| (a.name.as_str(), a.size, a.mime_type, a.is_image()))
            .collect();
        assert_eq!(
            kept,
            [
                ("fake.png", 8, "application/octet-stream", false),
                ("plot.png", PNG.len() as u64, "image/png", true),
                ("sub/deeper/notes.txt", 2, "text/plain", false),
                ("table.csv", 8, "text/csv", false),
            ]
        );
        assert_eq!(read_all(&store, OWNER, &run, "plot.png"), PNG);
        assert_eq!(read_all(&store, OWNER, &run, "sub/deeper/notes.txt"), b"hi");
        assert_eq!(store.used_bytes(), (PNG.len() + 8 + 2 + 8) as u64);
        // Copies: the output folder may be emptied at once.
        drop(out);
        assert_eq!(read_all(&store, OWNER, &run, "table.csv"), b"a,b\n1,2\n");
    }

    #[test]
    fn only_the_owner_reads_and_every_other_case_is_the_same_not_found() {
        let (_state, store) = store(ArtifactLimits::default());
        let out = tempfile::tempdir().unwrap();
        std::fs::write(out.path().join("a.txt"), "x").unwrap();
        let run = id(2);
        store.keep(&run, OWNER, out.path(), later());
        assert!(store.read(OWNER, &run, "a.txt").is_ok());
        let expired = id(3);
        store.keep(
            &expired,
            OWNER,
            out.path(),
            SystemTime::now() - Duration::from_secs(1),
        );
        for (owner, run, name) in [
            ("anonymous", run.as_str(), "a.txt"),
            ("oauth:token", run.as_str(), "a.txt"),
            (OWNER, run.as_str(), "b.txt"),
            (OWNER, run.as_str(), "../a.txt"),
            (OWNER, run.as_str(), "0"),
            (OWNER, &id(9), "a.txt"),
            (OWNER, "../../etc", "passwd"),
            (OWNER, expired.as_str(), "a.txt"),
        ] {
            let err = store.read(owner, run, name).unwrap_err();
            assert!(
                matches!(err, ArtifactError::NotFound),
                "{owner} {run} {name}: {err}"
            );
        }
        assert_eq!(store.list("anonymous", &run), None);
        assert_eq!(store.list(OWNER, &run).map(|l| l.len()), Some(1));
    }

    #[cfg(unix)]
    #[test]
    fn links_fifos_and_sockets_are_named_and_skipped_never_followed_nor_waited_on() {
        let (_state, store) = store(ArtifactLimits::default());
        let outside = tempfile::tempdir().unwrap();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "the secret").unwrap();
        let out = tempfile::tempdir().unwrap();
        let o = out.path();
        std::os::unix::fs::symlink(&secret, o.join("secret.txt")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", o.join("passwd")).unwrap();
        std::os::unix::fs::symlink(outside.path(), o.join("linked-dir")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(o.join("pipe"))
            .status()
            .unwrap();
        assert!(made.success());
        let _socket = std::os::unix::net::UnixListener::bind(o.join("sock")).unwrap();
        std::fs::write(o.join("real.txt"), "ok").unwrap();
        let started = std::time::Instant::now();
        let got = store.keep(&id(4), OWNER, o, later());
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        let names: Vec<_> = got.kept.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["real.txt"]);
        let link = "not a regular file (symbolic link)".to_owned();
        assert_eq!(
            reasons(&got),
            [
                ("linked-dir".to_owned(), link.clone()),
                ("passwd".to_owned(), link.clone()),
                ("pipe".to_owned(), "not a regular file (FIFO)".to_owned()),
                ("secret.txt".to_owned(), link),
                ("sock".to_owned(), "not a regular file (socket)".to_owned()),
            ]
        );
        // A link in place of the output folder itself: nothing is kept through it.
        let link_out = outside.path().join("out-link");
        std::os::unix::fs::symlink(o, &link_out).unwrap();
        assert_eq!(
            store.keep(&id(5), OWNER, &link_out, later()),
            Collected::default()
        );
    }

    #[test]
    fn a_1_gib_file_is_named_and_skipped_without_being_read() {
        let (_state, store) = store(ArtifactLimits::default());
        let out = tempfile::tempdir().unwrap();
        // Sparse: no gigabyte written to the test machine's disk.
        let big = File::create(out.path().join("huge.bin")).unwrap();
        big.set_len(1 << 30).unwrap();
        let started = std::time::Instant::now();
        let got = store.keep(&id(6), OWNER, out.path(), later());
        assert!(started.elapsed() < Duration::from_secs(2));
        assert_eq!(got.kept, []);
        assert_eq!(
            reasons(&got),
            [(
                "huge.bin".to_owned(),
                "larger than the 64 MiB limit per file".to_owned()
            )]
        );
        assert_eq!(store.used_bytes(), 0);
    }

    #[cfg(unix)]
    #[test]
    fn names_with_newlines_controls_or_bytes_not_utf8_are_skipped_and_shown_escaped() {
        use std::os::unix::ffi::OsStrExt;
        let (_state, store) = store(ArtifactLimits::default());
        let out = tempfile::tempdir().unwrap();
        let o = out.path();
        for raw in [
            &b"line\nbreak.txt"[..],
            b"esc\x1b[31m.txt",
            b"bad\xff\xfe.txt",
            b"back\\slash.txt",
            "rtl\u{202e}gnp.txt".as_bytes(),
        ] {
            std::fs::write(o.join(std::ffi::OsStr::from_bytes(raw)), "x").unwrap();
        }
        // Names that only look like paths leaving the folder are plain names inside it.
        for name in ["...", "..hidden", "%2e%2e%2fetc", "a b ü.txt"] {
            std::fs::write(o.join(name), "x").unwrap();
        }
        let got = store.keep(&id(7), OWNER, o, later());
        let kept: Vec<_> = got.kept.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(kept, ["%2e%2e%2fetc", "...", "..hidden", "a b ü.txt"]);
        let skipped: Vec<_> = got.skipped.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            skipped,
            [
                "back\\\\slash.txt",
                "bad\\xff\\xfe.txt",
                "esc\\u{1b}[31m.txt",
                "line\\nbreak.txt",
                "rtl\\u{202e}gnp.txt",
            ]
        );
        assert!(got.skipped.iter().all(|s| !s.name.contains('\n')));
        assert!(
            got.skipped[1].reason.contains("not UTF-8"),
            "{:?}",
            got.skipped
        );
        assert!(read_all(&store, OWNER, &id(7), "...") == b"x");
    }

    #[test]
    fn files_beyond_the_count_and_folders_beyond_the_depth_are_named_with_a_note() {
        let limits = ArtifactLimits {
            max_files: 2,
            max_depth: 1,
            ..ArtifactLimits::default()
        };
        let (_state, store) = store(limits);
        let out = tempfile::tempdir().unwrap();
        for n in 0..4 {
            std::fs::write(out.path().join(format!("f{n}.txt")), "x").unwrap();
        }
        std::fs::create_dir_all(out.path().join("d1/d2")).unwrap();
        let got = store.keep(&id(8), OWNER, out.path(), later());
        assert_eq!(got.kept.len(), 2);
        assert_eq!(
            reasons(&got),
            [
                (
                    "d1/d2".to_owned(),
                    "a folder more than 1 levels deep".to_owned()
                ),
                ("f2.txt".to_owned(), "more than 2 files".to_owned()),
                ("f3.txt".to_owned(), "more than 2 files".to_owned()),
            ]
        );
    }

    #[test]
    fn the_total_cap_drops_the_oldest_runs_first() {
        let limits = ArtifactLimits {
            max_total_bytes: 250,
            max_bytes_per_caller: 250,
            ..ArtifactLimits::default()
        };
        let (_state, store) = store(limits);
        let out = tempfile::tempdir().unwrap();
        std::fs::write(out.path().join("a.bin"), [7u8; 100]).unwrap();
        let (first, second, third) = (id(10), id(11), id(12));
        store.keep(&first, OWNER, out.path(), later());
        store.keep(&second, OWNER, out.path(), later());
        assert_eq!(store.used_bytes(), 200);
        // The third run's 100 bytes do not fit with both: the first run's files go.
        let got = store.keep(&third, OWNER, out.path(), later());
        assert_eq!(got.kept.len(), 1);
        assert!(matches!(
            store.read(OWNER, &first, "a.bin"),
            Err(ArtifactError::NotFound)
        ));
        assert_eq!(read_all(&store, OWNER, &second, "a.bin"), [7u8; 100]);
        assert_eq!(store.used_bytes(), 200);
        assert!(!store.dir.path().join(&first).exists());
        // A file larger than the whole storage is named, and nothing older is dropped for it.
        std::fs::write(out.path().join("a.bin"), [7u8; 300]).unwrap();
        let got = store.keep(&id(13), OWNER, out.path(), later());
        assert_eq!(
            reasons(&got),
            [(
                "a.bin".to_owned(),
                "no room in the artifact storage (its limit is 250 bytes, 250 bytes for one caller)"
                    .to_owned()
            )]
        );
        assert!(store.read(OWNER, &second, "a.bin").is_ok());
    }

    #[test]
    fn one_caller_never_drops_anothers_files_nor_fills_the_store_for_them() {
        let limits = ArtifactLimits {
            max_total_bytes: 400,
            max_bytes_per_caller: 200,
            ..ArtifactLimits::default()
        };
        let (_state, store) = store(limits);
        let out = tempfile::tempdir().unwrap();
        std::fs::write(out.path().join("a.bin"), [7u8; 100]).unwrap();
        let theirs = id(20);
        store.keep(&theirs, "victim", out.path(), later());
        // The other caller keeps going: past its share its own oldest files go, never the
        // victim's, and the victim still has room for a run of its own.
        for n in 21..27 {
            let got = store.keep(&id(n), "flooder", out.path(), later());
            assert_eq!(got.kept.len(), 1, "{got:?}");
        }
        assert_eq!(read_all(&store, "victim", &theirs, "a.bin"), [7u8; 100]);
        assert!(store.read("flooder", &id(21), "a.bin").is_err());
        assert!(store.read("flooder", &id(26), "a.bin").is_ok());
        let got = store.keep(&id(27), "victim", out.path(), later());
        assert_eq!(got.kept.len(), 1, "{got:?}");
        assert_eq!(read_all(&store, "victim", &theirs, "a.bin"), [7u8; 100]);
        assert_eq!(store.used_bytes(), 400);
        // The store full, the flooder's next run drops its own files, not the victim's.
        store.keep(&id(28), "flooder", out.path(), later());
        assert!(store.read("victim", &theirs, "a.bin").is_ok());
        assert!(store.read("victim", &id(27), "a.bin").is_ok());
    }

    #[test]
    fn forget_and_sweep_remove_a_runs_files() {
        let (_state, store) = store(ArtifactLimits::default());
        let out = tempfile::tempdir().unwrap();
        std::fs::write(out.path().join("a.txt"), "xyz").unwrap();
        let (a, b) = (id(20), id(21));
        store.keep(&a, OWNER, out.path(), later());
        store.keep(
            &b,
            OWNER,
            out.path(),
            SystemTime::now() + Duration::from_secs(1),
        );
        store.forget(&a);
        assert!(store.read(OWNER, &a, "a.txt").is_err());
        assert!(!store.dir.path().join(&a).exists());
        assert!(store.read(OWNER, &b, "a.txt").is_ok());
        store.sweep(SystemTime::now() + Duration::from_secs(2));
        assert!(!store.dir.path().join(&b).exists());
        assert_eq!(store.used_bytes(), 0);
    }

    #[test]
    fn a_new_server_starts_with_no_runs_and_removes_its_own_folder() {
        let state = tempfile::tempdir().unwrap();
        let dir = state.path().join("runs");
        let store = ArtifactStore::new(dir.clone(), ArtifactLimits::default()).unwrap();
        let own = store.dir.path().to_path_buf();
        assert!(own.starts_with(&dir));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{mode:o}");
        }
        drop(store);
        assert!(!own.exists());
        // A link where the folder should be is refused.
        #[cfg(unix)]
        {
            let link = state.path().join("link");
            std::os::unix::fs::symlink(state.path(), &link).unwrap();
            assert!(ArtifactStore::new(link, ArtifactLimits::default()).is_err());
        }
    }
}
