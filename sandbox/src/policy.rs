//! What a run may touch, as the server asks for it: the sandbox's vocabulary (mode, limits,
//! policy, grants, the project of a run and what of the projects folder it may write, the
//! protected names, where a run sees its folders). The ground floor of the crate: plain data and
//! pure functions, importing nothing else of it; every other module builds on these.

use std::path::{Path, PathBuf};

/// How much isolation the server insists on (`--sandbox`, env `PYRUN_SANDBOX`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SandboxMode {
    /// Refuse to start unless every layer is available on this machine.
    Strict,
    /// Apply every layer this machine supports and report which ones.
    Standard,
    /// No isolation: scripts run with the server's own rights.
    Off,
}

impl SandboxMode {
    /// Every mode, as the command line spells them.
    pub const NAMES: [&'static str; 3] = ["strict", "standard", "off"];

    pub fn name(self) -> &'static str {
        match self {
            Self::Strict => "strict",
            Self::Standard => "standard",
            Self::Off => "off",
        }
    }
}

impl std::str::FromStr for SandboxMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "strict" => Ok(Self::Strict),
            "standard" => Ok(Self::Standard),
            "off" => Ok(Self::Off),
            other => Err(format!(
                "unknown sandbox mode '{other}' (expected one of: {})",
                Self::NAMES.join(", ")
            )),
        }
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Per-run resource limits. A value of 0 means "no limit" for that resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceLimits {
    /// Address space per process, and memory of the whole run where a memory cgroup exists.
    pub memory_bytes: u64,
    /// CPU seconds per process (keep it at least the run timeout).
    pub cpu_secs: u64,
    /// Largest file a run may write.
    pub file_size_bytes: u64,
    /// Open file descriptors per process.
    pub open_files: u64,
    /// Processes (and threads) of the whole run.
    pub processes: u64,
}

impl Default for ResourceLimits {
    fn default() -> Self {
        Self {
            memory_bytes: 2048 << 20,
            cpu_secs: 300,
            file_size_bytes: 1024 << 20,
            open_files: 1024,
            processes: 64,
        }
    }
}

/// Names inside the projects folder that runs may read but not change (Linux: a read-only bind
/// over each, wherever it lies in the part of the folder a run may write): repository metadata
/// the user's git runs (hooks, `core.fsmonitor`), environments the user's Python runs, settings
/// and workflows that tools load, bytecode Python trusts. `.env*` files and any folder holding a
/// `pyvenv.cfg` are protected too (see [`is_protected_name`]). One a run creates does not stay
/// (see [`Sandbox::created_protected`](crate::Sandbox::created_protected)). Clients are never served them either.
pub const PROTECTED_NAMES: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    ".venv",
    "venv",
    ".envrc",
    ".vscode",
    ".idea",
    ".github",
    ".pre-commit-config.yaml",
    "__pycache__",
];

/// The modules `site` imports as every Python starts, from any folder on its path: a project
/// folder on `PYTHONPATH` (`PYTHONPATH=.` or `=src` in a shell, a tool's settings, inline code's
/// own runs) makes every Python there (pip, pytest, the user's tools) run them first. Not
/// `python script.py`, `-m` or `-c` alone: the script's folder joins `sys.path` after `site`
/// ran. Any form Python imports counts: `name.py`, `name.pyc`, `name.*.so`, a `name/` package.
const STARTUP_MODULES: [&[u8]; 2] = [b"sitecustomize", b"usercustomize"];

/// Compiled modules Python imports from any folder on its path, before a `.py` of the same name
/// (extension modules: `name.so`, `name.cpython-311-x86_64-linux-gnu.so`, `name.pyd`) or where
/// there is none (a `name.pyc` beside no source): a planted `json.pyc` in a project runs for the
/// user's `python3 main.py` that imports `json`, and `*.pyc` hides in every Python `.gitignore`.
/// Python 3 itself writes `.pyc` files only into `__pycache__`.
const COMPILED_MODULES: [&[u8]; 3] = [b".pyc", b".so", b".pyd"];

/// Whether an entry of the projects folder named `name` is protected by its name alone: one of
/// [`PROTECTED_NAMES`], `.env` and its variants (`.env.local`...), a compiled module (`*.pyc`,
/// `*.so`, `*.pyd`, see [`COMPILED_MODULES`]), or a `sitecustomize` or
/// `usercustomize` module in any form (`sitecustomize.py`, `.pyc`, `.so`, a package folder).
pub fn is_protected_name(name: &[u8]) -> bool {
    PROTECTED_NAMES.iter().any(|n| n.as_bytes() == name)
        || name.starts_with(b".env")
        || COMPILED_MODULES
            .iter()
            .any(|suffix| name.len() > suffix.len() && name.ends_with(suffix))
        || STARTUP_MODULES.iter().any(|module| {
            name.strip_prefix(*module)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(b"."))
        })
}

/// What of the projects folder a run may write (`--write-scope`, env `PYRUN_WRITE_SCOPE`), where
/// runs have a file view of their own (Linux with the mount-ns layer); elsewhere, all of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum WriteScope {
    /// Its own project only (see [`RunProject`]); the rest is read-only.
    #[default]
    Project,
    /// The whole projects folder (protected names stay read-only).
    All,
}

impl WriteScope {
    /// Every scope, as the command line spells them.
    pub const NAMES: [&'static str; 2] = ["project", "all"];
}

impl std::str::FromStr for WriteScope {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "project" => Ok(Self::Project),
            "all" => Ok(Self::All),
            other => Err(format!(
                "unknown write scope '{other}' (expected one of: {})",
                Self::NAMES.join(", ")
            )),
        }
    }
}

/// The project of a run: the part of the projects folder it may write under
/// [`WriteScope::Project`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RunProject {
    /// No project (inline code without one, the install's steps): it writes only its scratch.
    None,
    /// A script directly in the projects folder: the folder's own files, not its subfolders.
    Top,
    /// The top-level folder (one name, relative to the projects folder) that holds its script.
    Folder(PathBuf),
}

impl RunProject {
    /// The project of a run working in `dir` (canonical, on the host) of `projects`: the first
    /// name of `dir` below `projects`, [`RunProject::Top`] for `projects` itself,
    /// [`RunProject::None`] outside it.
    pub fn of(projects: &Path, dir: &Path) -> Self {
        match dir.strip_prefix(projects) {
            Ok(rel) => match rel.components().next() {
                Some(std::path::Component::Normal(name)) => Self::Folder(PathBuf::from(name)),
                _ => Self::Top,
            },
            Err(_) => Self::None,
        }
    }
}

/// The layers under which a run may open `AF_UNIX` sockets (seccomp refuses them otherwise).
///
/// Why these: the refusal kept runs from local daemons (Docker, systemd, D-Bus) that trust
/// the server's uid. With `mount-ns` a run's file view is the minimal world, where no host path
/// socket exists but in the projects folder (and a run may make path sockets only in its own
/// `/tmp`, `landlock.rs`); with `landlock-scopes` (ABI 6) abstract names and signals reach only
/// the run's own Landlock domain, not the host's daemons nor another run in the shared network
/// namespace. Without either, the refusal stays. Runs of the sandbox that has a projects folder
/// only: installs keep it closed.
pub fn unix_sockets_given(layers: &[&str]) -> bool {
    ["seccomp", "mount-ns", "landlock-scopes"]
        .iter()
        .all(|needed| layers.contains(needed))
}

/// Where a run sees the projects folder when the sandbox gives it its own file view (Linux).
pub const RUN_PROJECTS_DIR: &str = "/projects";
/// Where a run sees its scratch folder (its HOME and TMPDIR) in that view.
pub const RUN_SCRATCH_DIR: &str = "/tmp";
/// Where a run sees the server's bytecode cache in that view.
pub const RUN_PYCACHE_DIR: &str = "/pycache";
/// Where a run sees the server's support modules (its matplotlib backend) in that view.
pub const RUN_SUPPORT_DIR: &str = "/pyrun";

/// A layer runs do not get from this server: what its absence leaves open (`why`) and what
/// would bring it (`hint`). Fixed words, never a host path: `/health` shows them to anyone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissingLayer {
    pub layer: &'static str,
    pub why: &'static str,
    pub hint: &'static str,
}

/// What a run may touch. System directories Python needs (`/usr`, `/lib*`, `/etc/ld.so.cache`, a few
/// devices) are added by the sandbox itself; the interpreter's own trees are the caller's to add
/// (the run layer asks the interpreter which it reads).
#[derive(Clone, Debug)]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    /// Readable (and executable) trees: projects folder, Python prefixes and site-packages.
    pub read_paths: Vec<PathBuf>,
    /// Writable trees: the projects folder. The per-run scratch dir is added by `confine`.
    pub write_paths: Vec<PathBuf>,
    pub allow_network: bool,
    pub limits: ResourceLimits,
    /// The projects folder (canonical): shown to runs at [`RUN_PROJECTS_DIR`] in a read-only
    /// view of the host (Linux). `None`: no view; runs see host paths.
    pub projects: Option<PathBuf>,
    /// Scripts may read the projects folder but not write it (they write only their scratch).
    pub read_only_projects: bool,
    /// What of the projects folder a run may write, when it may write it at all.
    pub write_scope: WriteScope,
    /// The server's bytecode cache (canonical): read-only to runs, at [`RUN_PYCACHE_DIR`] in
    /// their view (Linux) or at its host path without one; added to the readable trees here.
    pub pycache: Option<PathBuf>,
    /// The server's support modules for runs (canonical; its matplotlib backend): read-only to
    /// runs in every mode, at [`RUN_SUPPORT_DIR`] in their view (Linux) or at its host path
    /// without one; added to the readable trees here.
    pub support: Option<PathBuf>,
    /// With `allow_network`: `Some(ports)` lets TCP connect only to these ports and denies every
    /// TCP bind (Landlock ABI 4, Linux 6.7). [`Sandbox::new`](crate::Sandbox::new) fails when the kernel cannot
    /// enforce it, whatever the mode but off: a caller that names ports relies on them. `None`:
    /// TCP as `allow_network` says. Used by package installs (the index's port only).
    pub tcp_connect_ports: Option<Vec<u16>>,
}

impl SandboxPolicy {
    /// A policy in `mode` with nothing granted beyond the system's own trees: no extra paths, no
    /// network, default limits, no view of a projects folder, no bytecode cache. Callers add what
    /// they grant with struct update syntax.
    pub fn bare(mode: SandboxMode) -> Self {
        Self {
            mode,
            read_paths: Vec::new(),
            write_paths: Vec::new(),
            allow_network: false,
            limits: ResourceLimits::default(),
            projects: None,
            read_only_projects: false,
            write_scope: WriteScope::Project,
            pycache: None,
            support: None,
            tcp_connect_ports: None,
        }
    }
}

/// A folder an install's processes see at its host path besides their scratch (Linux: bound
/// into their view and given a Landlock rule): the project read-only, its venv writable.
#[derive(Clone, Debug)]
pub struct Grant {
    /// Where the processes name it: its host path.
    pub at: PathBuf,
    /// What is shown there when not `at` itself: the magic link of a descriptor the caller holds
    /// open (`/proc/self/fd/N`), so that a folder swapped for a link after the caller's checks
    /// changes nothing.
    pub held: Option<PathBuf>,
    pub writable: bool,
}

impl Grant {
    /// `at` itself, writable.
    pub fn writable(at: &Path) -> Self {
        Self {
            at: at.to_path_buf(),
            held: None,
            writable: true,
        }
    }

    /// The path the rules are made from: the held descriptor's link, else `at`.
    pub fn source(&self) -> &Path {
        self.held.as_deref().unwrap_or(&self.at)
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// The code of a file before its tests, without comment lines.
    fn code(path: &Path) -> String {
        let text = std::fs::read_to_string(path).unwrap();
        let before_tests = text.split("#[cfg(test)]").next().unwrap_or_default();
        before_tests
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// What `lib.rs` re-exports: the names a module would reach back up for.
    fn facade_names(lib: &str) -> Vec<String> {
        let mut names = Vec::new();
        for statement in lib.split("pub use ").skip(1) {
            let statement = statement.split(';').next().unwrap_or_default();
            let listed = match statement.split_once('{') {
                Some((_, list)) => list.trim_end_matches('}').to_owned(),
                None => statement.rsplit("::").next().unwrap_or_default().to_owned(),
            };
            names.extend(listed.split(',').map(|n| n.trim().to_owned()));
        }
        names.retain(|n| !n.is_empty());
        names
    }

    fn files(dir: &Path, found: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                found.push(path);
            }
        }
    }

    #[test]
    fn the_policy_imports_nothing_of_the_crate_and_no_module_reaches_back_into_the_facade() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let policy = code(&src.join("policy.rs"));
        assert!(
            !policy.contains("crate::") && !policy.contains("super::"),
            "policy.rs must stay the ground floor"
        );
        let facade = facade_names(&code(&src.join("lib.rs")));
        assert!(facade.iter().any(|n| n == "SandboxPolicy"), "{facade:?}");
        let mut all = Vec::new();
        files(&src, &mut all);
        for path in all.iter().filter(|p| !p.ends_with("lib.rs")) {
            let code = code(path);
            // In a file directly in src/, `super` is the crate root too.
            let mut roots = vec!["crate::"];
            if path.parent() == Some(src.as_path()) {
                roots.push("super::");
            }
            for root in roots {
                for (at, _) in code.match_indices(root) {
                    let rest = &code[at + root.len()..];
                    let named = match rest.strip_prefix('{') {
                        Some(list) => list[..list.find('}').unwrap_or(list.len())].to_owned(),
                        None => rest
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect(),
                    };
                    for name in named.split(',').map(|n| n.trim()) {
                        assert!(
                            !facade.iter().any(|f| f == name),
                            "{} imports `{root}{name}` through lib.rs, the façade: import it \
                             from its module",
                            path.display()
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn pythons_startup_modules_are_protected_in_every_form_and_nothing_merely_named_alike() {
        for name in [
            "sitecustomize.py",
            "sitecustomize.pyc",
            "sitecustomize",
            "usercustomize.cpython-311-x86_64-linux-gnu.so",
            ".env.local",
            ".git",
        ] {
            assert!(super::is_protected_name(name.as_bytes()), "{name}");
        }
        for name in [
            "sitecustomize_notes.txt",
            "my_sitecustomize.py",
            "x.pth",
            "setup.py",
        ] {
            assert!(!super::is_protected_name(name.as_bytes()), "{name}");
        }
    }

    #[test]
    fn compiled_modules_python_would_import_before_or_without_a_source_are_protected() {
        for name in [
            "json.pyc",
            "pytest.pyc",
            "utils.so",
            "utils.cpython-311-x86_64-linux-gnu.so",
            "utils.abi3.so",
            "utils.pyd",
        ] {
            assert!(super::is_protected_name(name.as_bytes()), "{name}");
        }
        for name in [".pyc", ".so", "libfoo.so.1", "notes.pyc.txt", "main.py"] {
            assert!(!super::is_protected_name(name.as_bytes()), "{name}");
        }
    }

    #[test]
    fn unix_sockets_are_given_only_with_seccomp_the_view_and_landlocks_scopes() {
        use super::unix_sockets_given;
        let all = [
            "landlock",
            "seccomp",
            "user-netns",
            "mount-ns",
            "landlock-scopes",
        ];
        assert!(unix_sockets_given(&all));
        for dropped in ["seccomp", "mount-ns", "landlock-scopes"] {
            let fewer: Vec<&str> = all.iter().copied().filter(|l| *l != dropped).collect();
            assert!(!unix_sockets_given(&fewer), "given without {dropped}");
        }
        // Other platforms' layers never give them (nor refuse them: no seccomp there).
        assert!(!unix_sockets_given(&["rlimits", "process-group"]));
        assert!(!unix_sockets_given(&["job-object"]));
    }
}
