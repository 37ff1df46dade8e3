//! Whether a project's `uv.lock` may be synced (`install_packages {project}` with uv), and the
//! minimal `pyproject.toml` the sync gets in its place of the project's own. Pure: no I/O, no
//! process.
//!
//! A lock is untrusted input (a run may write it), and `uv sync --frozen` downloads exactly what
//! it names: each package's `source` and its `sdist`/`wheels` URLs, without asking the index
//! again. So before anything runs, [`check_lock`] parses it (TOML, at most [`MAX_LOCK_BYTES`] and
//! [`MAX_LOCKED_PACKAGES`] packages, lock `version = 1`) and refuses it unless every
//! `[[package]]` is either
//! - from the operator's index: `source = { registry = "<--package-index>" }` (compared without
//!   a trailing slash), every `sdist`/`wheels` entry with a `url` that is `https` (or `http` when
//!   the index is), without credentials, on the index's port (the install profile allows TCP to
//!   that port only anyway; this makes a lock that points elsewhere a clear refusal instead of a
//!   failed connection), and no local `path`; a name and version that pass the requirement
//!   checker (they are shown to the caller as `name==version`);
//! - or the project itself, `source = { editable = "." }` or `{ virtual = "." }` (never
//!   installed: the sync runs with `--no-install-project`), exactly once.
//!
//! Git, URL, path and directory sources, other registries and workspace members are refused,
//! naming the package.
//!
//! The project's `pyproject.toml` is untrusted too, and uv reads `[tool.uv]` from it (indexes,
//! sources, find-links, build settings). It never reaches uv: [`project_name`] reads only its
//! `[project].name`, which must be the lock's own project, and the sync gets
//! [`CheckedLock::pyproject`] instead: that name, a placeholder version, the lock's
//! `requires-python` and `[tool.uv.workspace] members = []` (uv would otherwise look in the
//! folders above the scratch for a workspace and sync its lock instead), written by the TOML
//! serializer (so no text of the lock can add a table).

use serde::{Deserialize, Serialize};

use super::package_index::PackageIndex;
use super::requirement::{parse_requirement, Requirement};

/// The largest `uv.lock` read, in bytes.
pub const MAX_LOCK_BYTES: u64 = 4 << 20;
/// The largest `pyproject.toml` read, in bytes.
pub const MAX_PYPROJECT_BYTES: u64 = 1 << 20;
/// The most `[[package]]` entries a synced lock may have.
pub const MAX_LOCKED_PACKAGES: usize = 2000;
/// The longest `requires-python` carried over, in bytes.
const MAX_REQUIRES_PYTHON_BYTES: usize = 200;

/// A lock that passed [`check_lock`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedLock {
    /// The lock's text, exactly as checked: what the sync gets.
    text: String,
    /// The project's name as the lock has it.
    project: String,
    requires_python: Option<String>,
    /// Every package from the index, as `name==version`.
    locked: Vec<Requirement>,
}

/// Why a lock (or its pyproject) is not synced. Names come from the lock: the serve layer
/// quotes them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockError {
    #[error("the lock is not valid TOML: {0}")]
    NotToml(String),
    #[error("the lock's version is {0:?}, not 1")]
    Version(Option<i64>),
    #[error("the lock has {0} packages, more than {MAX_LOCKED_PACKAGES}")]
    TooManyPackages(usize),
    #[error("package {package:?} comes from a {kind} source, not the server's package index")]
    Source { package: String, kind: String },
    #[error("package {package:?} comes from another package index")]
    OtherIndex { package: String },
    #[error("package {package:?} has a download that is not a URL of the index's scheme and port")]
    Download { package: String },
    #[error("package {package:?} has a name or version that is not a plain one")]
    BadEntry { package: String },
    #[error("the lock has no entry for the project itself")]
    NoProject,
    #[error("the lock has more than one entry for the project itself")]
    TwoProjects,
    #[error("the lock's requires-python is malformed")]
    RequiresPython,
    #[error("the pyproject.toml is not valid TOML: {0}")]
    PyprojectNotToml(String),
    #[error("the pyproject.toml has no [project] name")]
    NoProjectName,
    #[error("the pyproject.toml names project {pyproject:?}, the lock {lock:?}")]
    OtherProject { pyproject: String, lock: String },
}

/// `uv.lock`, the parts read here; uv's other keys (`revision`, `resolution-markers`,
/// `[manifest]`, dependencies...) download nothing by themselves.
#[derive(Debug, Deserialize)]
struct LockFile {
    version: Option<i64>,
    #[serde(rename = "requires-python")]
    requires_python: Option<String>,
    #[serde(default)]
    package: Vec<LockedPackage>,
}

#[derive(Debug, Deserialize)]
struct LockedPackage {
    name: String,
    version: Option<String>,
    source: Option<toml::Table>,
    sdist: Option<toml::Table>,
    #[serde(default)]
    wheels: Vec<toml::Table>,
}

/// The parts of `pyproject.toml` read here: the name only.
#[derive(Debug, Deserialize)]
struct PyProject {
    project: Option<ProjectTable>,
}

#[derive(Debug, Deserialize)]
struct ProjectTable {
    name: Option<String>,
}

/// The pyproject the sync gets.
#[derive(Debug, Serialize)]
struct MinimalPyProject<'a> {
    project: MinimalProject<'a>,
    tool: MinimalTool,
}

/// `[tool.uv.workspace] members = []`: the scratch is its own workspace root, so uv looks in no
/// folder above it for a workspace (whose `pyproject.toml` and `uv.lock` it would use instead).
#[derive(Debug, Serialize)]
struct MinimalTool {
    uv: MinimalUv,
}

#[derive(Debug, Serialize)]
struct MinimalUv {
    workspace: MinimalWorkspace,
}

#[derive(Debug, Serialize)]
struct MinimalWorkspace {
    members: [&'static str; 0],
}

#[derive(Debug, Serialize)]
struct MinimalProject<'a> {
    name: &'a str,
    version: &'a str,
    #[serde(rename = "requires-python", skip_serializing_if = "Option::is_none")]
    requires_python: Option<&'a str>,
}

impl CheckedLock {
    /// The lock's text, exactly as checked.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The project's name as the lock has it.
    pub fn project(&self) -> &str {
        &self.project
    }

    /// Every package from the index, as `name==version`.
    pub fn locked(&self) -> &[Requirement] {
        &self.locked
    }

    /// The `pyproject.toml` the sync runs with: the project's name, a placeholder version (a
    /// frozen sync that does not install the project never reads it), the lock's
    /// `requires-python` (uv checks the interpreter against it) and an empty workspace of its
    /// own (uv looks for no workspace above the scratch).
    pub fn pyproject(&self) -> String {
        let minimal = MinimalPyProject {
            project: MinimalProject {
                name: &self.project,
                version: "0",
                requires_python: self.requires_python.as_deref(),
            },
            tool: MinimalTool {
                uv: MinimalUv {
                    workspace: MinimalWorkspace { members: [] },
                },
            },
        };
        // Strings and a table of them always serialize.
        toml::to_string(&minimal).unwrap_or_default()
    }
}

/// Checks `text` (a `uv.lock`) against `index`; see the module header.
pub fn check_lock(text: &str, index: &PackageIndex) -> Result<CheckedLock, LockError> {
    let lock: LockFile =
        toml::from_str(text).map_err(|e| LockError::NotToml(e.message().into()))?;
    if lock.version != Some(1) {
        return Err(LockError::Version(lock.version));
    }
    if lock.package.len() > MAX_LOCKED_PACKAGES {
        return Err(LockError::TooManyPackages(lock.package.len()));
    }
    let requires_python = match lock.requires_python {
        Some(text) if !is_plain_requires_python(&text) => return Err(LockError::RequiresPython),
        other => other,
    };
    let mut project = None;
    let mut locked = Vec::new();
    for package in &lock.package {
        match source_of(package, index)? {
            Source::Project => {
                if project.replace(package.name.clone()).is_some() {
                    return Err(LockError::TwoProjects);
                }
            }
            Source::Index => locked.push(pinned(package)?),
        }
        check_downloads(package, index)?;
    }
    Ok(CheckedLock {
        text: text.to_owned(),
        project: project.ok_or(LockError::NoProject)?,
        requires_python,
        locked,
    })
}

/// `[project].name` of `text` (a `pyproject.toml`), which must be `lock`'s project.
pub fn project_name(text: &str, lock: &CheckedLock) -> Result<String, LockError> {
    let parsed: PyProject =
        toml::from_str(text).map_err(|e| LockError::PyprojectNotToml(e.message().into()))?;
    let name = parsed
        .project
        .and_then(|p| p.name)
        .ok_or(LockError::NoProjectName)?;
    if normalized(&name) != normalized(&lock.project) {
        return Err(LockError::OtherProject {
            pyproject: name,
            lock: lock.project.clone(),
        });
    }
    Ok(name)
}

enum Source {
    /// The project itself (`.`).
    Project,
    /// The operator's index.
    Index,
}

fn source_of(package: &LockedPackage, index: &PackageIndex) -> Result<Source, LockError> {
    let refused = |kind: &str| LockError::Source {
        package: package.name.clone(),
        kind: kind.to_owned(),
    };
    let source = package.source.as_ref().ok_or_else(|| refused("missing"))?;
    let mut entries = source.iter();
    let (Some((kind, value)), None) = (entries.next(), entries.next()) else {
        return Err(refused("malformed"));
    };
    match (kind.as_str(), value.as_str()) {
        ("registry", Some(url)) if without_slash(url) == without_slash(index.url()) => {
            Ok(Source::Index)
        }
        ("registry", _) => Err(LockError::OtherIndex {
            package: package.name.clone(),
        }),
        ("editable" | "virtual", Some(".")) => Ok(Source::Project),
        (kind, _) => Err(refused(kind)),
    }
}

/// Every `sdist` and `wheels` entry downloads from a URL of the index's scheme and port.
fn check_downloads(package: &LockedPackage, index: &PackageIndex) -> Result<(), LockError> {
    let downloads = package.sdist.iter().chain(&package.wheels);
    for entry in downloads {
        let ok = !entry.contains_key("path")
            && entry
                .get("url")
                .and_then(toml::Value::as_str)
                .is_some_and(|url| is_index_download(url, index));
        if !ok {
            return Err(LockError::Download {
                package: package.name.clone(),
            });
        }
    }
    Ok(())
}

/// `https` (or `http` when the index is), a host, no credentials, the index's port.
fn is_index_download(text: &str, index: &PackageIndex) -> bool {
    let Ok(url) = url::Url::parse(text) else {
        return false;
    };
    let index_is_http = index.url().starts_with("http:");
    let scheme_ok = url.scheme() == "https" || (url.scheme() == "http" && index_is_http);
    scheme_ok
        && url.host_str().is_some_and(|h| !h.is_empty())
        && url.username().is_empty()
        && url.password().is_none()
        && url.port_or_known_default() == Some(index.port())
}

/// `name==version`, checked as a requirement (a plain name and a plain version).
fn pinned(package: &LockedPackage) -> Result<Requirement, LockError> {
    let bad = || LockError::BadEntry {
        package: package.name.clone(),
    };
    let version = package.version.as_deref().ok_or_else(bad)?;
    let requirement =
        parse_requirement(&format!("{}=={version}", package.name)).map_err(|_| bad())?;
    if requirement.name() != package.name {
        return Err(bad());
    }
    Ok(requirement)
}

/// Specifier characters only (`>=3.9, <4`), within its length.
fn is_plain_requires_python(text: &str) -> bool {
    text.len() <= MAX_REQUIRES_PYTHON_BYTES
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || " .,<>=!~*+".contains(c))
}

fn without_slash(url: &str) -> &str {
    url.trim_end_matches('/')
}

/// PEP 503 normalization: lower case, runs of `-`, `_`, `.` as one `-`.
fn normalized(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut in_run = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !in_run {
                out.push('-');
            }
            in_run = true;
        } else {
            out.push(c.to_ascii_lowercase());
            in_run = false;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDEX: &str = "http://127.0.0.1:8765/simple/";

    fn index() -> PackageIndex {
        PackageIndex::parse(INDEX).unwrap()
    }

    /// A lock as `uv lock` writes it for a project that needs `pyrunalpha` (which needs
    /// `pyrunbeta`), with `extra` appended.
    fn lock(extra: &str) -> String {
        format!(
            r#"version = 1
revision = 3
requires-python = ">=3.8"

[[package]]
name = "app"
version = "0.1.0"
source = {{ virtual = "." }}
dependencies = [
    {{ name = "pyrunalpha" }},
]

[package.metadata]
requires-dist = [{{ name = "pyrunalpha" }}]

[[package]]
name = "pyrunalpha"
version = "1.0"
source = {{ registry = "http://127.0.0.1:8765/simple/" }}
dependencies = [
    {{ name = "pyrunbeta" }},
]
wheels = [
    {{ url = "http://127.0.0.1:8765/files/pyrunalpha-1.0-py3-none-any.whl", hash = "sha256:0b74" }},
]

[[package]]
name = "pyrunbeta"
version = "1.0"
source = {{ registry = "http://127.0.0.1:8765/simple" }}
sdist = {{ url = "http://127.0.0.1:8765/files/pyrunbeta-1.0.tar.gz", hash = "sha256:00", size = 10 }}
wheels = [
    {{ url = "http://127.0.0.1:8765/files/pyrunbeta-1.0-py3-none-any.whl", hash = "sha256:eb28" }},
]
{extra}"#
        )
    }

    fn package(name: &str, source: &str, downloads: &str) -> String {
        format!(
            "\n[[package]]\nname = \"{name}\"\nversion = \"1.0\"\nsource = {source}\n{downloads}\n"
        )
    }

    fn refused(extra: &str) -> LockError {
        check_lock(&lock(extra), &index()).expect_err("the lock was accepted")
    }

    #[test]
    fn a_lock_of_the_index_passes_and_lists_its_packages_pinned() {
        let checked = check_lock(&lock(""), &index()).unwrap();
        assert_eq!(checked.project(), "app");
        let pinned: Vec<String> = checked.locked().iter().map(Requirement::to_arg).collect();
        assert_eq!(pinned, ["pyrunalpha==1.0", "pyrunbeta==1.0"]);
        // An editable project passes as a virtual one does.
        let editable = lock("").replace(r#"{ virtual = "." }"#, r#"{ editable = "." }"#);
        assert!(check_lock(&editable, &index()).is_ok());
        // The index named without its trailing slash is the same index.
        let bare = PackageIndex::parse("http://127.0.0.1:8765/simple").unwrap();
        assert!(check_lock(&lock(""), &bare).is_ok());
    }

    #[test]
    fn git_url_path_and_directory_sources_are_refused_naming_the_package() {
        for (kind, source) in [
            ("git", r#"{ git = "https://github.com/x/evil?rev=1#abc" }"#),
            (
                "url",
                r#"{ url = "http://127.0.0.1:8765/evil-1.0.tar.gz" }"#,
            ),
            ("path", r#"{ path = "/tmp/evil-1.0-py3-none-any.whl" }"#),
            ("directory", r#"{ directory = "../evil" }"#),
            ("editable", r#"{ editable = "../evil" }"#),
            ("virtual", r#"{ virtual = "packages/evil" }"#),
        ] {
            let error = refused(&package("evil", source, ""));
            assert_eq!(
                error,
                LockError::Source {
                    package: "evil".into(),
                    kind: kind.into()
                },
                "{source}"
            );
        }
        let missing = refused("\n[[package]]\nname = \"evil\"\nversion = \"1\"\n");
        assert!(matches!(missing, LockError::Source { .. }), "{missing:?}");
        let two = refused(&package(
            "evil",
            r#"{ registry = "http://127.0.0.1:8765/simple/", git = "https://x/y" }"#,
            "",
        ));
        assert!(matches!(two, LockError::Source { .. }), "{two:?}");
    }

    #[test]
    fn another_registry_is_refused_even_on_the_same_host() {
        for registry in [
            "https://pypi.org/simple",
            "http://127.0.0.1:8765/other/",
            "http://127.0.0.1:9999/simple/",
            "https://127.0.0.1:8765/simple/",
            "/srv/wheels",
        ] {
            let error = refused(&package(
                "evil",
                &format!("{{ registry = \"{registry}\" }}"),
                "",
            ));
            assert_eq!(
                error,
                LockError::OtherIndex {
                    package: "evil".into()
                },
                "{registry}"
            );
        }
    }

    #[test]
    fn downloads_off_the_index_port_with_credentials_or_local_paths_are_refused() {
        let source = r#"{ registry = "http://127.0.0.1:8765/simple/" }"#;
        for wheel in [
            r#"{ url = "http://127.0.0.1:22/evil-1.0-py3-none-any.whl" }"#,
            r#"{ url = "http://169.254.169.254/latest/meta-data" }"#,
            r#"{ url = "http://user:pw@127.0.0.1:8765/evil-1.0-py3-none-any.whl" }"#,
            r#"{ url = "file:///etc/passwd" }"#,
            r#"{ url = "ftp://127.0.0.1:8765/evil.whl" }"#,
            r#"{ path = "/tmp/evil-1.0-py3-none-any.whl" }"#,
            r#"{ url = "http://127.0.0.1:8765/e.whl", path = "/tmp/e.whl" }"#,
            r#"{ filename = "evil-1.0-py3-none-any.whl" }"#,
            r#"{ url = "not a url" }"#,
        ] {
            let error = refused(&package("evil", source, &format!("wheels = [{wheel}]")));
            assert_eq!(
                error,
                LockError::Download {
                    package: "evil".into()
                },
                "{wheel}"
            );
        }
        let sdist = refused(&package(
            "evil",
            source,
            r#"sdist = { url = "http://127.0.0.1:80/evil-1.0.tar.gz" }"#,
        ));
        assert!(matches!(sdist, LockError::Download { .. }), "{sdist:?}");
        // https downloads from an https index on its port pass; http ones do not.
        let https = PackageIndex::parse("https://pypi.org/simple").unwrap();
        let https_lock = |url: &str| {
            format!(
                "version = 1\n[[package]]\nname = \"app\"\nsource = {{ virtual = \".\" }}\n\
                 [[package]]\nname = \"six\"\nversion = \"1.17.0\"\n\
                 source = {{ registry = \"https://pypi.org/simple\" }}\n\
                 wheels = [{{ url = \"{url}\" }}]\n"
            )
        };
        let good = "https://files.pythonhosted.org/packages/b7/ce/six-1.17.0-py2.py3-none-any.whl";
        assert!(check_lock(&https_lock(good), &https).is_ok());
        let plain = "http://files.pythonhosted.org/packages/b7/ce/six-1.17.0-py2.py3-none-any.whl";
        assert!(check_lock(&https_lock(plain), &https).is_err());
    }

    #[test]
    fn a_lock_that_is_not_toml_of_another_version_or_too_big_is_refused() {
        assert!(matches!(
            check_lock("version = [", &index()),
            Err(LockError::NotToml(_))
        ));
        assert_eq!(
            check_lock(
                &lock("").replace("version = 1\n", "version = 2\n"),
                &index()
            ),
            Err(LockError::Version(Some(2)))
        );
        assert_eq!(
            check_lock("[[package]]\nname = \"x\"\n", &index()),
            Err(LockError::Version(None))
        );
        let many: String = (0..=MAX_LOCKED_PACKAGES)
            .map(|i| format!("[[package]]\nname = \"p{i}\"\n"))
            .collect();
        assert_eq!(
            check_lock(&format!("version = 1\n{many}"), &index()),
            Err(LockError::TooManyPackages(MAX_LOCKED_PACKAGES + 1))
        );
        assert_eq!(
            check_lock("version = 1\n", &index()),
            Err(LockError::NoProject)
        );
        let second_root = package("other", r#"{ editable = "." }"#, "");
        assert_eq!(refused(&second_root), LockError::TwoProjects);
    }

    #[test]
    fn deeply_nested_toml_is_refused_without_exhausting_the_stack() {
        let deep = format!(
            "version = 1\nx = {}{}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(matches!(
            check_lock(&deep, &index()),
            Err(LockError::NotToml(_))
        ));
        let deep_source = format!(
            "version = 1\n[[package]]\nname = \"a\"\nsource = {{ x = {}{} }}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert!(check_lock(&deep_source, &index()).is_err());
    }

    #[test]
    fn names_versions_and_requires_python_that_smuggle_text_are_refused() {
        let source = r#"{ registry = "http://127.0.0.1:8765/simple/" }"#;
        let odd_name = package("evil\\n[tool.uv]", source, "");
        assert!(matches!(refused(&odd_name), LockError::BadEntry { .. }));
        let odd_version = format!(
            "\n[[package]]\nname = \"evil\"\nversion = \"1.0 ; os_name == 'x'\"\nsource = {source}\n"
        );
        assert!(matches!(refused(&odd_version), LockError::BadEntry { .. }));
        let no_version = format!("\n[[package]]\nname = \"evil\"\nsource = {source}\n");
        assert!(matches!(refused(&no_version), LockError::BadEntry { .. }));
        let python = lock("").replace(
            "requires-python = \">=3.8\"",
            "requires-python = \">=3.8\\\"\\n[tool.uv]\\nindex-url = \\\"http://evil\"",
        );
        assert_eq!(
            check_lock(&python, &index()),
            Err(LockError::RequiresPython)
        );
    }

    #[test]
    fn the_pyproject_must_name_the_locks_project_and_only_its_name_is_kept() {
        let checked = check_lock(&lock(""), &index()).unwrap();
        let pyproject = "[project]\nname = \"App\"\nversion = \"2\"\ndependencies = [\"x @ git+https://e\"]\n\
             [tool.uv]\nindex-url = \"http://evil/simple\"\n[tool.uv.sources]\nx = { git = \"https://e\" }\n";
        assert_eq!(project_name(pyproject, &checked).unwrap(), "App");
        let minimal = checked.pyproject();
        assert_eq!(
            minimal,
            "[project]\nname = \"app\"\nversion = \"0\"\nrequires-python = \">=3.8\"\n\n\
             [tool.uv.workspace]\nmembers = []\n"
        );
        assert_eq!(
            project_name("[project]\nname = \"other\"\n", &checked),
            Err(LockError::OtherProject {
                pyproject: "other".into(),
                lock: "app".into()
            })
        );
        assert_eq!(
            project_name("[tool.uv]\n", &checked),
            Err(LockError::NoProjectName)
        );
        assert!(matches!(
            project_name("[project", &checked),
            Err(LockError::PyprojectNotToml(_))
        ));
        assert_eq!(normalized("My_Pkg..x"), "my-pkg-x");
    }
}
