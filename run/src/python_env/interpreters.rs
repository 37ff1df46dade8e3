//! The interpreters a run may use: `--python` and each `--allow-python`, chosen by the operator
//! (trusted), each asked once what it is (`discovery::python_facts`: version, site-packages,
//! read trees) by whoever needs it first — the sandbox's probe in the background, or the first
//! run or listing.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use pyrun_sandbox::SandboxError;

use super::discovery::{python_facts, PythonFacts};

use super::pyvenv_cfg::major_minor;

/// One allowed interpreter and what it said about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interpreter {
    /// As resolved at start-up: the program runs exec.
    pub path: PathBuf,
    /// The real folders a venv's `home` may name for it: its own folder as given, and the
    /// folder of its real path (`/usr/bin/python3` is a link to `python3.11`; pyenv's links
    /// into its versions).
    pub homes: Vec<PathBuf>,
    /// `major.minor` of its version.
    pub major_minor: String,
    pub facts: PythonFacts,
}

/// The allowed interpreters, the default first; asked once.
#[derive(Debug)]
pub struct Interpreters {
    configured: Vec<PathBuf>,
    asked: OnceLock<Result<Vec<Arc<Interpreter>>, Arc<SandboxError>>>,
}

impl Interpreters {
    /// `default` (`--python`) then `allowed` (`--allow-python`), duplicates dropped; nothing is
    /// started yet.
    pub fn new(default: &Path, allowed: &[PathBuf]) -> Self {
        let mut configured = vec![default.to_path_buf()];
        for path in allowed {
            if !configured.contains(path) {
                configured.push(path.clone());
            }
        }
        Self {
            configured,
            asked: OnceLock::new(),
        }
    }

    /// Whether they were asked already (then [`Interpreters::get`] does not block).
    pub fn asked(&self) -> bool {
        self.asked.get().is_some()
    }

    /// Each interpreter, the default first, asking them on the first call (blocking: one start
    /// of each). The default must answer; an allowed one that does not is logged and left out
    /// (venvs made with it are refused).
    pub fn get(&self) -> Result<&[Arc<Interpreter>], Arc<SandboxError>> {
        let asked = self.asked.get_or_init(|| {
            let mut found = Vec::new();
            for (i, path) in self.configured.iter().enumerate() {
                match ask(path) {
                    Ok(interpreter) => found.push(Arc::new(interpreter)),
                    Err(e) if i == 0 => return Err(Arc::new(e)),
                    Err(e) => tracing::warn!(
                        "--allow-python {}: {e}; venvs made with it are refused",
                        path.display()
                    ),
                }
            }
            Ok(found)
        });
        match asked {
            Ok(found) => Ok(found),
            Err(e) => Err(e.clone()),
        }
    }

    /// The read trees of every allowed interpreter together, for the sandbox's rules.
    ///
    /// One union rather than rules keyed by interpreter: each is the operator's choice and holds
    /// only system files runs read anyway (a stdlib, site-packages), a slot's Landlock ruleset is
    /// made once and reused by runs of any environment, and a tree one interpreter reads does
    /// not let a run of another do more than read it.
    pub fn read_paths(&self) -> Result<Vec<PathBuf>, Arc<SandboxError>> {
        let mut paths: Vec<PathBuf> = Vec::new();
        for interpreter in self.get()? {
            for path in &interpreter.facts.read_paths {
                if !paths.iter().any(|kept| path.starts_with(kept)) {
                    paths.retain(|kept| !kept.starts_with(path));
                    paths.push(path.clone());
                }
            }
        }
        Ok(paths)
    }
}

fn ask(path: &Path) -> Result<Interpreter, SandboxError> {
    let facts = python_facts(path)?;
    let major_minor = major_minor(&facts.version).ok_or_else(|| SandboxError::PythonPaths {
        python: path.to_path_buf(),
        reason: format!("it reports an unusual version {:?}", facts.version),
    })?;
    let mut homes = Vec::new();
    let given = path.parent().and_then(|dir| dunce::canonicalize(dir).ok());
    let real = dunce::canonicalize(path)
        .ok()
        .and_then(|real| real.parent().map(Path::to_path_buf));
    for home in [given, real].into_iter().flatten() {
        if !homes.contains(&home) {
            homes.push(home);
        }
    }
    Ok(Interpreter {
        path: path.to_path_buf(),
        homes,
        major_minor,
        facts,
    })
}
