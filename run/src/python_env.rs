//! Project environments: the interpreter, and the virtual environment, a run in a folder uses.
//!
//! A run uses the nearest venv between its folder and the projects folder: at each level, from
//! the run's folder up, a real folder `.venv` (then `venv`) that holds a `pyvenv.cfg`. Without
//! one, the server's `--python` as before. A venv is untrusted input — a run may write one in any
//! folder off its own path — so [`PythonEnvs::for_dir`] checks it before any run uses it:
//! 1. the venv folder and its `pyvenv.cfg` are real (no links); the file is text, at most 64 KiB,
//!    with an absolute `home` (`pyvenv_cfg`);
//! 2. `home`, resolved to its real path, exists, lies outside the projects folder and is the
//!    folder of an interpreter the operator chose (`--python`, `--allow-python`), whose version
//!    agrees with the venv's own `version` line when it has one (`interpreters`);
//! 3. a run then execs that interpreter — never the venv's `bin/python`, which may be anything a
//!    script wrote — with argv\[0\] the venv's `bin/python` as the run sees it: CPython's
//!    `getpath` finds `pyvenv.cfg` beside argv\[0\]'s folder (or one above) and adds the venv's
//!    site-packages (checked with Debian's 3.11 and pyenv's builds).
//!
//! What CPython then reads of `pyvenv.cfg` is read inside the sandbox. Should a run rewrite it
//! after the check (it is read-only to a run whose path holds it, not to runs elsewhere), what
//! starts is still the validated interpreter under every layer; a rewritten `home` changes only
//! which Python files that confined interpreter reads, which any run can do already by writing
//! the project's modules.
//!
//! A checked venv is cached by its folder and checked again when its `pyvenv.cfg`'s (device,
//! inode, size, modification time) change. Nothing here starts a process but the interpreters'
//! one question each (see `interpreters`); a venv's own paths are computed, never asked of it.

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use pyrun_sandbox::SandboxError;

use super::paths::open_beneath;

mod discovery;
mod interpreters;
mod pyvenv_cfg;

pub use discovery::{python_facts, python_read_paths, resolve_python, PythonError, PythonFacts};
pub use interpreters::{Interpreter, Interpreters};
pub use pyvenv_cfg::{CfgProblem, PyvenvCfg, MAX_BYTES as PYVENV_CFG_MAX_BYTES};

/// The names a venv folder may have, in the order they are looked for at each level.
pub const VENV_NAMES: [&str; 2] = [".venv", "venv"];
/// Venvs kept checked at most; the cache starts over beyond (runs can make many).
const MAX_CACHED: usize = 256;

/// The environment a run uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonEnv {
    /// The (trusted) base interpreter that is exec'd: `--python` or an `--allow-python`.
    pub interpreter: PathBuf,
    /// `None`: the interpreter's own packages, as without venvs.
    pub venv: Option<Venv>,
    /// The interpreter's version, e.g. `3.11.2`.
    pub version: String,
    /// Where its packages are, in the order Python looks: the venv's site-packages (then the base
    /// interpreter's, with `include-system-site-packages`), or the interpreter's own.
    pub site_packages: Vec<PathBuf>,
}

impl PythonEnv {
    /// The venv's `bin/python` on the host (Windows: `Scripts\python.exe`): the argv\[0\] a run
    /// of this environment is given, in the run's view. `None` without a venv.
    pub fn argv0(&self) -> Option<PathBuf> {
        let venv = self.venv.as_ref()?;
        Some(if cfg!(windows) {
            venv.dir.join("Scripts").join("python.exe")
        } else {
            venv.dir.join("bin").join("python")
        })
    }
}

/// A checked virtual environment inside the projects folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Venv {
    /// Its folder on the host, canonical.
    pub dir: PathBuf,
    /// Its folder relative to the projects folder, `/` separated: safe to show.
    pub relative: String,
    /// Its own site-packages folders that exist (canonical, inside `dir`).
    pub site_packages: Vec<PathBuf>,
}

/// Why a folder's environment cannot be used. `venv` is relative to the projects folder; `home`
/// (a host path) is for the log only.
#[derive(Debug, Clone, thiserror::Error)]
pub enum EnvError {
    #[error("the virtual environment '{venv}' is a symbolic link")]
    Link { venv: String },
    #[error("the virtual environment '{venv}': its pyvenv.cfg {problem}")]
    BadConfig { venv: String, problem: CfgProblem },
    #[error("the virtual environment '{venv}': its base interpreter's folder {} does not exist", home.display())]
    HomeGone { venv: String, home: PathBuf },
    #[error("the virtual environment '{venv}': its base interpreter's folder {} lies inside the projects folder", home.display())]
    HomeInside { venv: String, home: PathBuf },
    #[error("the virtual environment '{venv}': {} holds no interpreter this server allows; {}", home.display(), allow_with(.base.allow.as_deref()))]
    NotAllowed {
        venv: String,
        home: PathBuf,
        base: Box<ForeignBase>,
    },
    #[error("the virtual environment '{venv}' was made with Python {made_with}, but the allowed interpreter in {} is Python {have}", home.display())]
    OtherVersion {
        venv: String,
        home: PathBuf,
        made_with: String,
        have: String,
    },
    #[error("the interpreter could not be asked what it is: {0}")]
    Interpreter(Arc<SandboxError>),
}

/// A venv's base interpreter the server does not run: what the venv wants, what the server runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignBase {
    /// The version the venv was made with, as its `pyvenv.cfg` says (`3.12.1`), if it does.
    pub wants_version: Option<String>,
    /// The file name of the interpreter that made it (`python3.12`), if its `pyvenv.cfg` says.
    pub wants_name: Option<String>,
    /// What the server runs, each `3.11.2 (python3)`: versions and file names, no folder.
    pub runs: Vec<String>,
    /// The interpreter in `home` that `--allow-python` would take (a host path: log only).
    pub allow: Option<PathBuf>,
}

/// The setting that would allow a venv's base interpreter, for the log.
fn allow_with(interpreter: Option<&Path>) -> String {
    match interpreter {
        Some(path) => format!(
            "to allow it, start the server with --allow-python {} (PYRUN_ALLOW_PYTHON)",
            path.display()
        ),
        None => "that folder holds no python3 or python to allow with --allow-python".to_owned(),
    }
}

/// The interpreter a venv's `home` folder holds, for the setting that would allow it: the one its
/// `pyvenv.cfg` names (`executable`), else `python3.X` of its version, `python3`, `python`
/// (`python.exe` on Windows).
pub fn base_interpreter(home: &Path, cfg: &PyvenvCfg) -> Option<PathBuf> {
    let mut names: Vec<String> = cfg.interpreter_name.iter().cloned().collect();
    if let Some(version) = &cfg.version {
        names.push(format!("python{version}"));
    }
    names.extend(["python3", "python", "python.exe"].map(String::from));
    names
        .into_iter()
        .map(|name| home.join(name))
        .find(|path| path.is_file())
}

/// What identifies one version of a `pyvenv.cfg`: a change of any means "check again".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

impl Stamp {
    fn of(meta: &fs::Metadata) -> Self {
        #[cfg(unix)]
        let (dev, ino) = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino())
        };
        #[cfg(not(unix))]
        let (dev, ino) = (0, 0);
        Self {
            dev,
            ino,
            len: meta.len(),
            modified: meta.modified().ok(),
        }
    }
}

/// Every environment runs may use: built once (in `App`), shared.
#[derive(Debug)]
pub struct PythonEnvs {
    /// The projects folder, canonical.
    projects: PathBuf,
    interpreters: Interpreters,
    checked: Mutex<HashMap<PathBuf, (Stamp, Arc<PythonEnv>)>>,
    default: std::sync::OnceLock<Arc<PythonEnv>>,
}

impl PythonEnvs {
    /// `projects` is the canonical projects folder; `python` the resolved `--python`; `allowed`
    /// the resolved `--allow-python` interpreters. Starts nothing.
    pub fn new(projects: &Path, python: &Path, allowed: &[PathBuf]) -> Self {
        Self {
            projects: projects.to_path_buf(),
            interpreters: Interpreters::new(python, allowed),
            checked: Mutex::new(HashMap::new()),
            default: std::sync::OnceLock::new(),
        }
    }

    /// The allowed interpreters (asked on first use; blocking then).
    pub fn interpreters(&self) -> &Interpreters {
        &self.interpreters
    }

    /// The server's own interpreter, without a venv.
    pub fn default_env(&self) -> Result<Arc<PythonEnv>, EnvError> {
        if let Some(env) = self.default.get() {
            return Ok(env.clone());
        }
        let interpreters = self.interpreters.get().map_err(EnvError::Interpreter)?;
        let Some(first) = interpreters.first() else {
            return Err(EnvError::Interpreter(Arc::new(SandboxError::ProbeLost)));
        };
        let env = Arc::new(PythonEnv {
            interpreter: first.path.clone(),
            venv: None,
            version: first.facts.version.clone(),
            site_packages: first.facts.site_packages.clone(),
        });
        Ok(self.default.get_or_init(|| env).clone())
    }

    /// The environment a run in `dir` (a canonical host folder inside the projects folder) uses:
    /// the nearest checked venv between `dir` and the projects folder, or the default. A folder
    /// outside the projects folder (a run's scratch) gets the projects folder's own.
    ///
    /// Windows: always the default. Its CPython finds a venv from the program's own location,
    /// not argv\[0\], and the venv's `python.exe` is what a script may have written.
    pub fn for_dir(&self, dir: &Path) -> Result<Arc<PythonEnv>, EnvError> {
        if cfg!(windows) {
            return self.default_env();
        }
        let dir = if dir.starts_with(&self.projects) {
            dir
        } else {
            self.projects.as_path()
        };
        for level in dir.ancestors() {
            for name in VENV_NAMES {
                if let Some(env) = self.venv_at(&level.join(name))? {
                    return Ok(env);
                }
            }
            if level == self.projects {
                break;
            }
        }
        self.default_env()
    }

    /// The environment of the project folder `dir`'s own `.venv` (an install's target), `None`
    /// when it has none.
    pub fn project_venv(&self, dir: &Path) -> Result<Option<Arc<PythonEnv>>, EnvError> {
        self.venv_at(&dir.join(VENV_NAMES[0]))
    }

    /// The checked environment of the venv at `candidate`, `None` when there is no venv there (no
    /// such folder, or no `pyvenv.cfg` in it).
    fn venv_at(&self, candidate: &Path) -> Result<Option<Arc<PythonEnv>>, EnvError> {
        let Ok(meta) = fs::symlink_metadata(candidate) else {
            return Ok(None);
        };
        let cfg = candidate.join("pyvenv.cfg");
        let venv = || self.relative(candidate);
        if meta.is_symlink() {
            // A link that leads to a venv is refused rather than silently passed over.
            return if cfg.exists() {
                Err(EnvError::Link { venv: venv() })
            } else {
                Ok(None)
            };
        }
        if !meta.is_dir() {
            return Ok(None);
        }
        let cfg_meta = match fs::symlink_metadata(&cfg) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(EnvError::BadConfig {
                    venv: venv(),
                    problem: CfgProblem::Unreadable(e.kind()),
                })
            }
        };
        let stamp = Stamp::of(&cfg_meta);
        if let Some((seen, env)) = self.lock().get(candidate) {
            if *seen == stamp {
                return Ok(Some(env.clone()));
            }
        }
        let (bytes, stamp) =
            read_cfg(&self.projects, &cfg).map_err(|problem| EnvError::BadConfig {
                venv: venv(),
                problem,
            })?;
        let env = Arc::new(self.check(candidate, &bytes)?);
        let mut checked = self.lock();
        if checked.len() >= MAX_CACHED {
            checked.clear();
        }
        checked.insert(candidate.to_path_buf(), (stamp, env.clone()));
        Ok(Some(env))
    }

    /// Steps 1 and 2 of the module's doc, for the venv at `dir` whose `pyvenv.cfg` holds `bytes`.
    fn check(&self, dir: &Path, bytes: &[u8]) -> Result<PythonEnv, EnvError> {
        let venv = self.relative(dir);
        let cfg = PyvenvCfg::parse(bytes).map_err(|problem| EnvError::BadConfig {
            venv: venv.clone(),
            problem,
        })?;
        let home = PathBuf::from(&cfg.home);
        let Ok(real_home) = dunce::canonicalize(&home) else {
            return Err(EnvError::HomeGone { venv, home });
        };
        if real_home.starts_with(&self.projects) {
            return Err(EnvError::HomeInside { venv, home });
        }
        let interpreters = self.interpreters.get().map_err(EnvError::Interpreter)?;
        let at_home: Vec<&Arc<Interpreter>> = interpreters
            .iter()
            .filter(|i| i.homes.contains(&real_home))
            .collect();
        let Some(first) = at_home.first() else {
            let base = ForeignBase {
                allow: base_interpreter(&real_home, &cfg),
                wants_version: cfg.version_text.or(cfg.version),
                wants_name: cfg.interpreter_name,
                runs: interpreters.iter().map(|i| described(i)).collect(),
            };
            return Err(EnvError::NotAllowed {
                venv,
                home,
                base: Box::new(base),
            });
        };
        let chosen = match &cfg.version {
            None => first,
            Some(made_with) => match at_home.iter().find(|i| &i.major_minor == made_with) {
                Some(found) => found,
                None => {
                    return Err(EnvError::OtherVersion {
                        venv,
                        home,
                        made_with: made_with.clone(),
                        have: first.major_minor.clone(),
                    })
                }
            },
        };
        let own = venv_site_packages(dir, &chosen.major_minor);
        let mut site_packages = own.clone();
        if cfg.system_site_packages {
            site_packages.extend(chosen.facts.site_packages.iter().cloned());
        }
        Ok(PythonEnv {
            interpreter: chosen.path.clone(),
            venv: Some(Venv {
                dir: dir.to_path_buf(),
                relative: venv,
                site_packages: own,
            }),
            version: chosen.facts.version.clone(),
            site_packages,
        })
    }

    fn relative(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.projects).unwrap_or(Path::new(""));
        let parts: Vec<_> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        parts.join("/")
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, (Stamp, Arc<PythonEnv>)>> {
        // The map holds plain data: one a panicking holder left is still whole.
        self.checked
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// `3.11.2 (python3)`: an interpreter as a client may read of it (no folder).
fn described(interpreter: &Interpreter) -> String {
    let name = interpreter
        .path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    format!("{} ({name})", interpreter.facts.version)
}

/// The venv's own site-packages for Python `major_minor` that exist, canonical and inside `dir`
/// (a link out of the venv is left out: the server reads what is listed there).
fn venv_site_packages(dir: &Path, major_minor: &str) -> Vec<PathBuf> {
    let candidates = if cfg!(windows) {
        vec![dir.join("Lib").join("site-packages")]
    } else {
        vec![dir
            .join("lib")
            .join(format!("python{major_minor}"))
            .join("site-packages")]
    };
    candidates
        .into_iter()
        .filter_map(|p| dunce::canonicalize(p).ok())
        .filter(|p| p.starts_with(dir) && p.is_dir())
        .collect()
}

/// Reads a `pyvenv.cfg` beneath the projects folder without following a link (none at all on
/// the way, on Linux) or blocking on a FIFO, at most [`pyvenv_cfg::MAX_BYTES`] (one more to tell
/// it is larger), with the stamp of what was read.
fn read_cfg(projects: &Path, path: &Path) -> Result<(Vec<u8>, Stamp), CfgProblem> {
    let relative = path.strip_prefix(projects).unwrap_or(path);
    let file = open_beneath(projects, relative).map_err(|e| match e.raw_os_error() {
        #[cfg(unix)]
        Some(libc::ELOOP) | Some(libc::EXDEV) => CfgProblem::NotAFile,
        _ => CfgProblem::Unreadable(e.kind()),
    })?;
    let meta = file
        .metadata()
        .map_err(|e| CfgProblem::Unreadable(e.kind()))?;
    if !meta.is_file() {
        return Err(CfgProblem::NotAFile);
    }
    let mut bytes = Vec::new();
    file.take(pyvenv_cfg::MAX_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CfgProblem::Unreadable(e.kind()))?;
    Ok((bytes, Stamp::of(&meta)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python() -> PathBuf {
        resolve_python(None).expect("python3 installed")
    }

    fn venv(dir: &Path, cfg: &str) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("pyvenv.cfg"), cfg).unwrap();
    }

    #[test]
    fn the_nearest_checked_venv_wins_and_is_cached_until_its_cfg_changes() {
        let projects = tempfile::tempdir().unwrap();
        let root = dunce::canonicalize(projects.path()).unwrap();
        let python = python();
        let home = dunce::canonicalize(python.parent().unwrap()).unwrap();
        let envs = PythonEnvs::new(&root, &python, &[]);
        let deep = root.join("a/b");
        fs::create_dir_all(&deep).unwrap();
        // No venv: the default interpreter.
        let plain = envs.for_dir(&deep).unwrap();
        assert_eq!(plain.venv, None);
        assert_eq!(plain.interpreter, python);
        venv(&root.join(".venv"), &format!("home = {}\n", home.display()));
        venv(
            &root.join("a/venv"),
            &format!("home = {}\n", home.display()),
        );
        // A folder named like a venv without pyvenv.cfg is no venv.
        fs::create_dir_all(root.join("a/b/.venv")).unwrap();
        let env = envs.for_dir(&deep).unwrap();
        assert_eq!(env.venv.as_ref().unwrap().relative, "a/venv");
        assert_eq!(env.argv0(), Some(root.join("a/venv/bin/python")));
        assert_eq!(
            envs.for_dir(&root).unwrap().venv.as_ref().unwrap().relative,
            ".venv"
        );
        // Cached: the same Arc until pyvenv.cfg changes.
        assert!(Arc::ptr_eq(&env, &envs.for_dir(&deep).unwrap()));
        fs::write(root.join("a/venv/pyvenv.cfg"), "garbage, longer now\n").unwrap();
        let err = envs.for_dir(&deep).unwrap_err();
        assert!(
            matches!(err, EnvError::BadConfig { ref venv, problem: CfgProblem::NoHome } if venv == "a/venv"),
            "{err}"
        );
    }

    #[test]
    fn a_home_inside_the_projects_folder_gone_or_not_allowed_is_refused() {
        let projects = tempfile::tempdir().unwrap();
        let root = dunce::canonicalize(projects.path()).unwrap();
        let envs = PythonEnvs::new(&root, &python(), &[]);
        fs::create_dir_all(root.join("evil")).unwrap();
        let home = python().parent().unwrap().display().to_string();
        let cases: [(&str, String); 4] = [
            ("in", format!("home = {}\n", root.join("evil").display())),
            ("gone", "home = /no/such/python/bin\n".to_owned()),
            (
                "other",
                format!("home = {}\n", root.parent().unwrap().display()),
            ),
            // The right folder, but made by a Python no allowed interpreter is.
            ("version", format!("home = {home}\nversion = 2.7.18\n")),
        ];
        for (name, cfg) in &cases {
            venv(&root.join(name).join(".venv"), cfg);
        }
        let err = |name: &str| envs.for_dir(&root.join(name)).unwrap_err();
        assert!(
            matches!(err("in"), EnvError::HomeInside { .. }),
            "{}",
            err("in")
        );
        assert!(
            matches!(err("gone"), EnvError::HomeGone { .. }),
            "{}",
            err("gone")
        );
        assert!(
            matches!(err("other"), EnvError::NotAllowed { .. }),
            "{}",
            err("other")
        );
        assert!(
            matches!(err("version"), EnvError::OtherVersion { ref made_with, .. } if made_with == "2.7"),
            "{}",
            err("version")
        );
    }

    #[cfg(unix)]
    #[test]
    fn links_are_refused_not_followed() {
        let projects = tempfile::tempdir().unwrap();
        let root = dunce::canonicalize(projects.path()).unwrap();
        let python = python();
        let envs = PythonEnvs::new(&root, &python, &[]);
        let outside = tempfile::tempdir().unwrap();
        let home = python.parent().unwrap().display().to_string();
        venv(outside.path(), &format!("home = {home}\n"));
        fs::create_dir_all(root.join("a")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("a/.venv")).unwrap();
        assert!(matches!(
            envs.for_dir(&root.join("a")).unwrap_err(),
            EnvError::Link { .. }
        ));
        fs::create_dir_all(root.join("b/.venv")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("pyvenv.cfg"),
            root.join("b/.venv/pyvenv.cfg"),
        )
        .unwrap();
        assert!(matches!(
            envs.for_dir(&root.join("b")).unwrap_err(),
            EnvError::BadConfig {
                problem: CfgProblem::NotAFile,
                ..
            }
        ));
    }
}
