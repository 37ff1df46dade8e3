//! The server's bytecode cache: the compiled stdlib and site-packages that runs read (their
//! `PYTHONPYCACHEPREFIX`), so that no run reads or writes a `__pycache__` beside any source.
//!
//! Why: Python trusts a `.pyc` whose header matches its source's mtime and size. A script that
//! forges `__pycache__/x.cpython-311.pyc` next to a project module (keeping those two) has its
//! code run by every later run and by the user's own `python`. With a prefix set, Python looks for
//! bytecode only under the prefix; the cache lives outside the projects folder, belongs to the
//! server and is read-only to runs (a read-only bind at `/pycache` in a run's view on Linux, a
//! Landlock read rule without one). A prefix per run would be safe too, but every run would then
//! compile the stdlib it imports again: several times slower for a script with a few imports.
//!
//! Steps, in order:
//! 1. [`BytecodeCache::open`] (cheap, on the sandbox probe's thread): a private folder (0700,
//!    ours, not a symlink) per interpreter under the user's cache folder, else the temp folder,
//!    never inside the projects folder;
//! 2. [`BytecodeCache::fill_in_background`], once the sandbox is built: `compileall` of the
//!    interpreter's `sys.path` trees outside the projects folder, run with the cache as its
//!    prefix at idle priority; skipped when a stamp says the trees have not changed since the
//!    last fill, and by a second server while a first one holds the cache's lock.
//!
//! The cache mirrors absolute source paths (`<cache>/usr/lib/python3.11/json/__init__.cpython-
//! 311.pyc`); they are the same in a run's view, which binds the host's trees at their own paths.
//! Project modules are seen at `/projects/...` by runs and are never cached: they compile per run.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The folder under the user's cache folder that holds one cache per interpreter.
const CACHE_SUBDIR: &str = "pyrun-mcp/bytecode";
/// The fallback under the system temp folder (with the user's id on Unix: it is shared).
const TEMP_PREFIX: &str = "pyrun-bytecode";

/// Run by the interpreter with the cache as `PYTHONPYCACHEPREFIX`: `argv[1]` is the projects
/// folder, further arguments replace `sys.path` as the trees to compile (for tests). Prints one
/// word: `filled`, `unchanged`, `busy` (another server is filling), `incomplete` or
/// `unsupported` (no `sys.pycache_prefix`: Python < 3.8).
const FILL: &str = r#"
import compileall, os, re, sys
cache = getattr(sys, "pycache_prefix", None)
if not cache:
    print("unsupported")
    sys.exit(0)
projects = os.path.realpath(sys.argv[1])

def within(path, root):
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)

roots = []
for entry in sys.argv[2:] or sys.path:
    if not entry or not os.path.isabs(entry) or not os.path.isdir(entry):
        continue
    real = os.path.realpath(entry)
    # Project modules are never cached; a tree holding the projects folder is left whole.
    if within(real, projects) or within(projects, real) or within(real, cache):
        continue
    if entry not in roots:
        roots.append(entry)

try:
    import fcntl
    lock = open(os.path.join(cache, ".pyrun-lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        print("busy")
        sys.exit(0)
except ImportError:
    pass

def fingerprint():
    # Installing, upgrading or removing a package changes its tree's or its folder's mtime.
    lines = [sys.version, sys.executable]
    for root in roots:
        lines.append("%s %d" % (root, os.stat(root).st_mtime_ns))
        with os.scandir(root) as found:
            for e in sorted(found, key=lambda e: e.name):
                if e.is_dir(follow_symlinks=False):
                    lines.append("%s %d" % (e.path, e.stat(follow_symlinks=False).st_mtime_ns))
    return "\n".join(lines) + "\n"

stamp = os.path.join(cache, ".pyrun-filled")
want = fingerprint()
try:
    with open(stamp) as f:
        if f.read() == want:
            print("unchanged")
            sys.exit(0)
except OSError:
    pass

class SkipTests:
    # Test suites (the stdlib's alone is 800 files) are seldom imported by scripts; the pattern
    # is matched below the root, so a tree that lives in a `tests` folder is still compiled.
    pattern = re.compile(r"[\\/](test|tests|idle_test)[\\/]")
    def __init__(self, root):
        self.root = root
    def search(self, path):
        return self.pattern.search(path[len(self.root):])

ok = True
for root in roots:
    ok = compileall.compile_dir(root, quiet=2, rx=SkipTests(root), workers=1) and ok
if ok:
    with open(stamp + ".tmp", "w") as f:
        f.write(want)
    os.replace(stamp + ".tmp", stamp)
print("filled" if ok else "incomplete")
"#;

#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("the interpreter {path} cannot be read: {source}")]
    Interpreter {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("no private folder for the bytecode cache ({tried})\nhint: set XDG_CACHE_HOME (or HOME) to a folder of yours outside the projects folder")]
    NoFolder { tried: String },
    #[error("cannot fill the bytecode cache with {python}: {reason}")]
    Fill { python: PathBuf, reason: String },
}

/// Why one candidate folder was refused.
#[derive(Debug, thiserror::Error)]
enum PlaceError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("not a directory of ours (a symlink, or another user's)")]
    NotOurs,
    #[error("inside the projects folder, where runs write")]
    InsideProjects,
}

/// What a fill did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Compiled what was missing or stale; the stamp is written.
    Filled,
    /// The stamp matched: nothing changed since the last fill.
    Unchanged,
    /// Another process holds the cache's lock (a second server, filling).
    Busy,
    /// Some files did not compile (a syntax error, a full disk); retried at the next start.
    Incomplete,
    /// The interpreter has no `sys.pycache_prefix` (Python < 3.8): runs cannot use a cache.
    Unsupported,
}

/// A private folder of compiled modules for one interpreter. Cheap to clone.
#[derive(Debug, Clone)]
pub struct BytecodeCache {
    dir: PathBuf,
}

impl BytecodeCache {
    /// The cache of `python` (as configured: a venv's `bin/python` keeps its path) for a server
    /// of `projects` (canonical), made if missing: under the user's cache folder, else under the
    /// temp folder. Makes folders only; never starts the interpreter.
    pub fn open(python: &Path, projects: &Path) -> Result<Self, CacheError> {
        let mut bases: Vec<PathBuf> = user_cache_dir().into_iter().collect();
        bases.push(temp_base());
        Self::open_in(&bases, python, projects)
    }

    /// Like [`BytecodeCache::open`], trying the given base folders in order.
    pub fn open_in(bases: &[PathBuf], python: &Path, projects: &Path) -> Result<Self, CacheError> {
        let key = interpreter_key(python)?;
        let mut tried = Vec::new();
        for base in bases {
            match make_private(base, &key, projects) {
                Ok(dir) => return Ok(Self { dir }),
                Err(e) => tried.push(format!("{}: {e}", base.display())),
            }
        }
        Err(CacheError::NoFolder {
            tried: tried.join("; "),
        })
    }

    /// The cache's host path (canonical).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Compiles the interpreter's trees into the cache at the caller's priority (blocking;
    /// seconds the first time, one interpreter start when nothing changed).
    pub fn fill(&self, python: &Path, projects: &Path) -> Result<Fill, CacheError> {
        self.fill_trees(python, projects, &[], Priority::Caller)
    }

    /// [`BytecodeCache::fill`] on a thread of its own after `delay`, logging the outcome: the
    /// server's start-up and a client's opening requests never wait for it.
    pub fn fill_in_background(&self, python: PathBuf, projects: PathBuf, delay: Duration) {
        let cache = self.clone();
        let fill = move || {
            std::thread::sleep(delay);
            let started = Instant::now();
            match cache.fill_trees(&python, &projects, &[], Priority::Background) {
                Ok(Fill::Filled) => tracing::info!(
                    dir = %cache.dir.display(),
                    secs = started.elapsed().as_secs_f32(),
                    "bytecode cache filled"
                ),
                Ok(Fill::Unchanged | Fill::Busy) => {}
                Ok(Fill::Incomplete) => tracing::warn!(
                    dir = %cache.dir.display(),
                    "bytecode cache: some modules did not compile; runs compile them each time"
                ),
                Ok(Fill::Unsupported) => tracing::warn!(
                    "{} has no bytecode prefix (Python < 3.8): runs read __pycache__ beside \
                     their sources",
                    python.display()
                ),
                Err(e) if crate::helpers::closing() => {
                    tracing::debug!("bytecode fill ended by the shutdown: {e}")
                }
                Err(e) => tracing::warn!("{e}; runs compile the stdlib they import each time"),
            }
        };
        if let Err(e) = std::thread::Builder::new()
            .name("pyrun-pycache".into())
            .spawn(fill)
        {
            tracing::warn!("cannot start filling the bytecode cache: {e}");
        }
    }

    /// `trees` empty: the interpreter's own `sys.path`.
    fn fill_trees(
        &self,
        python: &Path,
        projects: &Path,
        trees: &[PathBuf],
        priority: Priority,
    ) -> Result<Fill, CacheError> {
        let fail = |reason: String| CacheError::Fill {
            python: python.to_path_buf(),
            reason,
        };
        let mut cmd = Command::new(python);
        // `-s`: no user site of the server's HOME (runs have their scratch as HOME). No `-I`: it
        // would ignore PYTHONPYCACHEPREFIX. The cache as the working folder: `-c` puts it first
        // on `sys.path`, where nothing of a run's can be imported.
        cmd.args(["-s", "-c", FILL])
            .arg(projects)
            .args(trees)
            .env_clear()
            .env("PYTHONPYCACHEPREFIX", &self.dir)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if priority == Priority::Background {
            pyrun_sandbox::os::background_priority(&mut cmd);
        }
        let output = crate::helpers::output(&mut cmd).map_err(|e| fail(e.to_string()))?;
        let said = String::from_utf8_lossy(&output.stdout);
        match said.trim() {
            _ if !output.status.success() => Err(fail(format!(
                "{}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ))),
            "filled" => Ok(Fill::Filled),
            "unchanged" => Ok(Fill::Unchanged),
            "busy" => Ok(Fill::Busy),
            "incomplete" => Ok(Fill::Incomplete),
            "unsupported" => Ok(Fill::Unsupported),
            other => Err(fail(format!("unexpected answer {other:?}"))),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Priority {
    /// Yields the CPU to everything else: a server's fill.
    Background,
    /// As the calling thread (a test, or a tool that fills the cache on purpose).
    Caller,
}

/// The user's cache folder: `$XDG_CACHE_HOME` or `~/.cache` (Unix), `~/Library/Caches` (macOS),
/// `%LOCALAPPDATA%` (Windows); then [`CACHE_SUBDIR`].
fn user_cache_dir() -> Option<PathBuf> {
    let absolute = |var: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let base = if cfg!(windows) {
        absolute("LOCALAPPDATA")
    } else if cfg!(target_os = "macos") {
        absolute("HOME").map(|home| home.join("Library/Caches"))
    } else {
        absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|home| home.join(".cache")))
    }?;
    Some(base.join(CACHE_SUBDIR))
}

/// `<temp>/pyrun-bytecode-<uid>`: the temp folder is shared, so the name carries who owns it
/// (and [`make_private`] refuses it when someone else made it first).
fn temp_base() -> PathBuf {
    #[cfg(unix)]
    let name = format!("{TEMP_PREFIX}-{}", rustix::process::geteuid().as_raw());
    #[cfg(not(unix))]
    let name = TEMP_PREFIX.to_owned();
    std::env::temp_dir().join(name)
}

/// `base/key`, made owner-only where missing, checked to be ours and private (each folder from
/// `base` down), canonical, and outside `projects`.
fn make_private(base: &Path, key: &str, projects: &Path) -> Result<PathBuf, PlaceError> {
    let projects = dunce::canonicalize(projects).unwrap_or_else(|_| projects.to_path_buf());
    let dir = base.join(key);
    // Checked before making anything (no stray folders in the projects folder), and again on
    // the real path once made.
    if resolved(&dir).starts_with(&projects) {
        return Err(PlaceError::InsideProjects);
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(&dir)?;
    for folder in [base, dir.as_path()] {
        ours_and_private(folder)?;
    }
    let dir = dunce::canonicalize(&dir)?;
    if dir.starts_with(&projects) {
        return Err(PlaceError::InsideProjects);
    }
    Ok(dir)
}

/// `path` with its nearest existing ancestor made canonical (the rest as written).
fn resolved(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut at = path;
    loop {
        if let Ok(real) = dunce::canonicalize(at) {
            return missing.iter().rev().fold(real, |p, part| p.join(part));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name);
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// A real directory (not a symlink) owned by this user, left (or made) owner-only.
fn ours_and_private(dir: &Path) -> Result<(), PlaceError> {
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(PlaceError::NotOurs);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        if meta.uid() != rustix::process::geteuid().as_raw() {
            return Err(PlaceError::NotOurs);
        }
        if meta.mode() & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    Ok(())
}

/// The cache's name for `python`: its file name (for people) and a hash of its path as
/// configured, its real path, and the real file's size and modification time, which stand in
/// for its version (an upgrade replaces the file) without starting it.
fn interpreter_key(python: &Path) -> Result<String, CacheError> {
    let unreadable = |source| CacheError::Interpreter {
        path: python.to_path_buf(),
        source,
    };
    let real = dunce::canonicalize(python).map_err(unreadable)?;
    let meta = std::fs::metadata(&real).map_err(unreadable)?;
    let modified = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .unwrap_or_default();
    let mut hash = Fnv::default();
    hash.write(python.as_os_str().as_encoded_bytes());
    hash.write(&[0]);
    hash.write(real.as_os_str().as_encoded_bytes());
    hash.write(&meta.len().to_le_bytes());
    hash.write(&modified.as_nanos().to_le_bytes());
    let name: String = real
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .take(32)
        .collect();
    Ok(format!("{name}-{:016x}", hash.0))
}

/// FNV-1a, 64 bits: a name that stays the same across Rust releases (std's hasher may not).
pub(crate) struct Fnv(pub(crate) u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python() -> PathBuf {
        crate::python_env::resolve_python(None).expect("python3 must be installed for these tests")
    }

    #[test]
    fn the_cache_is_private_per_interpreter_and_never_in_the_projects_folder() {
        let home = tempfile::tempdir().unwrap();
        let projects = tempfile::tempdir().unwrap();
        let base = home.path().join("cache");
        let cache = BytecodeCache::open_in(
            &[projects.path().join("inner"), base.clone()],
            &python(),
            projects.path(),
        )
        .unwrap();
        assert!(cache.dir().starts_with(dunce::canonicalize(&base).unwrap()));
        assert!(
            !projects.path().join("inner").exists(),
            "a folder was made in the projects folder"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(cache.dir()).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700);
        }
        // The same interpreter finds the same cache; another one gets its own.
        let again = BytecodeCache::open_in(std::slice::from_ref(&base), &python(), projects.path())
            .unwrap();
        assert_eq!(again.dir(), cache.dir());
        let other_python = home.path().join("python3");
        std::fs::write(&other_python, "not an interpreter").unwrap();
        let other = BytecodeCache::open_in(&[base], &other_python, projects.path()).unwrap();
        assert_ne!(other.dir(), cache.dir());
        // Only a place inside the projects folder: refused.
        let err =
            BytecodeCache::open_in(&[projects.path().join("only")], &python(), projects.path())
                .unwrap_err();
        assert!(
            err.to_string().contains("inside the projects folder"),
            "{err}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_or_open_cache_folder_is_refused_or_made_private() {
        use std::os::unix::fs::PermissionsExt;
        let temp = tempfile::tempdir().unwrap();
        let projects = tempfile::tempdir().unwrap();
        let elsewhere = temp.path().join("elsewhere");
        std::fs::create_dir(&elsewhere).unwrap();
        let link = temp.path().join("link");
        std::os::unix::fs::symlink(&elsewhere, &link).unwrap();
        let err = BytecodeCache::open_in(&[link], &python(), projects.path()).unwrap_err();
        assert!(err.to_string().contains("not a directory of ours"), "{err}");

        let open = temp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        BytecodeCache::open_in(std::slice::from_ref(&open), &python(), projects.path()).unwrap();
        let mode = std::fs::metadata(&open).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }

    /// Runs `code` with the cache as prefix and returns its stdout.
    fn run_with_prefix(python: &Path, prefix: &Path, cwd: &Path, code: &str) -> String {
        let out = Command::new(python)
            .args(["-s", "-c", code])
            .env_clear()
            .env("PYTHONPYCACHEPREFIX", prefix)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir(cwd)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[test]
    fn a_fill_compiles_trees_outside_the_projects_folder_once_and_python_reads_them() {
        let python = python();
        let home = tempfile::tempdir().unwrap();
        let projects = tempfile::tempdir().unwrap();
        let lib = tempfile::tempdir().unwrap();
        let lib = dunce::canonicalize(lib.path()).unwrap();
        std::fs::create_dir_all(lib.join("pkg/tests")).unwrap();
        std::fs::write(lib.join("pkg/__init__.py"), "VALUE = 'lib'\n").unwrap();
        std::fs::write(lib.join("pkg/tests/test_x.py"), "X = 1\n").unwrap();
        std::fs::write(projects.path().join("mine.py"), "Y = 2\n").unwrap();
        let cache =
            BytecodeCache::open_in(&[home.path().to_path_buf()], &python, projects.path()).unwrap();
        let trees = [lib.clone(), projects.path().to_path_buf()];

        assert_eq!(
            cache
                .fill_trees(&python, projects.path(), &trees, Priority::Caller)
                .unwrap(),
            Fill::Filled
        );
        let tag = run_with_prefix(
            &python,
            cache.dir(),
            home.path(),
            "import sys; print(sys.implementation.cache_tag)",
        );
        let compiled = |source: &Path| {
            let rel = source.with_extension(format!("{}.pyc", tag.trim()));
            cache.dir().join(rel.strip_prefix("/").unwrap_or(&rel))
        };
        assert!(compiled(&lib.join("pkg/__init__.py")).is_file());
        assert!(
            !compiled(&lib.join("pkg/tests/test_x.py")).exists(),
            "a test suite was compiled"
        );
        let projects_real = dunce::canonicalize(projects.path()).unwrap();
        assert!(
            !compiled(&projects_real.join("mine.py")).exists(),
            "a project module was cached"
        );
        assert!(
            !lib.join("pkg/__pycache__").exists(),
            "wrote beside the sources"
        );

        // Python loads the module from the cache (`-v` says which bytecode matched its source).
        let out = Command::new(&python)
            .args(["-s", "-v", "-c", "import pkg"])
            .env_clear()
            .env("PYTHONPATH", &lib)
            .env("PYTHONPYCACHEPREFIX", cache.dir())
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .current_dir(home.path())
            .output()
            .unwrap();
        let verbose = String::from_utf8_lossy(&out.stderr);
        let cached = compiled(&lib.join("pkg/__init__.py"));
        assert!(
            verbose.contains(&format!("# {} matches", cached.display())),
            "{verbose}"
        );

        // Nothing changed: the stamp says so. A new module: compiled at the next fill.
        assert_eq!(
            cache
                .fill_trees(&python, projects.path(), &trees, Priority::Caller)
                .unwrap(),
            Fill::Unchanged
        );
        std::fs::create_dir(lib.join("newpkg")).unwrap();
        std::fs::write(lib.join("newpkg/__init__.py"), "Z = 3\n").unwrap();
        assert_eq!(
            cache
                .fill_trees(&python, projects.path(), &trees, Priority::Caller)
                .unwrap(),
            Fill::Filled
        );
        assert!(compiled(&lib.join("newpkg/__init__.py")).is_file());
    }

    #[cfg(unix)]
    #[test]
    fn a_second_filler_leaves_while_the_first_holds_the_lock() {
        let python = python();
        let home = tempfile::tempdir().unwrap();
        let projects = tempfile::tempdir().unwrap();
        let lib = tempfile::tempdir().unwrap();
        let cache =
            BytecodeCache::open_in(&[home.path().to_path_buf()], &python, projects.path()).unwrap();
        let hold = format!(
            "import fcntl, sys, time; f = open({:?}, 'w'); fcntl.flock(f, fcntl.LOCK_EX); \
             print('held', flush=True); time.sleep(30)",
            cache.dir().join(".pyrun-lock").display().to_string()
        );
        let mut holder = Command::new(&python)
            .args(["-c", &hold])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        io::BufRead::read_line(
            &mut io::BufReader::new(holder.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line, "held\n");
        let got = cache.fill_trees(
            &python,
            projects.path(),
            &[lib.path().to_path_buf()],
            Priority::Background,
        );
        let _ = holder.kill();
        let _ = holder.wait();
        assert_eq!(got.unwrap(), Fill::Busy);
    }
}
