//! Package installs (`install_packages`): off unless the operator turns them on, since they give
//! a caller the network (to the package index only) and a way to put code into a project's
//! `.venv`; the one index, whether source distributions may be built, uv, and the time limit.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pyrun_run::package_index::PackageIndex;

/// Largest `--install-timeout`: an hour.
const MAX_INSTALL_TIMEOUT_SECS: u64 = 3600;
/// Largest `--max-install-mb`: 1 TiB.
const MAX_INSTALL_MB: u64 = 1 << 20;

/// The flags, as given.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Package installs")]
pub struct InstallArgs {
    /// Offer the tool install_packages: makes a project's .venv and installs packages into it
    /// from --package-index, in a sandbox of its own that reaches only the index's port
    /// [default: off; the tool is not listed].
    #[arg(long, env = "PYRUN_ALLOW_INSTALL")]
    pub allow_install: bool,

    /// The package index installs use (PEP 503 simple API, http or https, no credentials); the
    /// only one: callers cannot name another.
    #[arg(long, env = "PYRUN_PACKAGE_INDEX", default_value = "https://pypi.org/simple", value_parser = parse_index)]
    pub package_index: PackageIndex,

    /// Let installs build source distributions (a build runs the package's own code, inside
    /// the install's sandbox) [default: wheels only].
    #[arg(long, env = "PYRUN_ALLOW_SDIST")]
    pub allow_sdist: bool,

    /// The uv program installs use, or `off` for pip always [default: uv on PATH; python -m
    /// venv and pip when there is none].
    #[arg(long, env = "PYRUN_UV", value_parser = super::home::path)]
    pub uv: Option<PathBuf>,

    /// Seconds one install (making the venv and installing) may take before it is killed.
    #[arg(long, env = "PYRUN_INSTALL_TIMEOUT", default_value_t = 300, value_parser = super::grammar::seconds(1, MAX_INSTALL_TIMEOUT_SECS))]
    pub install_timeout: u64,

    /// The most one install may write, in MB: what it unpacks into the venv, downloads and
    /// builds in its scratch, and adds to its cache. Wheels whose sizes (as the archive states
    /// them) pass it are refused before anything is unpacked; an install that writes past it is
    /// stopped and the venv put back. The default fits numpy, pandas and scikit-learn together
    /// (about 330 MB).
    #[arg(long, env = "PYRUN_MAX_INSTALL_MB", default_value_t = 1024, value_parser = super::grammar::mebibytes(1, MAX_INSTALL_MB))]
    pub max_install_mb: u64,
}

fn parse_index(text: &str) -> Result<PackageIndex, String> {
    PackageIndex::parse(text).map_err(|e| e.to_string())
}

/// The settings, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallConfig {
    /// Whether `install_packages` is offered at all.
    pub allowed: bool,
    pub index: PackageIndex,
    pub allow_sdist: bool,
    /// uv's real path; `None`: pip.
    pub uv: Option<PathBuf>,
    pub timeout: Duration,
    /// `--max-install-mb` in bytes.
    pub max_bytes: u64,
}

/// Why the install settings cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("--uv '{}' cannot be used: {reason}\nhint: pass the path of a uv executable (--uv, PYRUN_UV), or leave it out to use uv on PATH or pip", .path.display())]
pub struct BadUv {
    path: PathBuf,
    reason: String,
}

impl InstallArgs {
    /// `projects` is the projects folder: a uv inside it (scripts can replace it) is refused.
    pub(super) fn resolve(&self, projects: &Path) -> Result<InstallConfig, BadUv> {
        let projects = dunce::canonicalize(projects).unwrap_or_else(|_| projects.to_path_buf());
        let outside = |real: PathBuf| {
            if real.starts_with(&projects) {
                Err("it lies inside the projects folder, where scripts can replace it".to_owned())
            } else {
                Ok(real)
            }
        };
        let uv =
            match (&self.uv, self.allow_install) {
                (Some(off), _) if off.as_os_str() == "off" => None,
                (Some(path), _) => Some(real_program(path).and_then(outside).map_err(
                    |reason| BadUv {
                        path: path.clone(),
                        reason,
                    },
                )?),
                // Looked for only when installs are on.
                (None, true) => uv_on_path(&projects),
                (None, false) => None,
            };
        Ok(InstallConfig {
            allowed: self.allow_install,
            index: self.package_index.clone(),
            allow_sdist: self.allow_sdist,
            uv,
            timeout: Duration::from_secs(self.install_timeout),
            max_bytes: self.max_install_mb << 20,
        })
    }
}

/// The real path of an executable file.
fn real_program(path: &std::path::Path) -> Result<PathBuf, String> {
    let real = dunce::canonicalize(path).map_err(|e| e.to_string())?;
    let meta = std::fs::metadata(&real).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a file".into());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o111 == 0 {
            return Err("not executable".into());
        }
    }
    Ok(real)
}

/// `uv` in a folder of PATH, resolved to its real path; none inside the projects folder.
fn uv_on_path(projects: &Path) -> Option<PathBuf> {
    let name = if cfg!(windows) { "uv.exe" } else { "uv" };
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| dir.is_absolute())
        .filter_map(|dir| real_program(&dir.join(name)).ok())
        .find(|real| !real.starts_with(projects))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn args(uv: &Path) -> InstallArgs {
        InstallArgs {
            allow_install: true,
            package_index: PackageIndex::parse("https://pypi.org/simple").unwrap(),
            allow_sdist: false,
            uv: Some(uv.to_path_buf()),
            install_timeout: 300,
            max_install_mb: 1024,
        }
    }

    #[test]
    fn a_uv_inside_the_projects_folder_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().unwrap();
        let projects = base.path().join("projects");
        std::fs::create_dir_all(projects.join("tools")).unwrap();
        let inside = projects.join("tools/uv");
        let outside = base.path().join("uv");
        for uv in [&inside, &outside] {
            std::fs::write(uv, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(uv, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let refused = args(&inside).resolve(&projects).unwrap_err().to_string();
        assert!(refused.contains("inside the projects folder"), "{refused}");
        let taken = args(&outside).resolve(&projects).unwrap();
        assert_eq!(taken.uv, Some(dunce::canonicalize(&outside).unwrap()));
    }
}
