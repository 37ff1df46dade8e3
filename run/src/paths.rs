//! Path containment: the only constructor of [`ProjectPath`], a Python file proven to lie inside the
//! projects folder.
//!
//! Containment is judged on the resolved path, component by component, never by string prefix. We
//! resolve symlinks ourselves, hop by hop, so that a symlink pointing out of the folder is reported as
//! "outside" whether or not its target exists: the answer never tells a caller what exists outside.
//! The final answer is then confirmed with the OS's own canonicalization.
//!
//! A caller names a file relative to the folder (`mathpkg/main.py`) or by its neutral absolute
//! form ([`RUN_PROJECTS_DIR`]`/mathpkg/main.py`). Any other absolute path, and any relative one
//! whose `..` climbs out of the folder, gets one and the same refusal ([`PathError::Outside`])
//! before anything is looked up, even when it leads back into the folder: an answer that differed
//! for the folder's own host path would let a caller guess where the folder lives.
//!
//! The same proof serves any file to clients as a resource ([`ProjectRoot::resolve_file`], the only
//! constructor of [`ProjectFile`]), except what is never served: hidden names (`.git`, `.venv`,
//! `.env*`, every other dot-name), `__pycache__` and `venv` (see [`is_served_name`]), whether named
//! on the way in or reached through a link. [`ProjectRoot::read_file`] reopens the proven path
//! without following any link, so a link swapped in after the proof is refused, not followed.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

/// Where runs see the projects folder (`/projects`): the sandbox mounts it there, so callers may
/// also name files as `/projects/<path>`, the same as `<path>` relative to the folder. One
/// constant for both: the sandbox's own.
pub use pyrun_sandbox::RUN_PROJECTS_DIR;
/// Longest path a caller may give, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;
/// Symlink hops followed before giving up (Linux's own limit is 40).
const MAX_LINK_HOPS: usize = 40;
/// Entries visited at most by one listing, so a huge tree cannot stall the server.
const MAX_LISTED_ENTRIES: usize = 20_000;
/// Directory depth followed at most by one listing.
const MAX_LIST_DEPTH: usize = 16;
/// Names never listed nor served as resources, besides every hidden (dot) name: the bytecode
/// folders and a virtual environment without a dot. Hidden names cover the sandbox's protected
/// names (`.git`, `.hg`, `.svn`, `.venv`, `.envrc`, `.vscode`, `.idea`, `.env*`).
const NEVER_SERVED: &[&str] = &["__pycache__", "venv"];

/// Why a path was refused. Messages name the path as the caller gave it, never a host path.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PathError {
    #[error("the file name is empty")]
    Empty,
    #[error("the path contains a NUL byte")]
    NulByte,
    #[error("the path is longer than {MAX_PATH_BYTES} bytes")]
    TooLong,
    /// Also the one answer to a host path (or a `..` climb out) that leads nowhere usable.
    #[error("'{0}' is outside the projects folder")]
    Outside(String),
    #[error("'{0}' was not found in the projects folder")]
    NotFound(String),
    #[error("'{0}' is a directory, not a Python file")]
    Directory(String),
    #[error("'{0}' is not a regular file")]
    NotRegularFile(String),
    #[error("'{0}' is not a Python file (only .py files run)")]
    NotPython(String),
    #[error("'{0}' has too many levels of symbolic links")]
    TooManyLinks(String),
    #[error("'{0}' could not be read")]
    Unreadable(String),
    #[error("the projects folder {0}")]
    BadRoot(String),
    /// A hidden or protected name (see [`is_served_name`]) on the way to a file to serve.
    #[error("'{0}' is hidden or protected and is never served")]
    NotServed(String),
}

/// Whether a file or folder name may be listed and served as a resource: no hidden (dot) names,
/// no `__pycache__`, no `venv`.
pub fn is_served_name(name: &str) -> bool {
    !name.starts_with('.') && !NEVER_SERVED.contains(&name)
}

/// The metadata of `resolved` (a path proven inside, following links) when it is a regular file;
/// otherwise the refusal a caller who named it as `input` gets.
fn regular_file(resolved: &Path, input: &str) -> Result<fs::Metadata, PathError> {
    let meta = fs::metadata(resolved).map_err(|_| PathError::NotFound(input.to_owned()))?;
    if meta.is_dir() {
        return Err(PathError::Directory(input.to_owned()));
    }
    if !meta.is_file() {
        return Err(PathError::NotRegularFile(input.to_owned()));
    }
    Ok(meta)
}

/// A regular file inside the projects folder that clients may read (not hidden, not protected),
/// proven by [`ProjectRoot::resolve_file`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectFile {
    absolute: PathBuf,
    relative: String,
    size: u64,
}

impl ProjectFile {
    /// The path relative to the projects folder, with `/` separators: safe to show.
    pub fn relative(&self) -> &str {
        &self.relative
    }
    /// Its size in bytes when it was proven.
    pub fn size(&self) -> u64 {
        self.size
    }
}

/// One entry of [`ProjectRoot::list_files`]: a name that [`ProjectRoot::resolve_file`] serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedFile {
    /// Relative to the projects folder, `/` separators (a symlink under its own name).
    pub relative: String,
    pub size: u64,
}

/// Why a proven file could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReadError {
    #[error("the file has {size} bytes, more than the {cap} bytes served at most")]
    TooLarge { size: u64, cap: u64 },
    /// It was replaced (by a link, a folder, a FIFO…) or removed after it was proven.
    #[error("the file changed while it was read")]
    Changed,
    #[error("the file could not be read ({0})")]
    Io(io::ErrorKind),
}

/// The projects folder, canonicalized once.
#[derive(Debug, Clone)]
pub struct ProjectRoot {
    canonical: PathBuf,
}

/// A regular `.py` file inside the projects folder, with the path the caller may be shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectPath {
    absolute: PathBuf,
    relative: String,
}

impl ProjectPath {
    /// The canonical path to execute.
    pub fn absolute(&self) -> &Path {
        &self.absolute
    }
    /// The path relative to the projects folder, with `/` separators: safe to show.
    pub fn relative(&self) -> &str {
        &self.relative
    }
    /// The directory the script runs in.
    pub fn directory(&self) -> &Path {
        self.absolute.parent().unwrap_or(&self.absolute)
    }
}

/// A folder inside the projects folder (the folder itself included) that a run may work in,
/// proven by [`ProjectRoot::resolve_project`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectDir {
    absolute: PathBuf,
    relative: String,
}

impl ProjectDir {
    /// The canonical folder.
    pub fn absolute(&self) -> &Path {
        &self.absolute
    }
    /// The folder relative to the projects folder (`""` for the folder itself): safe to show.
    pub fn relative(&self) -> &str {
        &self.relative
    }
}

impl ProjectRoot {
    /// Opens the projects folder; it must exist and be a directory.
    pub fn open(dir: &Path) -> Result<Self, PathError> {
        let canonical = dunce::canonicalize(dir).map_err(|e| {
            PathError::BadRoot(format!("'{}' cannot be opened: {e}", dir.display()))
        })?;
        if !canonical.is_dir() {
            return Err(PathError::BadRoot(format!(
                "'{}' is not a directory",
                dir.display()
            )));
        }
        Ok(Self { canonical })
    }

    /// The canonical folder (for the runner and sandbox; never shown to callers).
    pub fn path(&self) -> &Path {
        &self.canonical
    }

    /// Resolves a caller's file name to a runnable Python file inside the folder.
    pub fn resolve_script(&self, input: &str) -> Result<ProjectPath, PathError> {
        let resolved = self.resolve_inside(named_inside(input)?, input)?;
        regular_file(&resolved, input)?;
        if resolved.extension() != Some(OsStr::new("py")) {
            return Err(PathError::NotPython(input.to_owned()));
        }
        Ok(ProjectPath {
            relative: self.relative_of(&resolved),
            absolute: resolved,
        })
    }

    /// Resolves a caller's directory (None or empty means the folder itself).
    pub fn resolve_dir(&self, input: Option<&str>) -> Result<PathBuf, PathError> {
        let input = match input {
            None => return Ok(self.canonical.clone()),
            Some(s) if s.is_empty() || s == "." => return Ok(self.canonical.clone()),
            Some(s) => s,
        };
        let resolved = self.resolve_inside(named_inside(input)?, input)?;
        match fs::metadata(&resolved) {
            // A folder the server may not list is no empty folder.
            Ok(m) if m.is_dir() => match fs::read_dir(&resolved) {
                Ok(_) => Ok(resolved),
                Err(_) => Err(PathError::Unreadable(input.to_owned())),
            },
            _ => Err(PathError::NotFound(input.to_owned())),
        }
    }

    /// Resolves a caller's project (a folder, as for [`ProjectRoot::resolve_dir`], with the same
    /// refusals) to a folder a run may work in.
    pub fn resolve_project(&self, input: Option<&str>) -> Result<ProjectDir, PathError> {
        let absolute = self.resolve_dir(input)?;
        Ok(ProjectDir {
            relative: self.relative_of(&absolute),
            absolute,
        })
    }

    /// The runnable `.py` files below `dir` (already resolved inside), relative, `/`-separated, sorted.
    /// Symlinked directories are not descended (no loops); hidden folders and `__pycache__` are
    /// skipped. Every listed file passes [`ProjectRoot::resolve_script`].
    pub fn list_scripts(&self, dir: &Path) -> Vec<String> {
        let mut files = Vec::new();
        let mut pending = vec![(dir.to_path_buf(), 0usize)];
        let mut visited = 0usize;
        while let Some((current, depth)) = pending.pop() {
            let Ok(entries) = fs::read_dir(&current) else {
                continue;
            };
            for entry in entries.flatten() {
                visited += 1;
                if visited > MAX_LISTED_ENTRIES {
                    break;
                }
                let name = entry.file_name();
                let name = name.to_string_lossy();
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                if kind.is_dir() {
                    if depth < MAX_LIST_DEPTH && !name.starts_with('.') && name != "__pycache__" {
                        pending.push((entry.path(), depth + 1));
                    }
                } else if name.ends_with(".py") {
                    let relative = self.relative_of(&entry.path());
                    if self.resolve_script(&relative).is_ok() {
                        files.push(relative);
                    }
                }
            }
        }
        files.sort();
        files
    }

    /// Resolves a caller's path to a regular file that may be served (any type, not only `.py`),
    /// with the proof of [`ProjectRoot::resolve_script`]; a hidden or protected name on the way, as
    /// named or as resolved through links, is [`PathError::NotServed`] whether or not it exists.
    pub fn resolve_file(&self, input: &str) -> Result<ProjectFile, PathError> {
        let named = named_inside(input)?;
        let hidden = named
            .components()
            .any(|c| matches!(c, Component::Normal(n) if !is_served_name(&n.to_string_lossy())));
        if hidden {
            return Err(PathError::NotServed(input.to_owned()));
        }
        let resolved = self.resolve_inside(named, input)?;
        let meta = regular_file(&resolved, input)?;
        let relative = self.relative_of(&resolved);
        if !relative.split('/').all(is_served_name) {
            return Err(PathError::NotServed(input.to_owned()));
        }
        Ok(ProjectFile {
            absolute: resolved,
            relative,
            size: meta.len(),
        })
    }

    /// Every file [`ProjectRoot::resolve_file`] serves, sorted by relative path (the same bounds
    /// as [`ProjectRoot::list_scripts`]: entries visited, depth; symlinked folders not descended).
    /// A symlinked file is listed under its own name when its target may be served.
    pub fn list_files(&self) -> Vec<ListedFile> {
        self.walk_served().0
    }

    /// The served files (as [`ProjectRoot::list_files`]) and the folders walked to find them,
    /// the folder itself first (host paths: for a watcher, never for a client).
    pub fn walk_served(&self) -> (Vec<ListedFile>, Vec<PathBuf>) {
        let mut files = Vec::new();
        let mut folders = Vec::new();
        let mut pending = vec![(self.canonical.clone(), 0usize)];
        let mut visited = 0usize;
        while let Some((current, depth)) = pending.pop() {
            let Ok(entries) = fs::read_dir(&current) else {
                continue;
            };
            folders.push(current);
            for entry in entries.flatten() {
                visited += 1;
                if visited > MAX_LISTED_ENTRIES {
                    break;
                }
                let name = entry.file_name();
                if !name.to_str().is_some_and(is_served_name) {
                    continue;
                }
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if kind.is_dir() {
                    if depth < MAX_LIST_DEPTH {
                        pending.push((path, depth + 1));
                    }
                } else if kind.is_file() {
                    if let Ok(meta) = entry.metadata() {
                        files.push(ListedFile {
                            relative: self.relative_of(&path),
                            size: meta.len(),
                        });
                    }
                } else if kind.is_symlink() {
                    let relative = self.relative_of(&path);
                    if let Ok(target) = self.resolve_file(&relative) {
                        files.push(ListedFile {
                            relative,
                            size: target.size,
                        });
                    }
                }
            }
        }
        files.sort_by(|a, b| a.relative.cmp(&b.relative));
        (files, folders)
    }

    /// The bytes of a proven file, at most `cap`. The file is reopened by its proven path
    /// without following any link (on Linux, `openat2` beneath the folder with no links at all),
    /// without blocking on a FIFO, and must still be a regular file no larger than `cap`.
    /// Blocking: call it off the async threads.
    pub fn read_file(&self, file: &ProjectFile, cap: u64) -> Result<Vec<u8>, ReadError> {
        use std::io::Read as _;
        let opened = open_no_links(&self.canonical, file).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => ReadError::Changed,
            _ if e.raw_os_error() == Some(ELOOP) || e.raw_os_error() == Some(EXDEV) => {
                ReadError::Changed
            }
            kind => ReadError::Io(kind),
        })?;
        let meta = opened.metadata().map_err(|e| ReadError::Io(e.kind()))?;
        if !meta.is_file() {
            return Err(ReadError::Changed);
        }
        if meta.len() > cap {
            return Err(ReadError::TooLarge {
                size: meta.len(),
                cap,
            });
        }
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        opened
            .take(cap.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| ReadError::Io(e.kind()))?;
        let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        if read > cap {
            return Err(ReadError::TooLarge { size: read, cap });
        }
        Ok(bytes)
    }

    fn relative_of(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.canonical).unwrap_or(path);
        let parts: Vec<_> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        parts.join("/")
    }

    /// Resolves `relative` (following links hop by hop) and proves containment; errors name
    /// `input`.
    fn resolve_inside(&self, relative: &Path, input: &str) -> Result<PathBuf, PathError> {
        let resolved = resolve_links(&self.canonical.join(relative)).map_err(|e| match e {
            ResolveError::TooManyLinks => PathError::TooManyLinks(input.to_owned()),
            ResolveError::Io => PathError::Unreadable(input.to_owned()),
        })?;
        if !resolved.starts_with(&self.canonical) {
            return Err(PathError::Outside(input.to_owned()));
        }
        // Confirm with the OS: the file must exist, and its canonical form must agree.
        let canonical = match dunce::canonicalize(&resolved) {
            Ok(c) => c,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                return Err(PathError::NotFound(input.to_owned()))
            }
            Err(_) => return Err(PathError::Unreadable(input.to_owned())),
        };
        if !canonical.starts_with(&self.canonical) {
            return Err(PathError::Outside(input.to_owned()));
        }
        Ok(canonical)
    }
}

#[cfg(unix)]
const ELOOP: i32 = libc::ELOOP;
#[cfg(unix)]
const EXDEV: i32 = libc::EXDEV;
#[cfg(not(unix))]
const ELOOP: i32 = -1;
#[cfg(not(unix))]
const EXDEV: i32 = -1;

/// Opens a proven file for reading by its relative path beneath `root`, following no link.
fn open_no_links(root: &Path, file: &ProjectFile) -> io::Result<fs::File> {
    open_beneath(root, Path::new(&file.relative))
}

/// Opens `relative` (a path inside `root`, the canonical projects folder) for reading without
/// blocking on a FIFO: on Linux with `openat2` beneath `root` and no link anywhere on the way;
/// on other Unixes the last component is never followed; elsewhere plainly (a path proven just
/// before). For files runs may change while the server reads them.
#[cfg(target_os = "linux")]
pub fn open_beneath(root: &Path, relative: &Path) -> io::Result<fs::File> {
    use rustix::fs::{Mode, OFlags};
    let dir = rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    open_beneath_dir(&dir, relative)
}

/// [`open_beneath`] beneath a folder already held open (`dir`): for a reader that must not
/// follow the folder itself if it is swapped for a link while it reads.
#[cfg(target_os = "linux")]
pub fn open_beneath_dir(dir: impl rustix::fd::AsFd, relative: &Path) -> io::Result<fs::File> {
    use rustix::fs::{openat2, Mode, OFlags, ResolveFlags};
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let resolve = ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
    let fd = match openat2(&dir, relative, flags, Mode::empty(), resolve) {
        // Kernels before 5.6: the last component is still never followed.
        Err(rustix::io::Errno::NOSYS) => rustix::fs::openat(&dir, relative, flags, Mode::empty())?,
        other => other?,
    };
    Ok(fs::File::from(fd))
}

/// See the Linux version.
#[cfg(all(unix, not(target_os = "linux")))]
pub fn open_beneath(root: &Path, relative: &Path) -> io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(root.join(relative))
}

/// See the Linux version.
#[cfg(not(unix))]
pub fn open_beneath(root: &Path, relative: &Path) -> io::Result<fs::File> {
    fs::File::open(root.join(relative))
}

/// The caller's text as a path relative to the folder (the neutral `/projects/...` form
/// stripped), staying inside. A host path, or a relative one whose `..` climbs out, is
/// [`PathError::Outside`] whatever it leads to: nothing is looked up, so neither the answer nor
/// its timing tells where the folder lives.
fn named_inside(input: &str) -> Result<&Path, PathError> {
    if input.is_empty() {
        return Err(PathError::Empty);
    }
    if input.contains('\0') {
        return Err(PathError::NulByte);
    }
    if input.len() > MAX_PATH_BYTES {
        return Err(PathError::TooLong);
    }
    let relative = match input.strip_prefix(RUN_PROJECTS_DIR) {
        Some("") => ".",
        Some(rest) if rest.starts_with('/') => match rest.trim_start_matches('/') {
            "" => ".",
            rest => rest,
        },
        _ => input,
    };
    let path = Path::new(relative);
    if path.has_root() || path.is_absolute() || climbs_out(path) {
        return Err(PathError::Outside(input.to_owned()));
    }
    Ok(path)
}

/// Whether a relative path's `..` components climb above its starting folder, judged on the text.
fn climbs_out(path: &Path) -> bool {
    let mut depth = 0usize;
    for component in path.components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::ParentDir => match depth.checked_sub(1) {
                Some(up) => depth = up,
                None => return true,
            },
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    false
}

enum ResolveError {
    TooManyLinks,
    Io,
}

/// Resolves `.`, `..` and symlinks of an absolute path, component by component, like the kernel
/// does, but keeps going lexically past components that do not exist (so a dangling link's target
/// is still known and can be judged).
fn resolve_links(start: &Path) -> Result<PathBuf, ResolveError> {
    let mut resolved = PathBuf::new();
    let mut queue: Vec<PathBuf> = start
        .components()
        .rev()
        .map(|c| PathBuf::from(c.as_os_str()))
        .collect();
    let mut hops = 0usize;
    let mut missing = false;
    while let Some(part) = queue.pop() {
        let mut comps = part.components();
        let Some(component) = comps.next() else {
            continue;
        };
        match component {
            Component::Prefix(_) | Component::RootDir => {
                if matches!(component, Component::Prefix(_)) {
                    resolved = PathBuf::new();
                }
                resolved.push(component.as_os_str());
            }
            Component::CurDir => {}
            Component::ParentDir => {
                resolved.pop();
            }
            Component::Normal(name) => {
                let candidate = resolved.join(name);
                if missing {
                    resolved = candidate;
                    continue;
                }
                match fs::symlink_metadata(&candidate) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        hops += 1;
                        if hops > MAX_LINK_HOPS {
                            return Err(ResolveError::TooManyLinks);
                        }
                        let target = fs::read_link(&candidate).map_err(|_| ResolveError::Io)?;
                        if target.is_absolute() {
                            resolved = PathBuf::new();
                        }
                        queue.extend(
                            target
                                .components()
                                .rev()
                                .map(|c| PathBuf::from(c.as_os_str())),
                        );
                    }
                    Ok(_) => resolved = candidate,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        missing = true;
                        resolved = candidate;
                    }
                    // ENOTDIR and friends: a file used as a directory; it cannot exist.
                    Err(_) => {
                        missing = true;
                        resolved = candidate;
                    }
                }
            }
        }
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {

    #[test]
    fn no_name_the_sandbox_protects_is_ever_served() {
        for name in pyrun_sandbox::PROTECTED_NAMES {
            assert!(!is_served_name(name), "{name} would be served");
        }
        for name in [".env", ".env.local", "__pycache__"] {
            assert!(!is_served_name(name), "{name} would be served");
        }
    }
    use super::*;

    struct Fixture {
        _tmp: tempfile::TempDir,
        base: PathBuf,
        root: ProjectRoot,
    }

    /// A base dir holding `project/` (the root) and sibling dirs that share its prefix.
    fn fixture() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let base = dunce::canonicalize(tmp.path()).unwrap();
        let project = base.join("project");
        fs::create_dir_all(project.join("sub")).unwrap();
        fs::write(project.join("ok.py"), "print(1)").unwrap();
        fs::write(project.join("sub/inner.py"), "print(2)").unwrap();
        fs::write(project.join("notes.txt"), "x").unwrap();
        for name in ["..test", "test..", "...", "%2e%2e"] {
            fs::write(project.join(format!("{name}.py")), "").unwrap();
            fs::create_dir_all(project.join(name)).unwrap();
            fs::write(project.join(name).join("x.py"), "").unwrap();
        }
        for sibling in ["project2", "project_backup", "project.bak"] {
            fs::create_dir_all(base.join(sibling)).unwrap();
            fs::write(base.join(sibling).join("secret.py"), "").unwrap();
        }
        fs::write(base.join("outside.py"), "").unwrap();
        let root = ProjectRoot::open(&project).unwrap();
        Fixture {
            _tmp: tmp,
            base,
            root,
        }
    }

    fn outside(f: &Fixture, input: &str) {
        assert_eq!(
            f.root.resolve_script(input),
            Err(PathError::Outside(input.to_owned())),
            "{input:?} must be refused as outside"
        );
    }

    #[test]
    fn accepts_plain_nested_and_absolute_inside() {
        let f = fixture();
        assert_eq!(f.root.resolve_script("ok.py").unwrap().relative(), "ok.py");
        assert_eq!(
            f.root.resolve_script("sub/inner.py").unwrap().relative(),
            "sub/inner.py"
        );
        assert_eq!(
            f.root.resolve_script("./sub/../ok.py").unwrap().relative(),
            "ok.py"
        );
    }

    #[test]
    fn accepts_the_neutral_projects_form_like_a_relative_path() {
        let f = fixture();
        for (input, relative) in [
            ("/projects/ok.py", "ok.py"),
            ("/projects/sub/inner.py", "sub/inner.py"),
            ("/projects//sub/../ok.py", "ok.py"),
        ] {
            assert_eq!(
                f.root
                    .resolve_script(input)
                    .map(|p| p.relative().to_owned()),
                Ok(relative.to_owned()),
                "{input}"
            );
        }
        assert_eq!(
            f.root.resolve_dir(Some("/projects")).unwrap(),
            f.root.path()
        );
        assert_eq!(
            f.root.resolve_dir(Some("/projects/")).unwrap(),
            f.root.path()
        );
        assert_eq!(
            f.root.resolve_dir(Some("/projects/sub")).unwrap(),
            f.root.path().join("sub")
        );
        // Neutral names tell nothing about the host: their errors stay precise.
        assert_eq!(
            f.root.resolve_script("/projects/nope.py"),
            Err(PathError::NotFound("/projects/nope.py".into()))
        );
        assert_eq!(
            f.root.resolve_script("/projects/sub"),
            Err(PathError::Directory("/projects/sub".into()))
        );
        outside(&f, "/projects/../outside.py");
        outside(&f, "/projectsX/ok.py");
    }

    /// A host path probes nothing: missing, a directory, a text file, inside or outside the
    /// folder, all get the same words (but the caller's own path).
    #[test]
    fn every_host_path_gets_one_and_the_same_refusal() {
        let f = fixture();
        let project = f.base.join("project");
        let host = |p: PathBuf| p.to_str().unwrap().to_owned();
        let scripts = [
            host(project.join("ok.py")),
            host(project.join("sub/inner.py")),
            "../project/ok.py".to_owned(),
            host(project.join("nope.py")),
            host(project.join("sub")),
            host(project.join("notes.txt")),
            host(project.join("ok.py/x.py")),
            host(f.base.join("outside.py")),
            host(f.base.join("missing.py")),
            host(f.base.clone()),
            "/etc/passwd".to_owned(),
            "/definitely/not/here.py".to_owned(),
            "../project/nope.py".to_owned(),
            "../project/sub".to_owned(),
            "sub/../../project/notes.txt".to_owned(),
        ];
        let shape = |input: &str, err: PathError| err.to_string().replace(input, "INPUT");
        let mut answers = Vec::new();
        for input in &scripts {
            let err = f.root.resolve_script(input).unwrap_err();
            assert_eq!(err, PathError::Outside(input.clone()), "{input}");
            answers.push(shape(input, err));
        }
        let dirs = [
            host(project.clone()),
            host(project.join("sub")),
            host(project.join("ok.py")),
            host(project.join("nope")),
            host(f.base.join("project2")),
            "/etc".to_owned(),
            "../project/nope".to_owned(),
        ];
        for input in &dirs {
            let err = f.root.resolve_dir(Some(input)).unwrap_err();
            assert_eq!(err, PathError::Outside(input.clone()), "{input}");
            answers.push(shape(input, err));
        }
        answers.dedup();
        assert_eq!(answers.len(), 1, "{answers:#?}");
        // Served files get it too: the folder's own host path is no better a guess.
        for input in [
            host(project.join("notes.txt")),
            host(f.base.join("outside.py")),
        ] {
            let err = f.root.resolve_file(&input).unwrap_err();
            answers.push(shape(&input, err));
        }
        answers.dedup();
        assert_eq!(answers.len(), 1, "{answers:#?}");
    }

    #[test]
    fn accepts_names_that_only_look_like_traversal() {
        let f = fixture();
        for name in ["..test", "test..", "...", "%2e%2e"] {
            assert!(
                f.root.resolve_script(&format!("{name}.py")).is_ok(),
                "{name}"
            );
            assert!(
                f.root.resolve_script(&format!("{name}/x.py")).is_ok(),
                "{name}"
            );
        }
    }

    #[test]
    fn refuses_sibling_prefixes() {
        let f = fixture();
        for sibling in ["project2", "project_backup", "project.bak"] {
            outside(&f, &format!("../{sibling}/secret.py"));
            let abs = f.base.join(sibling).join("secret.py");
            outside(&f, abs.to_str().unwrap());
        }
    }

    #[test]
    fn refuses_dot_dot_escapes() {
        let f = fixture();
        outside(&f, "../outside.py");
        outside(&f, "a/../../etc/passwd");
        outside(&f, "sub/../../outside.py");
        outside(&f, "/etc/passwd");
        // `project/..` relative to the root is the base folder.
        outside(&f, "project/../../outside.py");
        assert_eq!(
            f.root.resolve_dir(Some("..")),
            Err(PathError::Outside("..".into()))
        );
        let deep = format!("{}{}etc/passwd", "a/".repeat(1000), "../".repeat(1001));
        assert!(matches!(
            f.root.resolve_script(&deep),
            Err(PathError::Outside(_)) | Err(PathError::TooLong)
        ));
    }

    #[test]
    fn long_traversal_under_the_byte_limit_is_judged_by_containment() {
        let f = fixture();
        let deep = format!("{}{}outside.py", "a/".repeat(500), "../".repeat(501));
        assert!(deep.len() <= MAX_PATH_BYTES);
        outside(&f, &deep);
        let back_in = format!("{}{}project/ok.py", "a/".repeat(500), "../".repeat(501));
        outside(&f, &back_in);
    }

    #[test]
    fn refuses_empty_nul_and_too_long() {
        let f = fixture();
        assert_eq!(f.root.resolve_script(""), Err(PathError::Empty));
        for input in ["\0ok.py", "ok\0.py", "ok.py\0"] {
            assert_eq!(f.root.resolve_script(input), Err(PathError::NulByte));
        }
        let long = "a".repeat(MAX_PATH_BYTES + 1);
        assert_eq!(f.root.resolve_script(&long), Err(PathError::TooLong));
    }

    #[test]
    fn refuses_directories_non_python_and_missing() {
        let f = fixture();
        assert_eq!(
            f.root.resolve_script("sub"),
            Err(PathError::Directory("sub".into()))
        );
        assert_eq!(
            f.root.resolve_script("notes.txt"),
            Err(PathError::NotPython("notes.txt".into()))
        );
        assert_eq!(
            f.root.resolve_script("nope.py"),
            Err(PathError::NotFound("nope.py".into()))
        );
        assert_eq!(
            f.root.resolve_script("ok.py/x.py"),
            Err(PathError::NotFound("ok.py/x.py".into()))
        );
    }

    #[cfg(unix)]
    #[test]
    fn refuses_symlinks_out_whether_or_not_the_target_exists() {
        use std::os::unix::fs::symlink;
        let f = fixture();
        let project = f.base.join("project");
        symlink(f.base.join("outside.py"), project.join("link_out.py")).unwrap();
        symlink(f.base.join("missing.py"), project.join("dangling_out.py")).unwrap();
        symlink(&f.base, project.join("parent_link")).unwrap();
        symlink(f.base.join("project2"), project.join("sibling_dir")).unwrap();
        // A chain: inside link -> inside link -> outside.
        symlink(project.join("link_out.py"), project.join("chain1.py")).unwrap();
        symlink("chain1.py", project.join("chain2.py")).unwrap();
        outside(&f, "link_out.py");
        outside(&f, "dangling_out.py");
        outside(&f, "parent_link/outside.py");
        outside(&f, "parent_link/nothing_here.py");
        outside(&f, "sibling_dir/secret.py");
        outside(&f, "chain2.py");
        // Identical message for an existing and a missing target: nothing leaks.
        let a = f
            .root
            .resolve_script("link_out.py")
            .unwrap_err()
            .to_string();
        let b = f
            .root
            .resolve_script("dangling_out.py")
            .unwrap_err()
            .to_string();
        assert_eq!(a.replace("link_out", "X"), b.replace("dangling_out", "X"));
        assert!(
            !a.contains(f.base.to_str().unwrap()),
            "leaks host path: {a}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn follows_symlinks_that_stay_inside_and_stops_loops() {
        use std::os::unix::fs::symlink;
        let f = fixture();
        let project = f.base.join("project");
        symlink("sub/inner.py", project.join("alias.py")).unwrap();
        symlink("sub", project.join("subalias")).unwrap();
        assert_eq!(
            f.root.resolve_script("alias.py").unwrap().relative(),
            "sub/inner.py"
        );
        assert_eq!(
            f.root
                .resolve_script("subalias/inner.py")
                .unwrap()
                .relative(),
            "sub/inner.py"
        );
        symlink("loop_b.py", project.join("loop_a.py")).unwrap();
        symlink("loop_a.py", project.join("loop_b.py")).unwrap();
        assert_eq!(
            f.root.resolve_script("loop_a.py"),
            Err(PathError::TooManyLinks("loop_a.py".into()))
        );
    }

    #[cfg(target_os = "linux")] // rustix has no mknodat on macOS
    #[test]
    fn refuses_fifos() {
        let f = fixture();
        let fifo = f.base.join("project/pipe.py");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert_eq!(
            f.root.resolve_script("pipe.py"),
            Err(PathError::NotRegularFile("pipe.py".into()))
        );
    }

    #[test]
    fn errors_never_show_the_host_folder() {
        let f = fixture();
        let host = f.base.to_str().unwrap().to_owned();
        for input in [
            "../outside.py",
            "nope.py",
            "sub",
            "notes.txt",
            "/etc/passwd",
        ] {
            let msg = f.root.resolve_script(input).unwrap_err().to_string();
            assert!(!msg.contains(&host), "{msg}");
        }
    }

    #[test]
    fn lists_only_runnable_files_sorted() {
        let f = fixture();
        fs::create_dir_all(f.base.join("project/__pycache__")).unwrap();
        fs::write(f.base.join("project/__pycache__/c.py"), "").unwrap();
        let all = f.root.list_scripts(f.root.path());
        assert!(all.contains(&"ok.py".to_owned()));
        assert!(all.contains(&"sub/inner.py".to_owned()));
        assert!(!all.iter().any(|p| p.contains("__pycache__")));
        assert!(!all.iter().any(|p| p.ends_with(".txt")));
        let mut sorted = all.clone();
        sorted.sort();
        assert_eq!(all, sorted);
        for file in &all {
            assert!(f.root.resolve_script(file).is_ok(), "{file}");
        }
        let sub = f.root.resolve_dir(Some("sub")).unwrap();
        assert_eq!(f.root.list_scripts(&sub), vec!["sub/inner.py".to_owned()]);
    }

    #[cfg(unix)]
    #[test]
    fn listing_skips_links_that_point_out() {
        use std::os::unix::fs::symlink;
        let f = fixture();
        symlink(
            f.base.join("outside.py"),
            f.base.join("project/link_out.py"),
        )
        .unwrap();
        let all = f.root.list_scripts(f.root.path());
        assert!(!all.contains(&"link_out.py".to_owned()));
    }

    #[test]
    fn resolve_file_serves_any_file_inside_but_no_hidden_or_protected_name() {
        let f = fixture();
        let project = f.base.join("project");
        for dir in [".git", ".venv", "venv", "__pycache__", "sub/.hidden"] {
            fs::create_dir_all(project.join(dir)).unwrap();
            fs::write(project.join(dir).join("x.py"), "").unwrap();
        }
        fs::write(project.join(".env"), "K=V").unwrap();
        fs::write(project.join("sub/.env.prod"), "K=V").unwrap();
        let file = f.root.resolve_file("notes.txt").unwrap();
        assert_eq!((file.relative(), file.size()), ("notes.txt", 1));
        assert_eq!(
            f.root
                .resolve_file("/projects/sub/inner.py")
                .unwrap()
                .relative(),
            "sub/inner.py"
        );
        for hidden in [
            ".env",
            "sub/.env.prod",
            ".git/x.py",
            ".venv/x.py",
            "venv/x.py",
            "__pycache__/x.py",
            "sub/.hidden/x.py",
            "sub/../.env",
            ".git/missing",
        ] {
            assert_eq!(
                f.root.resolve_file(hidden),
                Err(PathError::NotServed(hidden.into())),
                "{hidden}"
            );
        }
        let host_env = project.join(".env");
        outside_file(&f, host_env.to_str().unwrap());
        outside_file(&f, "../project2/secret.py");
        outside_file(&f, "../outside.py");
        assert_eq!(
            f.root.resolve_file("sub"),
            Err(PathError::Directory("sub".into()))
        );
        let listed: Vec<_> = f
            .root
            .list_files()
            .into_iter()
            .map(|l| l.relative)
            .collect();
        assert!(listed.contains(&"notes.txt".to_owned()), "{listed:?}");
        assert!(
            !listed
                .iter()
                .any(|l| l.split('/').any(|n| !is_served_name(n))),
            "{listed:?}"
        );
        for name in &listed {
            assert!(f.root.resolve_file(name).is_ok(), "{name}");
        }
    }

    fn outside_file(f: &Fixture, input: &str) {
        assert_eq!(
            f.root.resolve_file(input),
            Err(PathError::Outside(input.to_owned())),
            "{input:?} must be refused as outside"
        );
    }

    #[cfg(unix)]
    #[test]
    fn links_to_hidden_names_are_not_served_and_a_link_swapped_in_is_not_read() {
        use std::os::unix::fs::symlink;
        let f = fixture();
        let project = f.base.join("project");
        fs::write(project.join(".env"), "SECRET").unwrap();
        symlink(".env", project.join("env.txt")).unwrap();
        assert_eq!(
            f.root.resolve_file("env.txt"),
            Err(PathError::NotServed("env.txt".into()))
        );
        assert!(!f.root.list_files().iter().any(|l| l.relative == "env.txt"));
        // Proven, then replaced by a link out before it is read.
        fs::write(project.join("swap.txt"), "fine").unwrap();
        let proven = f.root.resolve_file("swap.txt").unwrap();
        assert_eq!(f.root.read_file(&proven, 100).unwrap(), b"fine");
        fs::remove_file(project.join("swap.txt")).unwrap();
        symlink(f.base.join("outside.py"), project.join("swap.txt")).unwrap();
        assert_eq!(f.root.read_file(&proven, 100), Err(ReadError::Changed));
        // A folder on the way replaced by a link.
        let inner = f.root.resolve_file("sub/inner.py").unwrap();
        fs::rename(project.join("sub"), f.base.join("moved_sub")).unwrap();
        symlink(f.base.join("moved_sub"), project.join("sub")).unwrap();
        assert_eq!(f.root.read_file(&inner, 100), Err(ReadError::Changed));
    }

    #[test]
    fn read_file_refuses_more_than_the_cap() {
        let f = fixture();
        fs::write(f.base.join("project/big.txt"), "0123456789").unwrap();
        let big = f.root.resolve_file("big.txt").unwrap();
        assert_eq!(
            f.root.read_file(&big, 9),
            Err(ReadError::TooLarge { size: 10, cap: 9 })
        );
        assert_eq!(f.root.read_file(&big, 10).unwrap(), b"0123456789");
    }
}
