//! A file run as the engine takes it (`run_python`, `start_python`, a `run_python` task): the
//! checked call and its `backend` argument, checked against the engine's backends, made a
//! `FileRun`; and the engine's refusals in a client's words. Where the run goes (in the call,
//! in the background, handed over, on a remote backend) is the engine's choice.

use super::{RunPythonArgs, ScriptCall};
use crate::client_message::ClientMessage;
use crate::mcp::present::reply::runs_full;
use crate::mcp::protocol::handler::PyRunServer;
use pyrun_run::engine::backend::UnknownBackend;
use pyrun_run::engine::{FileRun, StartRefused};

impl PyRunServer {
    /// The engine's file run for the checked `call`, on the backend `args` names.
    pub(in crate::mcp) fn file_run(
        &self,
        call: &ScriptCall,
        args: &RunPythonArgs,
    ) -> Result<FileRun, ClientMessage> {
        let backend = self
            .engine()
            .backends()
            .choose(args.backend.as_deref())
            .map_err(unknown_backend)?;
        Ok(FileRun {
            script: call.script.clone(),
            args: args.args.clone(),
            stdin: args.stdin.clone(),
            timeout: call.timeout,
            python: call.python.clone(),
            backend,
        })
    }

    /// Why the engine did not start a run, as its caller reads it.
    pub(in crate::mcp) fn start_refused(&self, refused: StartRefused) -> ClientMessage {
        match refused {
            StartRefused::Full(e) => runs_full(e, self.engine().runs().settings()),
            StartRefused::Prepare(e) => e.into(),
        }
    }
}

/// `backend "gpu" is not one of this server's: local runpod`.
fn unknown_backend(e: UnknownBackend) -> ClientMessage {
    let mut message = ClientMessage::new("backend ")
        .given(&e.given)
        .then(" is not one of this server's:");
    for name in e.offered {
        message = message.then(" ").then(name);
    }
    message
}
