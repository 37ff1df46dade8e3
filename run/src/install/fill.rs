//! The offline steps, into the project's venv: the venv made when missing, then the
//! requirements (or a synced lock) installed into it, without the network. The project's venv
//! (and whatever a run planted in it) starts here only, as confined as a run.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::Arc;

use pyrun_sandbox::{Grant, Sandbox};

use super::fetch::WHEELS_DIR;
use super::snapshot::{self, VenvSnapshot};
use super::step::{Command, Steps};
use super::venv::{fd_path, UnfinishedVenv, VenvTarget};
use super::{InstallError, InstallStep, Installs, Wanted, VENV_NAME};
use crate::paths::ProjectDir;
use crate::requirement::Requirement;
use crate::supervise::Ending;

/// How the offline steps ended.
pub(super) struct Filled {
    /// The step they ended in.
    pub(super) step: InstallStep,
    pub(super) ended: Ending,
    /// The venv was made (or was an empty folder) here.
    pub(super) made: bool,
    /// The install step failed and the venv could not be put back as it was.
    pub(super) not_restored: bool,
}

impl Installs {
    /// Makes the venv when needed (the venv step), then installs `wanted` into it (the install
    /// step), in the `offline` sandbox: the project read-only, its venv (the very folder
    /// `target` proves) writable, and for uv `cache`.
    pub(super) async fn fill(
        &self,
        steps: &Steps<'_>,
        offline: &Sandbox,
        target: &VenvTarget,
        project: &ProjectDir,
        cache: &Path,
        wanted: &Wanted<'_>,
    ) -> Result<Filled, InstallError> {
        let venv = project.absolute().join(VENV_NAME);
        let mut step = InstallStep::Venv;
        let (venv_fd, made) = target.open()?;
        // An install that never finished (a killed server) is undone before anything runs.
        let held = venv_fd.try_clone().map_err(InstallError::Venv)?;
        blocking(move || snapshot::recover(&held))
            .await
            .map_err(InstallError::Venv)?;
        // The project read-only at its host path (venvs record absolute paths), and in it the
        // venv writable: the very folder proven above (a magic link to its descriptor), not
        // whatever its path names by now.
        let mut grants = vec![
            Grant {
                at: project.absolute().to_path_buf(),
                held: None,
                writable: false,
            },
            Grant {
                at: venv.clone(),
                held: Some(fd_path(&venv_fd)),
                writable: true,
            },
        ];
        // And in a venv that was there, its snapshot's folder read-only (see
        // `snapshot::prepare`), by its path: nothing but the server writes the venv (runs see
        // it read-only), and the folder was just made. A venv made here is not put back but
        // removed whole when a step fails (and `venv` makers refuse a folder that is not
        // empty).
        if !made {
            let held = venv_fd.try_clone().map_err(InstallError::Venv)?;
            blocking(move || snapshot::prepare(&held).map(drop))
                .await
                .map_err(InstallError::Venv)?;
            grants.push(Grant {
                at: venv.join(snapshot::SNAPSHOT_DIR),
                held: None,
                writable: false,
            });
        }
        // uv installs from its cache, and writes it (also `--offline`); pip from the wheels.
        if self.settings.uv.is_some() {
            grants.push(Grant::writable(cache));
        }
        let slot = offline
            .slot_granting(steps.scratch, &grants)
            .map_err(|e| InstallError::Sandbox(Arc::new(e)))?;
        // A venv made here goes again unless every step succeeded (also on an error or a
        // dropped call): a half-made one would be taken for a good one next time.
        let mut unfinished = made.then(|| UnfinishedVenv::new(target, &venv_fd));
        let mut ended = if made {
            steps
                .run_each(offline, &slot, self.venv_commands(&venv))
                .await?
        } else {
            Ending::success()
        };
        let mut not_restored = false;
        if ended.succeeded() {
            step = InstallStep::Install;
            // The venv as it is now, put back if the step fails (see `snapshot.rs`).
            let held = venv_fd.try_clone().map_err(InstallError::Venv)?;
            let snapshot = blocking(move || VenvSnapshot::take(&held))
                .await
                .map_err(InstallError::Venv)?;
            let command = match wanted {
                Wanted::Requirements(requirements) => {
                    self.install_command(&venv, cache, steps.scratch, requirements)
                }
                Wanted::Lock(_) => self.sync_command(&venv, cache, steps.scratch, false)?,
            };
            ended = steps.run(offline, &slot, &command).await?;
            if ended.succeeded() {
                if let Some(unfinished) = unfinished.as_mut() {
                    unfinished.finished();
                }
                match blocking(move || snapshot.keep()).await {
                    Ok(discard) => self.remove_later(project, discard),
                    Err(e) => tracing::warn!(%e, "an install's venv snapshot was not set aside"),
                }
            } else {
                match blocking(move || snapshot.put_back()).await {
                    // A venv made here goes whole below, with what was set aside.
                    Ok(_) if made => {}
                    Ok(discard) => self.remove_later(project, discard),
                    Err(e) => {
                        tracing::warn!(%e, "a failed install's venv was not put back");
                        not_restored = true;
                    }
                }
            }
        }
        drop(unfinished);
        #[cfg_attr(not(target_os = "linux"), allow(clippy::drop_non_drop))]
        drop(slot);
        Ok(Filled {
            step,
            ended,
            made,
            not_restored,
        })
    }

    /// The install step's command, without the network: uv from its cache (`--offline`), pip
    /// from the fetched wheels only (`--no-index`).
    fn install_command(
        &self,
        venv: &Path,
        cache: &Path,
        scratch: &Path,
        requirements: &[Requirement],
    ) -> Command {
        let python = venv.join("bin").join("python");
        let requirements = requirements.iter().map(|r| OsString::from(r.to_arg()));
        match &self.settings.uv {
            Some(uv) => {
                let mut cmd = self.uv_pip_install(uv, cache, &python).args([
                    OsStr::new("--offline"),
                    OsStr::new("--index-url"),
                    OsStr::new(self.settings.index.url()),
                ]);
                if !self.settings.allow_sdist {
                    cmd = cmd.args([OsStr::new("--no-build")]);
                }
                cmd.owned_args(requirements)
            }
            None => Command::new(&python)
                .args([
                    OsStr::new("-m"),
                    OsStr::new("pip"),
                    OsStr::new("install"),
                    OsStr::new("--isolated"),
                    OsStr::new("--no-input"),
                    OsStr::new("--disable-pip-version-check"),
                    OsStr::new("--no-compile"),
                    OsStr::new("--progress-bar"),
                    OsStr::new("off"),
                    OsStr::new("--no-cache-dir"),
                    OsStr::new("--no-index"),
                    OsStr::new("--only-binary"),
                    OsStr::new(":all:"),
                    OsStr::new("--find-links"),
                    scratch.join(WHEELS_DIR).as_os_str(),
                ])
                .owned_args(requirements),
        }
    }
}

/// Runs blocking file work (a venv's snapshot) off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(e)))
}
