//! What a warm interpreter serves: the runs of one environment, working folder and caller. A
//! spare is started exactly as a run of its key would be (same placement, environment and
//! sandbox scope), so that handing it the run changes nothing but the start's timing.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::launch::Placement;
use crate::paths::ProjectDir;
use crate::python_env::PythonEnv;

/// Where the runs of a key work.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Place {
    /// A script of this folder, run in it.
    Script(PathBuf),
    /// Inline code run in this project folder, its imports from there first.
    Inline(PathBuf),
    /// Inline code run in its own scratch.
    Scratch,
}

/// One kind of run a spare can serve.
#[derive(Debug, Clone)]
pub(crate) struct WarmKey {
    python: Option<Arc<PythonEnv>>,
    place: Place,
    caller: Option<String>,
}

/// What the learned preload set is kept per: the environment and the caller (one caller's
/// packages are never imported ahead of another caller's run).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct LearnKey {
    interpreter: Option<PathBuf>,
    venv: Option<PathBuf>,
    caller: Option<String>,
}

impl WarmKey {
    pub(crate) fn new(python: Option<Arc<PythonEnv>>, place: Place, caller: Option<&str>) -> Self {
        Self {
            python,
            place,
            caller: caller.map(str::to_owned),
        }
    }

    /// The key of a resident run (a session) in `cwd`: inline code's kind.
    pub(crate) fn resident(
        python: Option<&PythonEnv>,
        cwd: Option<&ProjectDir>,
        caller: Option<&str>,
    ) -> Self {
        Self {
            python: python.map(|env| Arc::new(env.clone())),
            place: match cwd {
                Some(dir) => Place::Inline(dir.absolute().to_path_buf()),
                None => Place::Scratch,
            },
            caller: caller.map(str::to_owned),
        }
    }

    /// Where a run of this key works, with `scratch` its slot's folder: what `Placement::of`
    /// gives the runs themselves.
    pub(crate) fn placement<'a>(&'a self, scratch: &'a Path) -> Placement<'a> {
        match &self.place {
            Place::Script(dir) => Placement {
                cwd: Some(dir),
                project_dir: dir,
                import_dir: None,
            },
            Place::Inline(dir) => Placement {
                cwd: Some(dir),
                project_dir: dir,
                import_dir: Some(dir),
            },
            Place::Scratch => Placement {
                cwd: None,
                project_dir: scratch,
                import_dir: None,
            },
        }
    }

    /// Whether an interpreter of this key would run, as it starts, a file a run can write: a
    /// `sitecustomize` or `usercustomize` in inline code's project folder (it is on
    /// `PYTHONPATH`). Such a key gets no spare (it would run that code outside any call), and a
    /// spare made before the file came serves no run (it would miss it). Installed code (a
    /// venv's `.pth` files, its packages) is what a preload imports anyway, per caller.
    pub(crate) fn startup_runs_project_code(&self) -> bool {
        let Place::Inline(dir) = &self.place else {
            return false;
        };
        std::fs::read_dir(dir).is_ok_and(|entries| {
            entries.filter_map(Result::ok).any(|entry| {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                ["sitecustomize", "usercustomize"].iter().any(|hook| {
                    name.as_ref() == *hook
                        || name
                            .strip_prefix(hook)
                            .is_some_and(|rest| rest.starts_with('.'))
                })
            })
        })
    }

    pub(crate) fn python(&self) -> Option<&PythonEnv> {
        self.python.as_deref()
    }

    pub(crate) fn learn_key(&self) -> LearnKey {
        LearnKey {
            interpreter: self.python.as_ref().map(|env| env.interpreter.clone()),
            venv: self
                .python
                .as_ref()
                .and_then(|env| env.venv.as_ref())
                .map(|venv| venv.dir.clone()),
            caller: self.caller.clone(),
        }
    }

    /// What identifies the interpreter and packages the key's runs use: the interpreter's file,
    /// the venv's `pyvenv.cfg` and its site-packages folders (an install adds or removes entries there, which changes the
    /// folder's times). A spare whose stamp changed serves no run. `None`: one could not be read.
    pub(crate) fn stamp(&self) -> Option<Stamp> {
        let Some(env) = self.python() else {
            return Some(Stamp(Vec::new()));
        };
        let cfg = env.venv.as_ref().map(|venv| venv.dir.join("pyvenv.cfg"));
        let mut parts = vec![Part::of(&env.interpreter)?];
        for path in cfg.iter().chain(&env.site_packages) {
            parts.push(Part::of(path)?);
        }
        Some(Stamp(parts))
    }
}

impl PartialEq for WarmKey {
    fn eq(&self, other: &Self) -> bool {
        self.place == other.place && self.learn_key() == other.learn_key()
    }
}

impl Eq for WarmKey {}

impl Hash for WarmKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.place.hash(state);
        self.learn_key().hash(state);
    }
}

/// A snapshot of the files a key's packages depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stamp(Vec<Part>);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    ino: u64,
    len: u64,
    modified: Option<SystemTime>,
    changed: i64,
}

impl Part {
    fn of(path: &Path) -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::symlink_metadata(path).ok()?;
        Some(Self {
            ino: meta.ino(),
            len: meta.len(),
            modified: meta.modified().ok(),
            changed: meta.ctime_nsec() + meta.ctime() * 1_000_000_000,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folders_stamp_changes_when_an_entry_comes() {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path().join("site-packages");
        std::fs::create_dir(&site).unwrap();
        let interpreter = dir.path().join("python3");
        std::fs::write(&interpreter, b"").unwrap();
        let env = PythonEnv {
            interpreter,
            venv: None,
            version: "3.11.2".into(),
            site_packages: vec![site.clone()],
        };
        let key = WarmKey {
            python: Some(Arc::new(env)),
            place: Place::Scratch,
            caller: None,
        };
        let before = key.stamp().unwrap();
        assert_eq!(key.stamp().unwrap(), before);
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::create_dir(site.join("newpkg")).unwrap();
        assert_ne!(key.stamp().unwrap(), before);
        std::fs::remove_dir_all(&site).unwrap();
        assert_eq!(key.stamp(), None);
    }

    #[test]
    fn a_customize_hook_in_inline_codes_folder_is_project_code_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let key = |place| WarmKey {
            python: None,
            place,
            caller: None,
        };
        let inline = key(Place::Inline(dir.path().to_path_buf()));
        let script = key(Place::Script(dir.path().to_path_buf()));
        assert!(!inline.startup_runs_project_code());
        std::fs::write(dir.path().join("sitecustomize_notes.txt"), "").unwrap();
        assert!(!inline.startup_runs_project_code());
        for hook in [
            "sitecustomize.py",
            "usercustomize.cpython-311-x86_64-linux-gnu.so",
        ] {
            std::fs::write(dir.path().join(hook), "").unwrap();
            assert!(inline.startup_runs_project_code(), "{hook}");
            // A script's folder is not on the path when the interpreter starts.
            assert!(!script.startup_runs_project_code());
            std::fs::remove_file(dir.path().join(hook)).unwrap();
        }
        std::fs::create_dir(dir.path().join("sitecustomize")).unwrap();
        assert!(inline.startup_runs_project_code());
    }

    #[test]
    fn keys_differ_by_folder_and_caller_not_by_the_arc() {
        let env = |dir: &str| {
            Some(Arc::new(PythonEnv {
                interpreter: PathBuf::from("/usr/bin/python3"),
                venv: None,
                version: "3.11.2".into(),
                site_packages: vec![PathBuf::from(dir)],
            }))
        };
        let key = |python, place, caller: Option<&str>| WarmKey {
            python,
            place,
            caller: caller.map(str::to_owned),
        };
        let a = key(env("/x"), Place::Script("/p/a".into()), Some("alice"));
        assert_eq!(
            a,
            key(env("/x"), Place::Script("/p/a".into()), Some("alice"))
        );
        assert_ne!(
            a,
            key(env("/x"), Place::Script("/p/b".into()), Some("alice"))
        );
        assert_ne!(a, key(env("/x"), Place::Script("/p/a".into()), Some("bob")));
        assert_ne!(
            a,
            key(env("/x"), Place::Inline("/p/a".into()), Some("alice"))
        );
        assert_ne!(a, key(None, Place::Script("/p/a".into()), Some("alice")));
    }
}
