//! The tidy test: the repository checked against its own map by plain `cargo test`, as
//! rust-analyzer's `tidy.rs` does. ARCHITECTURE.md's paths and Rust names exist in the code, the
//! crates' arrows point down, the MCP tool rooms never name each other, `server/src` keeps a
//! dozen entries and the workspace few test binaries.
//!
//! It lives in the harness crate's unit tests, a binary `cargo test --workspace` builds and runs
//! anyway (no feature needed; it links the harness and its dev-dependencies, not the server), so
//! the check adds no test binary.
//! Each rule is a pure function over text or cargo's metadata (`architecture`, `crates`, `rooms`),
//! unit-tested there with planted false claims; the tests below feed them the real repository.

mod architecture;
mod crates;
mod rooms;
mod rust_source;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::paths::workspace_root;
use rust_source::{module_path, CodeIndex, SourceFile};

/// Folders no walk of the repository enters: build output, VCS data, installed environments.
const NOT_THE_REPOSITORY: [&str; 6] = [
    ".git",
    "target",
    "node_modules",
    ".venv",
    "venv",
    "__pycache__",
];

/// Where this module lives, left out of the code it reads.
const OWN_FOLDER: &str = "tests/src/tidy/";

/// `server/src/` keeps a dozen entries at most: each says what its room is.
const MAX_SERVER_ROOT_ENTRIES: usize = 12;

/// Runs cargo (the one running these tests) in the workspace; panics with its stderr if it fails.
fn cargo(args: &[&str]) -> String {
    let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let output = Command::new(&program)
        .args(args)
        .current_dir(workspace_root())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program:?}: {e}"));
    assert!(
        output.status.success(),
        "`cargo {}` failed:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The workspace's packages and their targets (no dependency resolution: nothing to download).
fn metadata() -> &'static Value {
    static METADATA: OnceLock<Value> = OnceLock::new();
    METADATA.get_or_init(|| {
        let text = cargo(&["metadata", "--format-version", "1", "--no-deps", "--locked"]);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("cargo metadata printed no JSON: {e}"))
    })
}

/// Every file and folder under `dir`, relative to it, `/`-separated.
fn walk(dir: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let (mut files, mut dirs) = (BTreeSet::new(), BTreeSet::new());
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(dir.join(&rel)) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = rel.join(&name);
            let text = path.to_string_lossy().replace('\\', "/");
            match entry.file_type() {
                Ok(t) if t.is_dir() => {
                    if !NOT_THE_REPOSITORY.contains(&name.as_str()) {
                        dirs.insert(text);
                        pending.push(path);
                    }
                }
                Ok(_) => {
                    files.insert(text);
                }
                Err(_) => {}
            }
        }
    }
    (files, dirs)
}

/// Every Rust file of the workspace's packages, with its crate and module path.
fn rust_files() -> &'static [SourceFile] {
    static FILES: OnceLock<Vec<SourceFile>> = OnceLock::new();
    FILES.get_or_init(|| {
        let root = workspace_root();
        let mut out = Vec::new();
        for package in crates::items(&metadata()["packages"]) {
            let Some(manifest) = package["manifest_path"].as_str() else {
                continue;
            };
            let Some(dir) = Path::new(manifest).parent() else {
                continue;
            };
            let targets = crates::items(&package["targets"]);
            let lib = targets.iter().find(|t| crates::has_kind(t, "lib"));
            let crate_name = lib
                .and_then(|t| t["name"].as_str())
                .map(str::to_owned)
                .unwrap_or_else(|| {
                    package["name"]
                        .as_str()
                        .unwrap_or_default()
                        .replace('-', "_")
                });
            let rel_dir = dir
                .strip_prefix(&root)
                .unwrap_or(dir)
                .to_string_lossy()
                .replace('\\', "/");
            for file in walk(dir).0.into_iter().filter(|f| f.ends_with(".rs")) {
                // This module's own files plant false names on purpose: they are not the code.
                if format!("{rel_dir}/{file}").starts_with(OWN_FOLDER) {
                    continue;
                }
                let Ok(text) = std::fs::read_to_string(dir.join(&file)) else {
                    continue;
                };
                let module = module_path(file.strip_prefix("src/").unwrap_or(&file));
                out.push(SourceFile {
                    path: format!("{rel_dir}/{file}"),
                    crate_name: crate_name.clone(),
                    module,
                    text,
                });
            }
        }
        out
    })
}

/// The crates of Cargo.lock but the workspace's own (as Rust names), and the standard library's:
/// where a path the document names may start outside the workspace.
fn external_crates() -> BTreeSet<String> {
    let lock = std::fs::read_to_string(workspace_root().join("Cargo.lock")).unwrap_or_default();
    let members: BTreeSet<String> = crates::items(&metadata()["packages"])
        .iter()
        .filter_map(|p| p["name"].as_str())
        .map(|n| n.replace('-', "_"))
        .collect();
    lock.lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .map(|n| n.trim_end_matches('"').replace('-', "_"))
        .filter(|n| !members.contains(n))
        .chain(["std", "core", "alloc"].map(String::from))
        .collect()
}

fn architecture_md() -> String {
    std::fs::read_to_string(workspace_root().join("ARCHITECTURE.md"))
        .expect("ARCHITECTURE.md is at the repository's top")
}

fn assert_none(what: &str, problems: &[String]) {
    assert!(problems.is_empty(), "{what}:\n  {}", problems.join("\n  "));
}

#[test]
fn architecture_md_names_only_paths_that_exist() {
    let repo = repo_tree();
    let spans = architecture::code_spans(&architecture_md());
    let (named, problems) = architecture::missing_paths("ARCHITECTURE.md", &spans, &repo);
    assert_none("ARCHITECTURE.md names paths that do not exist", &problems);
    assert!(
        named > 50,
        "ARCHITECTURE.md names only {named} paths: is the check reading it?"
    );

    // The same document with false claims planted fails, naming each.
    let planted = format!(
        "{}\n`run/src/nowhere.rs` `tools/nowhere.rs`",
        architecture_md()
    );
    let spans = architecture::code_spans(&planted);
    let (_, problems) = architecture::missing_paths("ARCHITECTURE.md", &spans, &repo);
    assert_eq!(problems.len(), 2, "{problems:#?}");
}

/// The repository as the path checks see it.
fn repo_tree() -> architecture::RepoTree {
    let (files, dirs) = walk(&workspace_root());
    let top_level = dirs
        .iter()
        .chain(&files)
        .filter(|p| !p.contains('/'))
        .cloned()
        .collect();
    architecture::RepoTree {
        top_level,
        files,
        dirs,
    }
}

/// What the workspace's code defines and uses.
fn code_index() -> &'static CodeIndex {
    static INDEX: OnceLock<CodeIndex> = OnceLock::new();
    INDEX.get_or_init(|| {
        let mut code = CodeIndex::build(rust_files());
        // The manifests' target names count as the code's too (a test binary named in the text).
        for package in crates::items(&metadata()["packages"]) {
            let targets = crates::items(&package["targets"]);
            let names = targets.iter().filter_map(|t| t["name"].as_str());
            code.words.extend(names.map(str::to_owned));
        }
        code
    })
}

#[test]
fn architecture_md_names_only_rust_names_the_code_has() {
    let code = code_index();
    let externals = external_crates();
    let spans = architecture::code_spans(&architecture_md());
    let (named, problems) =
        architecture::unknown_names("ARCHITECTURE.md", &spans, code, &externals);
    assert_none(
        "ARCHITECTURE.md names what the code does not have",
        &problems,
    );
    assert!(
        named > 50,
        "ARCHITECTURE.md names only {named} Rust names: is the check reading it?"
    );

    // The same document with false claims planted fails, naming each.
    let planted =
        "`Sandbox::slot_writing` `pyrun_run::background::RemoteRuns` `SandboxProbes` `run_callz`";
    let spans = architecture::code_spans(&format!("{}\n{planted}", architecture_md()));
    let (_, problems) = architecture::unknown_names("ARCHITECTURE.md", &spans, code, &externals);
    assert_eq!(problems.len(), 4, "{problems:#?}");
}

#[test]
fn architecture_md_places_names_where_they_are_defined() {
    let (code, repo) = (code_index(), repo_tree());
    let spans = architecture::code_spans(&architecture_md());
    let problems = architecture::misplaced_names("ARCHITECTURE.md", &spans, code, &repo);
    assert_none("ARCHITECTURE.md places names where they are not", &problems);

    // A false placement planted fails, naming it.
    let planted = architecture::code_spans("- `run/src/launch.rs` — `Runner`: the runner");
    let problems = architecture::misplaced_names("ARCHITECTURE.md", &planted, code, &repo);
    assert_eq!(problems.len(), 1, "{problems:#?}");
}

#[test]
fn crate_arrows_point_down() {
    let mut problems = crates::arrows_up(&crates::workspace_edges(metadata()));
    for (krate, _) in crates::FORBIDDEN {
        // Per crate, as a build of that crate alone resolves its features (the workspace's
        // metadata unifies them: pyrun-api's `schema` feature, which the server turns on, would
        // show under the run layer too); every platform's dependencies.
        let tree = cargo(&[
            "tree", "-p", krate, "-e", "normal", "--target", "all", "--prefix", "none", "--format",
            "{p}", "--locked",
        ]);
        problems.extend(crates::forbidden_reached(krate, &crates::tree_names(&tree)));
    }
    assert_none("the crates' arrows do not all point down", &problems);

    // The workspace's metadata with an arrow up planted fails, naming it.
    let mut planted = metadata().clone();
    for package in planted["packages"].as_array_mut().into_iter().flatten() {
        if package["name"] == "pyrun-run" {
            if let Some(deps) = package["dependencies"].as_array_mut() {
                deps.push(serde_json::json!({"name": "pyrun-remote", "kind": null}));
            }
        }
    }
    let problems = crates::arrows_up(&crates::workspace_edges(&planted));
    assert_eq!(problems.len(), 1, "{problems:#?}");
}

#[test]
fn no_tool_room_names_another() {
    let server: Vec<rooms::ServerFile> = rust_files()
        .iter()
        .filter_map(|f| {
            Some(rooms::ServerFile {
                path: f.path.strip_prefix("server/src/")?.to_owned(),
                text: f.text.clone(),
            })
        })
        .collect();
    let found = rooms::rooms(&server);
    assert!(
        found.len() >= 5,
        "only {} tool rooms found: {found:?}",
        found.len()
    );
    assert_none(
        "the MCP room rules are broken",
        &rooms::room_problems(&server),
    );

    // The same files with one room importing another fails, naming it.
    let mut names = found.iter();
    let (Some(first), Some(second)) = (names.next(), names.next()) else {
        unreachable!("five rooms or more were found")
    };
    let mut planted = server;
    planted.push(rooms::ServerFile {
        path: format!("mcp/tools/{first}/planted.rs"),
        text: format!("use crate::mcp::tools::{second}::Anything;"),
    });
    let problems = rooms::room_problems(&planted);
    assert_eq!(problems.len(), 1, "{problems:#?}");
}

/// Why a server root of these entries is too full, if it is.
fn server_root_problem(entries: &[String]) -> Option<String> {
    (entries.len() > MAX_SERVER_ROOT_ENTRIES).then(|| {
        format!(
            "server/src has {} entries, more than {MAX_SERVER_ROOT_ENTRIES}: {}; group them into folders that say what they are",
            entries.len(),
            entries.join(", ")
        )
    })
}

#[test]
fn server_src_keeps_a_dozen_entries_at_most() {
    let mut entries: Vec<String> = std::fs::read_dir(workspace_root().join("server/src"))
        .expect("server/src is readable")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    if let Some(problem) = server_root_problem(&entries) {
        panic!("{problem}");
    }
    let planted: Vec<String> = (0..13).map(|i| format!("room{i}.rs")).collect();
    assert!(server_root_problem(&planted).is_some_and(|p| p.contains("13 entries")));
}

#[test]
fn the_workspace_keeps_few_test_binaries() {
    let binaries = crates::test_binaries(metadata());
    assert!(
        !binaries.is_empty(),
        "no integration test binary found in cargo's metadata"
    );
    assert!(
        binaries.len() <= crates::MAX_TEST_BINARIES,
        "{} integration test binaries, more than {} (each links the crate graph again; add a module to the crate's one binary instead): {}",
        binaries.len(),
        crates::MAX_TEST_BINARIES,
        binaries.join(", ")
    );
}
