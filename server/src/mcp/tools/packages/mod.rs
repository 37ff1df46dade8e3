//! The packages room: `list_packages` (here) and `install_packages` (`install`, with
//! `--allow-install`).
//!
//! `list_packages`: what a project's environment has installed (its nearest checked venv's
//! site-packages, or the server's interpreter's), read from the packages' metadata
//! (`pyrun_run::packages`) without starting a run. Always offered: it reads only what a run of the
//! project could import anyway.

use std::fmt::Write as _;

use rmcp::handler::server::common::schema_for_output;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::CallToolResult;
use rmcp::{tool, tool_router, ErrorData};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::client_message::push_escaped;
use crate::mcp::call::python_env;
use crate::mcp::present::reply::{python_info_of, refusal, structured, PythonInfo};
use crate::mcp::protocol::handler::PyRunServer;
use pyrun_run::packages::installed;

mod install;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListPackagesArgs {
    /// A folder of the projects folder (relative to it, e.g. `mathpkg`); its nearest virtual
    /// environment (`.venv/` or `venv/`, up to the projects folder) is listed, or the server's
    /// interpreter's packages without one. The projects folder itself when omitted.
    #[serde(default)]
    pub project: Option<String>,
}

/// One installed distribution.
#[derive(Debug, Serialize, JsonSchema)]
pub struct InstalledPackage {
    /// Its name as its metadata spells it.
    pub name: String,
    /// Its version (empty when its metadata names none).
    pub version: String,
}

/// What an environment has installed.
#[derive(Debug, Serialize, JsonSchema)]
pub struct PackageList {
    /// The interpreter and virtual environment a run of this project uses.
    pub python: PythonInfo,
    /// Sorted by name, one entry per name (a venv's own hides the same name of its base).
    pub packages: Vec<InstalledPackage>,
}

#[tool_router(router = packages_router, vis = "pub(in crate::mcp)")]
impl PyRunServer {
    /// List the Python packages (name and version) installed in a project's environment: its
    /// virtual environment, or the server's interpreter. Read from their metadata; nothing runs.
    #[tool(
        title = "List installed packages",
        annotations(title = "List installed packages", read_only_hint = true, open_world_hint = false),
        output_schema = schema_for_output::<PackageList>()
    )]
    async fn list_packages(
        &self,
        Parameters(args): Parameters<ListPackagesArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let project = match self
            .engine()
            .root()
            .resolve_project(args.project.as_deref())
        {
            Ok(dir) => dir,
            Err(e) => return Ok(refusal(e.into())),
        };
        let env = match python_env(self.engine(), project.absolute()).await {
            Ok(env) => env,
            Err(message) => return Ok(refusal(message)),
        };
        let python = python_info_of(&env);
        let projects = self.engine().root().path().to_path_buf();
        let found = tokio::task::spawn_blocking(move || installed(&env.site_packages, &projects))
            .await
            .unwrap_or_default();
        let packages: Vec<InstalledPackage> = found
            .into_iter()
            .map(|p| InstalledPackage {
                name: p.name,
                version: p.version,
            })
            .collect();
        Ok(structured(
            render(&python, &packages),
            &PackageList { python, packages },
        ))
    }
}

/// `Python 3.11.2 (venv .venv): 2 packages` then `name==version` lines (names escaped: a
/// package's metadata, like a file name, must not add lines of its own).
fn render(python: &PythonInfo, packages: &[InstalledPackage]) -> String {
    let mut text = String::new();
    let _ = write!(text, "Python {}", python.version);
    match &python.venv {
        Some(venv) => {
            text.push_str(" (virtual environment ");
            push_escaped(&mut text, venv);
            text.push(')');
        }
        None => text.push_str(" (the server's interpreter, no virtual environment)"),
    }
    let _ = write!(text, ": {} packages", packages.len());
    for package in packages {
        text.push('\n');
        push_escaped(&mut text, &package.name);
        if !package.version.is_empty() {
            text.push_str("==");
            push_escaped(&mut text, &package.version);
        }
    }
    text
}
