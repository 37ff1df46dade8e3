//! Bytecode for venvs: the server's bytecode cache ([`crate::bytecode_cache`]) extended to the
//! site-packages of every venv a run uses, so that a run of a numpy+pandas venv loads compiled
//! modules instead of compiling them all again each time.
//!
//! Runs read bytecode only under their `PYTHONPYCACHEPREFIX` (the cache, read-only at `/pycache`
//! in their view), where Python looks for a source's `.pyc` at the prefix followed by the
//! source's path *as the run sees it* (`/projects/app/.venv/lib/...`). So a venv's entries live
//! under `<cache>/<the venv's view path>/`, one stamp (`.pyrun-venv`) at their top.
//!
//! How, in order:
//! 1. [`VenvBytecode::touch`] (on the run's path, each run of a venv): hands the venv to one
//!    background thread at idle priority, and returns;
//! 2. the thread takes a fingerprint of the venv (its `pyvenv.cfg`, each site-packages folder
//!    and the folders in it: installing, upgrading or removing a package changes one of them) and
//!    stops there when the stamp holds the same;
//! 3. otherwise it starts the venv's (checked) base interpreter with `-I -S` (no `.pth`, no
//!    `sitecustomize`, no environment) in an install-profile sandbox that shows the venv
//!    read-only and the venv's cache folder writable, nothing of the projects folder besides:
//!    `py_compile` of each source whose cached `.pyc` does not match its mtime and size
//!    (supervised as every child of the run layer: `supervise`, on the thread's own runtime,
//!    killed with its tree past `COMPILE_TIMEOUT`). Nothing
//!    found in the folder is trusted: a venv's own `__pycache__` is never read, only sources;
//! 4. then it writes the stamp. Before each fingerprint, the caches of venvs whose `pyvenv.cfg` is
//!    gone are removed.
//!
//! A run cannot write what another run reads: the cache is read-only in every run's view, and
//! only the compile step (confined, writing that one venv's folder of it) writes it. A source
//! that is a link to a file outside the venv is not compiled: the compile step would not see it.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use pyrun_sandbox::{Grant, ResourceLimits, Sandbox, SandboxMode};

use tokio_util::sync::CancellationToken;

use super::bytecode_cache::Fnv;
use super::child::AsyncChild;
use super::live_output::{LiveOutput, Stream};
use super::python_env::{python_read_paths, PythonEnv};
use super::supervise::{Ending, Limits, Process, Sink};

/// The stamp at the top of a venv's cache: the fingerprint, then the venv's host folder.
const STAMP: &str = ".pyrun-venv";
/// At the top of the cache's projects folder: the host projects folder its venvs belong to.
const OWNER: &str = ".pyrun-owner";
/// A compile that takes longer is stopped (a huge venv on a loaded machine: the rest compiles
/// at the next fill, skipping what is done).
const COMPILE_TIMEOUT: Duration = Duration::from_secs(600);
/// The compile step's output kept per stream (it prints two numbers; its errors are logged).
const COMPILE_OUTPUT: usize = 64 * 1024;
/// A venv's runs within this long of its last look are not looked at again.
const LOOK_AGAIN: Duration = Duration::from_secs(2);
/// Venvs remembered at most (their last look and fingerprint).
const REMEMBERED: usize = 256;
/// How deep the sweep looks for venv caches below the cache's projects folder.
const SWEEP_DEPTH: usize = 16;

/// Run by the venv's base interpreter, `-I -S`: `argv[1]` the venv on the host, `argv[2]` the
/// venv as runs see it, `argv[3]` the venv's folder of the cache, then its site-packages folders
/// (host). Prints `<compiled> <failed>`.
const COMPILE: &str = r#"
import os, py_compile, re, stat, sys
from importlib.util import MAGIC_NUMBER
venv, view, out = sys.argv[1:4]
tag = sys.implementation.cache_tag
# Test suites (pandas' alone is 1500 files) are seldom imported by scripts.
skip = re.compile(r"(^|/)(test|tests|idle_test|__pycache__)$")
compiled = failed = 0

def fresh(cfile, st):
    try:
        with open(cfile, "rb") as f:
            head = f.read(16)
    except OSError:
        return False
    return (len(head) == 16 and head[:4] == MAGIC_NUMBER
            and int.from_bytes(head[4:8], "little") == 0
            and int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF)

for site in sys.argv[4:]:
    for root, dirs, files in os.walk(site):
        rel = os.path.relpath(root, venv)
        dirs[:] = [d for d in dirs if not skip.search(d)]
        for name in files:
            if not name.endswith(".py"):
                continue
            src = os.path.join(root, name)
            try:
                st = os.lstat(src)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            cfile = os.path.join(out, rel, name[:-3] + "." + tag + ".pyc")
            if fresh(cfile, st):
                continue
            try:
                py_compile.compile(src, cfile=cfile, dfile=os.path.join(view, rel, name),
                                   doraise=True,
                                   invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
                compiled += 1
            except Exception:
                failed += 1
print(compiled, failed)
"#;

/// One venv a run used, as the thread needs it.
#[derive(Debug)]
struct Job {
    /// The checked base interpreter (its trees are what the compile step reads besides the venv).
    interpreter: PathBuf,
    /// The venv on the host, canonical.
    venv: PathBuf,
    /// The venv as runs see it.
    view: PathBuf,
    site_packages: Vec<PathBuf>,
    /// The cache's host folder.
    cache: PathBuf,
    /// The projects folder on the host and as runs see it (where its venvs' caches are).
    projects: Option<(PathBuf, PathBuf)>,
    mode: SandboxMode,
}

/// Compiles the venvs runs use into the server's cache, in the background. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct VenvBytecode {
    queue: Arc<OnceLock<Mutex<Sender<Job>>>>,
}

/// What the thread keeps: one compile sandbox per interpreter, the fingerprints seen.
#[derive(Default)]
struct Worker {
    sandboxes: HashMap<PathBuf, Arc<Sandbox>>,
    seen: HashMap<PathBuf, u64>,
    /// When each venv was last looked at.
    looked: HashMap<PathBuf, Instant>,
    /// The venvs' folder this server owns, once checked.
    owner_checked: Option<PathBuf>,
    /// Said once: another server owns it.
    refused: bool,
    /// This thread's runtime, for the compile step's supervision (`supervise`): made on the
    /// first compile, on this idle-priority thread.
    runtime: Option<tokio::runtime::Runtime>,
}

impl VenvBytecode {
    /// Hands the venv of `env` (when it has one, and `sandbox` a cache) to the background
    /// thread; returns at once.
    pub fn touch(&self, env: &PythonEnv, sandbox: &Sandbox) {
        let (Some(venv), Some(cache)) = (&env.venv, sandbox.pycache_dir()) else {
            return;
        };
        let job = Job {
            interpreter: env.interpreter.clone(),
            venv: venv.dir.clone(),
            view: sandbox.view_path(&venv.dir),
            site_packages: venv.site_packages.clone(),
            cache: cache.to_path_buf(),
            projects: sandbox
                .projects_dir()
                .map(|p| (p.to_path_buf(), sandbox.view_path(p))),
            mode: sandbox.mode(),
        };
        let queue = self.queue.get_or_init(|| Mutex::new(start_thread()));
        let sent = queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .send(job);
        if sent.is_err() {
            tracing::warn!("venv bytecode: the compile thread is gone; venvs compile per run");
        }
    }
}

fn start_thread() -> Sender<Job> {
    let (tx, rx) = mpsc::channel();
    let started = std::thread::Builder::new()
        .name("pyrun-venv-pyc".into())
        .spawn(move || {
            pyrun_sandbox::os::idle_thread_priority();
            serve(&rx);
        });
    if let Err(e) = started {
        tracing::warn!("cannot start compiling venvs: {e}");
    }
    tx
}

fn serve(rx: &Receiver<Job>) {
    let mut worker = Worker::default();
    while let Ok(first) = rx.recv() {
        // A burst of runs sends the same venv many times: each once.
        let mut jobs = vec![first];
        jobs.extend(rx.try_iter());
        let mut latest: Vec<Job> = Vec::new();
        for job in jobs {
            latest.retain(|j| j.venv != job.venv);
            latest.push(job);
        }
        for job in latest {
            worker.handle(&job);
        }
    }
}

impl Worker {
    fn handle(&mut self, job: &Job) {
        let Some((projects, projects_view)) = &job.projects else {
            return;
        };
        let root = cache_folder(&job.cache, projects_view);
        if !self.owns(&root, projects) {
            return;
        }
        // Runs in a row need no second look: a change shows at the next look a moment later.
        let now = Instant::now();
        if let Some(last) = self.looked.get(&job.venv) {
            if now.duration_since(*last) < LOOK_AGAIN {
                return;
            }
        }
        // Runs can make many venvs: what is remembered of them starts over beyond a bound.
        if self.looked.len() >= REMEMBERED {
            self.looked.clear();
            self.seen.clear();
        }
        self.looked.insert(job.venv.clone(), now);
        sweep(&root, &mut self.seen);
        let Some(print) = fingerprint(job) else {
            return;
        };
        if self.seen.get(&job.venv) == Some(&print) {
            return;
        }
        let out = cache_folder(&job.cache, &job.view);
        let stamp = out.join(STAMP);
        if read_stamp(&stamp).map(|(p, _)| p) == Some(print) {
            self.seen.insert(job.venv.clone(), print);
            return;
        }
        let started = Instant::now();
        match self.compile(job, &out) {
            Ok((compiled, failed)) => {
                tracing::info!(
                    venv = %job.view.display(),
                    compiled,
                    failed,
                    secs = started.elapsed().as_secs_f32(),
                    "venv bytecode cached"
                );
                let text = format!("{print:016x}\n{}\n", job.venv.display());
                if write_stamp(&stamp, &text).is_ok() {
                    self.seen.insert(job.venv.clone(), print);
                }
            }
            Err(e) => tracing::warn!(
                venv = %job.view.display(),
                "venv bytecode: {e}; its runs compile its packages each time"
            ),
        }
    }

    /// Whether this server's projects folder owns `root`, the cache's folder of venvs (claimed
    /// when free, or when its owner's projects folder is gone). Every server's runs see their
    /// folder at `/projects`, so two servers of one interpreter would name different venvs alike:
    /// the second one's venvs go uncached (compiled per run, as before) rather than mixed.
    fn owns(&mut self, root: &Path, projects: &Path) -> bool {
        if self.owner_checked.as_deref() == Some(root) {
            return true;
        }
        let owner_file = root.join(OWNER);
        let owner = std::fs::read_to_string(&owner_file).ok();
        let ours = projects.display().to_string();
        let claimed = match owner.as_deref().map(str::trim_end) {
            Some(owner) if owner == ours => Ok(()),
            Some(owner) if Path::new(owner).exists() => {
                if !self.refused {
                    tracing::info!(
                        "venv bytecode: the cache's venvs belong to another server's projects \
                         folder; this server's venvs compile per run"
                    );
                    self.refused = true;
                }
                return false;
            }
            _ => claim(root, &owner_file, &ours),
        };
        match claimed {
            Ok(()) => {
                self.owner_checked = Some(root.to_path_buf());
                true
            }
            Err(e) => {
                tracing::warn!("venv bytecode: cannot claim {}: {e}", root.display());
                false
            }
        }
    }

    /// Step 3 of the module's doc: `(compiled, failed)`.
    fn compile(&mut self, job: &Job, out: &Path) -> Result<(u64, u64), String> {
        make_folders(&job.cache, out).map_err(|e| format!("cannot make {}: {e}", out.display()))?;
        let sandbox = self.sandbox(job)?;
        let scratch = tempfile::Builder::new()
            .prefix("pyrun-venv-pyc")
            .tempdir()
            .map_err(|e| format!("no scratch: {e}"))?;
        let grants = [
            Grant {
                at: job.venv.clone(),
                held: None,
                writable: false,
            },
            Grant::writable(out),
        ];
        let slot = sandbox
            .slot_granting(scratch.path(), &grants)
            .map_err(|e| e.to_string())?;
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "-I".as_ref(),
            "-S".as_ref(),
            "-c".as_ref(),
            COMPILE.as_ref(),
            job.venv.as_os_str(),
            job.view.as_os_str(),
            out.as_os_str(),
        ];
        args.extend(job.site_packages.iter().map(|p| p.as_os_str()));
        let spec = pyrun_sandbox::spawn::Spec {
            program: &job.interpreter,
            argv0: None,
            args,
            env: vec![
                ("HOME".as_ref(), scratch.path().as_os_str()),
                ("TMPDIR".as_ref(), scratch.path().as_os_str()),
            ],
            cwd: scratch.path(),
            stdin_piped: false,
        };
        let child = sandbox
            .spawn(&slot, &spec, scratch.path())
            .map_err(|e| e.to_string())?;
        let (status, stdout, stderr) = self.supervise(child)?;
        let mut counts = stdout.split_whitespace().map(str::parse::<u64>);
        match (status.success(), counts.next(), counts.next()) {
            (true, Some(Ok(compiled)), Some(Ok(failed))) => Ok((compiled, failed)),
            _ => Err(format!(
                "the compile step failed ({status}): {}",
                stderr.trim()
            )),
        }
    }

    /// Waits for the compile step (on the thread's runtime) within [`COMPILE_TIMEOUT`], its tree
    /// killed at its end: its exit status, stdout and stderr (each capped).
    fn supervise(
        &mut self,
        child: pyrun_sandbox::spawn::Child,
    ) -> Result<(std::process::ExitStatus, String, String), String> {
        let output = Arc::new(LiveOutput::new(COMPILE_OUTPUT));
        let never = CancellationToken::new();
        let supervised = self.runtime()?.block_on(async {
            let child = AsyncChild::new(child).map_err(|e| e.to_string())?;
            let limits = Limits {
                deadline: tokio::time::Instant::now() + COMPILE_TIMEOUT,
                cancel: &never,
                shutdown: &never,
            };
            let supervised = Process::new(child)
                .supervise(Sink::Apart(&output), limits)
                .await;
            Ok::<_, String>(supervised)
        })?;
        match supervised.ending {
            Ending::Exited(Some(status)) => Ok((
                status,
                output.take_text(Stream::Stdout).0,
                output.take_text(Stream::Stderr).0,
            )),
            Ending::Exited(None) => Err("the compile step could not be waited for".to_string()),
            Ending::TimedOut | Ending::Cancelled => {
                Err("the compile step took too long".to_string())
            }
        }
    }

    /// The thread's own runtime (made once), on which each compile step is supervised.
    fn runtime(&mut self) -> Result<&tokio::runtime::Runtime, String> {
        if self.runtime.is_none() {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_io()
                .enable_time()
                .build()
                .map_err(|e| format!("no runtime: {e}"))?;
            self.runtime = Some(runtime);
        }
        self.runtime
            .as_ref()
            .ok_or_else(|| "no runtime".to_string())
    }

    /// The install profile for `job`'s interpreter: its trees readable, no network, nothing of
    /// the projects folder but the grants of each compile.
    fn sandbox(&mut self, job: &Job) -> Result<Arc<Sandbox>, String> {
        if let Some(sandbox) = self.sandboxes.get(&job.interpreter) {
            return Ok(sandbox.clone());
        }
        let read_paths = python_read_paths(&job.interpreter).map_err(|e| e.to_string())?;
        let sandbox = Sandbox::new(pyrun_sandbox::SandboxPolicy {
            read_paths,
            write_paths: Vec::new(),
            allow_network: false,
            limits: ResourceLimits {
                cpu_secs: COMPILE_TIMEOUT.as_secs(),
                ..ResourceLimits::default()
            },
            tcp_connect_ports: None,
            ..pyrun_sandbox::SandboxPolicy::bare(job.mode)
        })
        .map_err(|e| e.to_string())?;
        let sandbox = Arc::new(sandbox);
        self.sandboxes
            .insert(job.interpreter.clone(), sandbox.clone());
        Ok(sandbox)
    }
}

/// Makes `root` anew (the venv caches of a gone projects folder go) as `owner`'s.
fn claim(root: &Path, owner_file: &Path, owner: &str) -> io::Result<()> {
    match std::fs::remove_dir_all(root) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(root)?;
    write_stamp(owner_file, &format!("{owner}\n"))
}

/// `<cache>/<view without its root>`.
fn cache_folder(cache: &Path, view: &Path) -> PathBuf {
    let relative: PathBuf = view
        .components()
        .filter(|c| matches!(c, std::path::Component::Normal(_)))
        .collect();
    cache.join(relative)
}

/// `out` and the folders between it and `cache`, owner-only.
fn make_folders(cache: &Path, out: &Path) -> io::Result<()> {
    if !out.starts_with(cache) {
        return Err(io::Error::other("outside the cache"));
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(out)
}

/// Step 2 of the module's doc: `None` when the venv cannot be read (gone since its check).
fn fingerprint(job: &Job) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let mut hash = Fnv::default();
    let mut add = |path: &Path, meta: &std::fs::Metadata| {
        hash.write(path.as_os_str().as_encoded_bytes());
        hash.write(&meta.ino().to_le_bytes());
        hash.write(&meta.len().to_le_bytes());
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .unwrap_or_default();
        hash.write(&modified.as_nanos().to_le_bytes());
    };
    let cfg = job.venv.join("pyvenv.cfg");
    add(&cfg, &std::fs::symlink_metadata(&cfg).ok()?);
    add(&job.interpreter, &std::fs::metadata(&job.interpreter).ok()?);
    for site in &job.site_packages {
        add(site, &std::fs::symlink_metadata(site).ok()?);
        let mut entries: Vec<_> = std::fs::read_dir(site)
            .ok()?
            .filter_map(Result::ok)
            .collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            if let Ok(meta) = std::fs::symlink_metadata(entry.path()) {
                if meta.is_dir() {
                    add(&entry.path(), &meta);
                }
            }
        }
    }
    Some(hash.0)
}

/// The fingerprint and host venv a stamp holds.
fn read_stamp(stamp: &Path) -> Option<(u64, PathBuf)> {
    let text = std::fs::read_to_string(stamp).ok()?;
    let mut lines = text.lines();
    let print = u64::from_str_radix(lines.next()?, 16).ok()?;
    Some((print, PathBuf::from(lines.next()?)))
}

fn write_stamp(stamp: &Path, text: &str) -> io::Result<()> {
    let temp = stamp.with_extension("tmp");
    std::fs::write(&temp, text)?;
    std::fs::rename(&temp, stamp)
}

/// Step 4 of the module's doc: removes, below `root`, the cache of each venv whose
/// `pyvenv.cfg` is gone, and forgets it.
fn sweep(root: &Path, seen: &mut HashMap<PathBuf, u64>) {
    let mut stack = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        if let Some((_, venv)) = read_stamp(&dir.join(STAMP)) {
            if std::fs::symlink_metadata(venv.join("pyvenv.cfg")).is_err() {
                match std::fs::remove_dir_all(&dir) {
                    Ok(()) => {
                        tracing::info!(dir = %dir.display(), "venv bytecode of a gone venv removed")
                    }
                    Err(e) => {
                        tracing::warn!(dir = %dir.display(), "venv bytecode: cannot remove: {e}")
                    }
                }
                seen.remove(&venv);
            }
            continue;
        }
        if depth >= SWEEP_DEPTH {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.filter_map(Result::ok) {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push((entry.path(), depth + 1));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_venvs_cache_folder_is_its_view_path_under_the_cache() {
        assert_eq!(
            cache_folder(Path::new("/c/x"), Path::new("/projects/app/.venv")),
            PathBuf::from("/c/x/projects/app/.venv")
        );
    }

    #[test]
    fn the_sweep_removes_the_caches_of_gone_venvs_only() {
        let temp = tempfile::tempdir().unwrap();
        let cache = temp.path().join("cache/projects");
        let (kept, gone) = (temp.path().join("kept"), temp.path().join("gone"));
        std::fs::create_dir_all(&kept).unwrap();
        std::fs::write(kept.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        for (name, venv) in [("a/.venv", &kept), ("b/.venv", &gone)] {
            std::fs::create_dir_all(cache.join(name).join("lib")).unwrap();
            let text = format!("{:016x}\n{}\n", 1, venv.display());
            std::fs::write(cache.join(name).join(STAMP), text).unwrap();
        }
        sweep(&cache, &mut HashMap::new());
        assert!(cache.join("a/.venv/lib").is_dir());
        assert!(!cache.join("b/.venv").exists());
    }
}
