//! Runs on a remote backend (`--runpod-endpoint`), shared by the rooms that start file runs: the
//! `backend` argument checked against what is configured, a run prepared (its project packed,
//! refused when over RunPod's limit) and started in the background registry like any run (the
//! `backend` property of those tools' schema is `protocol/backend_schema.rs`).

use std::sync::Arc;
use std::time::Duration;

use crate::client_message::ClientMessage;
use crate::mcp::call::RunPythonArgs;
use crate::mcp::present::reply::runs_full;
use crate::mcp::protocol::handler::PyRunServer;
use pyrun_remote::runpod::{JobSpec, RunPod, BACKEND as RUNPOD};
use pyrun_run::background::{BackgroundRequest, RunKind, RunRecord, LOCAL_BACKEND};
use pyrun_run::caller::Caller;
use pyrun_run::paths::ProjectPath;
use pyrun_run::runner::Pool;

impl PyRunServer {
    /// The backends this server offers, `local` first.
    pub(in crate::mcp) fn backends(&self) -> Vec<&'static str> {
        let mut names = vec![LOCAL_BACKEND];
        if self.app.runpod.is_some() {
            names.push(RUNPOD);
        }
        names
    }

    /// The remote backend the call names; `None`: a local run.
    pub(in crate::mcp) fn remote_backend(
        &self,
        args: &RunPythonArgs,
    ) -> Result<Option<Arc<RunPod>>, ClientMessage> {
        match args.backend.as_deref().map(str::trim) {
            None | Some("") | Some(LOCAL_BACKEND) => Ok(None),
            Some(RUNPOD) if self.app.runpod.is_some() => Ok(self.app.runpod.clone()),
            Some(other) => {
                let mut message = ClientMessage::new("backend ")
                    .given(other)
                    .then(" is not one of this server's:");
                for name in self.backends() {
                    message = message.then(" ").then(name);
                }
                Err(message)
            }
        }
    }

    /// Packs the script's project and starts its run on `runpod`, registered for `owner` like
    /// any background run (`listed: false` for a `run_python` that waits for it).
    #[allow(clippy::too_many_arguments)]
    pub(in crate::mcp) async fn start_remote(
        &self,
        runpod: &RunPod,
        owner: &Caller,
        script: &ProjectPath,
        args: &RunPythonArgs,
        timeout: Duration,
        kind: RunKind,
        listed: bool,
    ) -> Result<Arc<RunRecord>, ClientMessage> {
        let spec = JobSpec {
            args: &args.args,
            stdin: args.stdin.as_deref(),
            timeout,
            max_output: self.app.runner.max_output(),
        };
        self.app
            .runs
            .has_room(&owner.key())
            .map_err(|e| runs_full(e, self.app.runs.settings()))?;
        let job = runpod.prepare(script, spec).await?;
        let request = BackgroundRequest {
            script: script.clone(),
            args: args.args.clone(),
            stdin: args.stdin.clone(),
            timeout,
            pool: Pool::Background,
            python: None,
        };
        let record = self
            .app
            .runs
            .start_remote(&owner.key(), kind, &request, listed, RUNPOD, job)
            .map_err(|e| runs_full(e, self.app.runs.settings()))?;
        tracing::info!(%owner, run_id = %record.id, script = %record.file_name, backend = RUNPOD, "remote run started");
        Ok(record)
    }
}
