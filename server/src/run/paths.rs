//! Path containment: the only constructor of [`ProjectPath`], a Python file proven to lie inside the
//! projects folder.
//!
//! Containment is judged on the resolved path, component by component, never by string prefix. We
//! resolve symlinks ourselves, hop by hop, so that a symlink pointing out of the folder is reported as
//! "outside" whether or not its target exists: the answer never tells a caller what exists outside.
//! The final answer is then confirmed with the OS's own canonicalization.
//!
//! A caller names a file relative to the folder (`mathpkg/main.py`), by its neutral absolute form
//! ([`RUN_PROJECTS_DIR`]`/mathpkg/main.py`), or by its full host path. A host path, or a relative
//! one whose `..` climbs out of the folder, is accepted only when it leads to something usable;
//! any other answer to it is one and the same refusal ([`PathError::Outside`]), so no answer tells
//! whether a host path exists, what it is, or where the folder lives.

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
        let named = Named::parse(input)?;
        let found = self
            .resolve_inside(named.path(), input)
            .and_then(|resolved| {
                let meta =
                    fs::metadata(&resolved).map_err(|_| PathError::NotFound(input.to_owned()))?;
                if meta.is_dir() {
                    return Err(PathError::Directory(input.to_owned()));
                }
                if !meta.is_file() {
                    return Err(PathError::NotRegularFile(input.to_owned()));
                }
                if resolved.extension() != Some(OsStr::new("py")) {
                    return Err(PathError::NotPython(input.to_owned()));
                }
                Ok(resolved)
            });
        let resolved = named.judge(found, input)?;
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
        let named = Named::parse(input)?;
        let found =
            self.resolve_inside(named.path(), input)
                .and_then(|resolved| match fs::metadata(&resolved) {
                    // A folder the server may not list is no empty folder.
                    Ok(m) if m.is_dir() => match fs::read_dir(&resolved) {
                        Ok(_) => Ok(resolved),
                        Err(_) => Err(PathError::Unreadable(input.to_owned())),
                    },
                    _ => Err(PathError::NotFound(input.to_owned())),
                });
        named.judge(found, input)
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

    fn relative_of(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.canonical).unwrap_or(path);
        let parts: Vec<_> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        parts.join("/")
    }

    /// Resolves `given` (following links hop by hop) and proves containment; errors name `input`.
    fn resolve_inside(&self, given: &Path, input: &str) -> Result<PathBuf, PathError> {
        let start = if given.is_absolute() {
            given.to_path_buf()
        } else {
            self.canonical.join(given)
        };
        let resolved = resolve_links(&start).map_err(|e| match e {
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

/// How the caller's text names a path, once its text is known to be acceptable.
enum Named<'a> {
    /// Relative to the folder (also the neutral `/projects/...` form, stripped), staying inside.
    Inside(&'a str),
    /// A host path, or a relative one whose `..` climbs out of the folder.
    Escaping(&'a Path),
}

impl<'a> Named<'a> {
    fn parse(input: &'a str) -> Result<Self, PathError> {
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
            return Ok(Self::Escaping(path));
        }
        Ok(Self::Inside(relative))
    }

    fn path(&self) -> &Path {
        match self {
            Self::Inside(relative) => Path::new(relative),
            Self::Escaping(path) => path,
        }
    }

    /// An escaping path succeeds or gets the one refusal; an inside one keeps its precise error.
    fn judge<T>(&self, found: Result<T, PathError>, input: &str) -> Result<T, PathError> {
        match self {
            Self::Inside(_) => found,
            Self::Escaping(_) => found.map_err(|_| PathError::Outside(input.to_owned())),
        }
    }
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
        let abs = f.base.join("project/ok.py");
        assert_eq!(
            f.root
                .resolve_script(abs.to_str().unwrap())
                .unwrap()
                .absolute(),
            abs
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
    fn every_unusable_host_path_gets_one_and_the_same_refusal() {
        let f = fixture();
        let project = f.base.join("project");
        let host = |p: PathBuf| p.to_str().unwrap().to_owned();
        let scripts = [
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
        // What is usable still works by its host path, and a climb that comes back in too.
        let ok = host(project.join("sub/inner.py"));
        assert_eq!(
            f.root.resolve_script(&ok).unwrap().relative(),
            "sub/inner.py"
        );
        assert_eq!(
            f.root
                .resolve_dir(Some(&host(project.join("sub"))))
                .unwrap(),
            project.join("sub")
        );
        assert_eq!(
            f.root
                .resolve_script("../project/ok.py")
                .unwrap()
                .relative(),
            "ok.py"
        );
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
        assert_eq!(f.root.resolve_script(&back_in).unwrap().relative(), "ok.py");
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
}
