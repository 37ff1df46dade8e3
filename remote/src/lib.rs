//! pyrun-remote: the backends that run a project file somewhere else than on the server's
//! machine, as remote backends of the run engine (`pyrun_run::engine::backend::RemoteBackend`)
//! whose jobs are background runs of the run layer (`pyrun_run::background::RemoteRun`). `snapshot`
//! packs what travels (the script's project, without protected names, venvs, caches and big
//! files); `runpod` speaks RunPod's serverless job API and drives one job per run. HTTP lives
//! here so that the run layer keeps none.

pub mod runpod;
pub mod snapshot;
