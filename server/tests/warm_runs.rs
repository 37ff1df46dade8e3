//! A warm run means what a cold run means. Every script of `warm_corpus/` (see its README) runs on
//! a cold server (`--warm off`) and on a warm one (`--warm on`), each on its own copy of the
//! corpus; on the warm server a script runs once its folder's spare is ready (the first run of a
//! folder, cold, starts that folder's spare; every run after starts the next) and its result must
//! say `"warm": true`. Their stdout, stderr, exit code
//! and signal must agree once the few values that legitimately vary are taken out ([`normalise`]).
//! One test collects every difference of the corpus; the others pin what matters most on its own:
//! random state drawn fresh per warm run, a project module named like a preloaded one, files left
//! unclosed reaching the disk.
#![cfg(target_os = "linux")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use pyrun_mcp_tests::stdio::StdioServer;
use pyrun_mcp_tests::{was_warm, TempProjects};
use serde_json::{json, Value};

use crate::util::warm::wait_for_spare;

/// The corpus folder in the source tree; each server gets a copy of it at `corpus/`.
const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/warm_corpus");
/// What marks an entry script: its first line starts with it.
const ENTRY_MARK: &str = "# warm corpus:";
/// A line of a script's output that legitimately differs from run to run starts with it.
const VARY: &str = "VARY:";
/// Flags both servers take: results show all of a run's output (the corpus's largest is 160 KB).
const COMMON_FLAGS: &[&str] = &["--max-result-output-bytes", "262144"];

/// What the warm server of the differential preloads beyond the defaults and what each folder's
/// runs teach it: modules the corpus's scripts import, and modules that import others (asyncio
/// imports logging), so that every script meets a spare that has already imported them.
const WARM_PRELOAD: &str =
    "asyncio,concurrent.futures,json,logging,multiprocessing,random,subprocess,tempfile,unittest";

/// Corpus scripts whose warm output is accepted as different, each with why (what the README says
/// still differs): their differences are printed, not failed, and one that stops differing fails
/// until it leaves this list. Each such fact has a script of its own, so accepting it gives up
/// no other check.
const ACCEPTED: &[(&str, &str)] = &[
    (
        "frames.py",
        "one driver frame lies above the script's module frame (docs/runs.md, Warm runs)",
    ),
    (
        "faulthandler_dump.py",
        "a stack dump shows the driver's frames below the script's",
    ),
    (
        "faulthandler_segv.py",
        "a stack dump shows the driver's frames below the script's",
    ),
    (
        "warnings_stacklevel.py",
        "a stacklevel above the script's module frame names the driver",
    ),
    (
        "gc_frozen.py",
        "the preload is frozen (gc.freeze): gc.get_freeze_count() is not 0",
    ),
    (
        "atexit_count.py",
        "the driver's report handler and preloaded modules' handlers are registered",
    ),
    (
        "logging_loggers.py",
        "preloaded modules made their loggers already",
    ),
    (
        "mp_main_presence.py",
        "multiprocessing was preloaded, so __mp_main__ is in sys.modules",
    ),
    (
        "shadow/shadow_dependent.py",
        "a preloaded module keeps the standard module it imported, even when the project shadows it",
    ),
];

/// An entry script of the corpus and how it is called.
#[derive(Debug)]
struct CorpusScript {
    /// Relative to the corpus folder, `/`-separated.
    rel: String,
    args: Vec<String>,
    stdin: Option<String>,
    /// The run's `timeout_seconds`.
    timeout: Option<f64>,
}

impl CorpusScript {
    /// The script's `run_python` arguments (the corpus sits at `corpus/` in the projects folder).
    fn arguments(&self) -> Value {
        let mut arguments = json!({"file_name": format!("corpus/{}", self.rel), "args": self.args});
        if let Some(stdin) = &self.stdin {
            arguments["stdin"] = json!(stdin);
        }
        if let Some(seconds) = self.timeout {
            arguments["timeout_seconds"] = json!(seconds);
        }
        arguments
    }
}

/// Every file under `dir` (no `__pycache__`), relative to `base`, `/`-separated, sorted.
fn corpus_files(base: &Path, dir: &Path, found: &mut Vec<String>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("a corpus folder entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "__pycache__") {
                corpus_files(base, &path, found);
            }
        } else {
            let rel = path.strip_prefix(base).expect("under the corpus folder");
            found.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
    found.sort();
}

/// The corpus's entry scripts in name order, with the arguments and stdin their header gives
/// after the first line (`# args: <JSON list>`, `# stdin: <JSON string>`, `# stdin-times:
/// <count>`, `# timeout: <seconds>`).
fn corpus_scripts() -> Vec<CorpusScript> {
    let base = Path::new(CORPUS);
    let mut files = Vec::new();
    corpus_files(base, base, &mut files);
    let mut scripts = Vec::new();
    for rel in files.into_iter().filter(|f| f.ends_with(".py")) {
        // Not all UTF-8: one script is in latin-1, as its coding line says.
        let bytes = std::fs::read(base.join(&rel)).expect("read a corpus script");
        let text = String::from_utf8_lossy(&bytes);
        let mut lines = text.lines();
        let first = lines.next().unwrap_or_default();
        if !first.trim_start_matches('\u{feff}').starts_with(ENTRY_MARK) {
            continue;
        }
        let mut script = CorpusScript {
            rel,
            args: Vec::new(),
            stdin: None,
            timeout: None,
        };
        for line in lines.take_while(|l| l.starts_with('#')) {
            if let Some(args) = line.strip_prefix("# args: ") {
                script.args = serde_json::from_str(args).expect("# args: is a JSON list");
            } else if let Some(stdin) = line.strip_prefix("# stdin: ") {
                script.stdin =
                    Some(serde_json::from_str(stdin).expect("# stdin: is a JSON string"));
            } else if let Some(seconds) = line.strip_prefix("# timeout: ") {
                script.timeout = Some(seconds.parse().expect("# timeout: is seconds"));
            } else if let Some(times) = line.strip_prefix("# stdin-times: ") {
                let times = times.parse().expect("# stdin-times: is a count");
                script.stdin = script.stdin.map(|stdin| stdin.repeat(times));
            }
        }
        scripts.push(script);
    }
    scripts
}

/// A projects folder holding a copy of the whole corpus at `corpus/`.
fn corpus_projects() -> TempProjects {
    let base = Path::new(CORPUS);
    let mut files = Vec::new();
    corpus_files(base, base, &mut files);
    files
        .iter()
        .fold(TempProjects::named("p"), |projects, rel| {
            let content = std::fs::read(base.join(rel)).expect("read a corpus file");
            projects.file(&format!("corpus/{rel}"), content)
        })
}

/// A server over stdio on `projects` with warm runs `on` or `off`, plus `extra` flags.
fn server(projects: &TempProjects, warm: &str, extra: &[&str]) -> StdioServer {
    let mut flags = vec!["--warm", warm];
    flags.extend_from_slice(COMMON_FLAGS);
    flags.extend_from_slice(extra);
    StdioServer::start(projects.path(), &flags)
}

/// A warm server and the folders that had a run on it: each has a spare on its way.
struct WarmServer {
    server: StdioServer,
    spare_coming: BTreeSet<String>,
}

impl WarmServer {
    fn start(projects: &TempProjects, extra: &[&str]) -> Self {
        Self {
            server: server(projects, "on", extra),
            spare_coming: BTreeSet::new(),
        }
    }

    /// Runs `script` warm: once its folder's spare is ready (waited for, bounded, after a run of
    /// the folder; a folder's first run is cold and starts it). Repeated (bounded) only when a
    /// run still started cold, e.g. a spare that never got ready.
    fn run(&mut self, script: &CorpusScript) -> Result<Value, String> {
        let arguments = script.arguments();
        let folder = Path::new(&script.rel)
            .parent()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut seen = Vec::new();
        for _ in 0..pyrun_mcp_tests::warm::WARM_TRIES {
            if self.spare_coming.contains(&folder) {
                wait_for_spare(self.server.pid(), &arguments);
            }
            let result = self.server.call("run_python", arguments.clone());
            self.spare_coming.insert(folder.clone());
            if was_warm(&result) {
                return Ok(result);
            }
            let run = &result["structuredContent"];
            seen.push(format!("warm={} exit={}", run["warm"], run["exit_code"]));
        }
        Err(format!("never warm: {seen:?}"))
    }

    fn close(self) {
        self.server.close();
    }
}

/// What a run did that a user sees, normalised.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    exit_code: Value,
    signal: Value,
    timed_out: Value,
    stdout: String,
    stderr: String,
}

impl Seen {
    fn of(result: &Value) -> Self {
        let run = &result["structuredContent"];
        let text = |key: &str| normalise(run[key].as_str().unwrap_or_default());
        Self {
            exit_code: run["exit_code"].clone(),
            signal: run["signal"].clone(),
            timed_out: run["timed_out"].clone(),
            stdout: text("stdout"),
            stderr: text("stderr"),
        }
    }

    /// How `warm` differs from `self` (cold), in words; empty when it does not.
    fn differences(&self, warm: &Self) -> Vec<String> {
        let mut said = Vec::new();
        for (what, cold, warm) in [
            ("exit code", &self.exit_code, &warm.exit_code),
            ("signal", &self.signal, &warm.signal),
            ("timed out", &self.timed_out, &warm.timed_out),
        ] {
            if cold != warm {
                said.push(format!("{what}: cold {cold}, warm {warm}"));
            }
        }
        for (what, cold, warm) in [
            ("stdout", &self.stdout, &warm.stdout),
            ("stderr", &self.stderr, &warm.stderr),
        ] {
            if cold != warm {
                said.push(format!("{what}:\n{}", line_diff(cold, warm)));
            }
        }
        said
    }
}

/// `text` without what legitimately varies: lines starting with [`VARY`] are dropped, addresses
/// (`0x` and hex digits: object reprs, faulthandler's thread ids) become `0x?`, and run ids (in a
/// cut output's note) `run_?`. Scripts print pids only where the run's pid namespace fixes them.
fn normalise(text: &str) -> String {
    let kept: Vec<&str> = text
        .split_inclusive('\n')
        .filter(|line| !line.starts_with(VARY))
        .collect();
    let text = kept.concat();
    let text = replace_hex_run(&text, "0x", "0x?");
    replace_hex_run(&text, "run_", "run_?")
}

/// Each `prefix` followed by at least one hex digit, with the digits, replaced by `with`.
fn replace_hex_run(text: &str, prefix: &str, with: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(prefix) {
        out.push_str(&rest[..at]);
        let after = &rest[at + prefix.len()..];
        let digits = after.len()
            - after
                .trim_start_matches(|c: char| c.is_ascii_hexdigit())
                .len();
        if digits == 0 {
            out.push_str(prefix);
        } else {
            out.push_str(with);
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

/// The lines where `cold` and `warm` part: the common head and tail cut, at most 20 lines a side.
fn line_diff(cold: &str, warm: &str) -> String {
    let cold: Vec<&str> = cold.lines().collect();
    let warm: Vec<&str> = warm.lines().collect();
    let head = cold.iter().zip(&warm).take_while(|(a, b)| a == b).count();
    let tail = cold[head..]
        .iter()
        .rev()
        .zip(warm[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let side = |lines: &[&str], sign: &str| {
        let middle = &lines[head..lines.len() - tail];
        let mut shown: Vec<String> = middle
            .iter()
            .take(20)
            .map(|l| format!("  {sign} {l}"))
            .collect();
        if middle.len() > 20 {
            shown.push(format!("  {sign} ... {} more lines", middle.len() - 20));
        }
        shown.join("\n")
    };
    format!(
        "  (from line {}; - cold, + warm; a final newline alone shows no line)\n{}\n{}",
        head + 1,
        side(&cold, "-"),
        side(&warm, "+")
    )
}

#[test]
fn every_corpus_script_prints_the_same_in_a_warm_run_as_in_a_cold_one() {
    let scripts = corpus_scripts();
    assert!(
        scripts.len() >= 45,
        "the corpus has {} scripts",
        scripts.len()
    );
    let cold_projects = corpus_projects();
    let warm_projects = corpus_projects();
    let mut cold = server(&cold_projects, "off", &[]);
    let mut warm = WarmServer::start(&warm_projects, &["--preload", WARM_PRELOAD]);
    let mut mismatches = BTreeMap::new();
    for script in &scripts {
        let cold_result = cold.call("run_python", script.arguments());
        assert!(
            !was_warm(&cold_result),
            "{}: a --warm off server ran it warm: {cold_result}",
            script.rel
        );
        let differences = match warm.run(script) {
            Ok(warm_result) => Seen::of(&cold_result).differences(&Seen::of(&warm_result)),
            Err(never) => vec![never],
        };
        let accepted = ACCEPTED.iter().find(|(rel, _)| *rel == script.rel);
        match (accepted, differences.is_empty()) {
            (Some((_, why)), false) => {
                eprintln!(
                    "{}: accepted ({why}):\n{}",
                    script.rel,
                    differences.join("\n")
                );
            }
            (Some(_), true) => {
                mismatches.insert(
                    script.rel.clone(),
                    "accepted as different, but no longer differs: take it off ACCEPTED".into(),
                );
            }
            (None, false) => {
                mismatches.insert(script.rel.clone(), differences.join("\n"));
            }
            (None, true) => {}
        }
    }
    cold.close();
    warm.close();
    let report: Vec<String> = mismatches
        .iter()
        .map(|(script, said)| format!("=== {script}\n{said}"))
        .collect();
    assert!(
        mismatches.is_empty(),
        "{} of {} corpus scripts differ warm:\n{}",
        mismatches.len(),
        scripts.len(),
        report.join("\n")
    );
}

/// The `VARY:` lines of an output as (name, value): `VARY: name value`.
fn varying_values(stdout: &str) -> BTreeMap<String, String> {
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix(VARY))
        .filter_map(|rest| rest.trim().rsplit_once(' '))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
}

/// The one entry script named `rel`.
fn corpus_script(rel: &str) -> CorpusScript {
    corpus_scripts()
        .into_iter()
        .find(|s| s.rel == rel)
        .unwrap_or_else(|| panic!("no corpus script {rel}"))
}

#[test]
fn two_warm_runs_of_one_script_draw_different_random_values() {
    let projects = corpus_projects();
    let mut server = WarmServer::start(&projects, &[]);
    let script = corpus_script("random_fresh.py");
    let draws: Vec<BTreeMap<String, String>> = (0..2)
        .map(|_| {
            let result = server.run(&script).unwrap_or_else(|e| panic!("{e}"));
            varying_values(result["structuredContent"]["stdout"].as_str().unwrap_or(""))
        })
        .collect();
    assert!(draws[0].len() >= 10, "too few random values: {draws:?}");
    assert_eq!(
        draws[0].keys().collect::<Vec<_>>(),
        draws[1].keys().collect::<Vec<_>>()
    );
    let same: Vec<&String> = draws[0]
        .iter()
        .filter(|(name, value)| draws[1].get(*name) == Some(value))
        .map(|(name, _)| name)
        .collect();
    assert!(
        same.is_empty(),
        "two warm runs drew the same {same:?}: {draws:?}"
    );
    server.close();
}

#[test]
fn a_project_module_named_like_a_preloaded_one_is_the_one_a_warm_run_imports() {
    let projects = corpus_projects();
    let mut server = WarmServer::start(&projects, &["--preload", "json,logging"]);
    for (script, source) in [
        ("shadow/shadow_json.py", "project json"),
        ("shadow/shadow_logging.py", "project logging"),
    ] {
        let result = server
            .run(&corpus_script(script))
            .unwrap_or_else(|e| panic!("{e}"));
        let stdout = result["structuredContent"]["stdout"].as_str().unwrap_or("");
        let second = stdout.lines().nth(1).unwrap_or("");
        assert_eq!(second, source, "{script} imported the stdlib's: {result}");
    }
    server.close();
}

#[test]
fn files_a_warm_run_left_unclosed_are_on_disk_after_it() {
    let projects = corpus_projects();
    let mut server = WarmServer::start(&projects, &[]);
    let written = |name: &str| -> PathBuf { projects.path().join("corpus").join(name) };
    let result = server
        .run(&corpus_script("unflushed_1_write.py"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        result["structuredContent"]["exit_code"],
        json!(0),
        "{result}"
    );
    let text = std::fs::read_to_string(written("unflushed.txt")).unwrap_or_default();
    assert_eq!(
        text,
        "written, never flushed or closed\n".repeat(3),
        "{result}"
    );
    let binary = std::fs::metadata(written("unflushed.bin")).map(|m| m.len());
    assert_eq!(binary.ok(), Some(800), "{result}");
    server.close();
}
