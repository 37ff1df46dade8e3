//! The README's claims a newcomer acts on first, checked against the real thing: its table of
//! tools (under `## Tools`) is exactly what the real binary's `tools/list` offers, by default and
//! with each flag the table names; every `--flag` it mentions is a flag of the server or of the
//! client (or one of the few other programs' flags it quotes); every link of the README and the
//! `docs/` pages it sends readers to leads to a file and a heading that exist.

use std::collections::BTreeSet;

use clap::CommandFactory;
use pyrun_mcp_tests::paths::workspace_root;
use pyrun_mcp_tests::ServerLaunch;
use serde_json::json;

/// Flags the README quotes from other programs: cargo (`install`, `run`, `test`), `sha256sum`
/// and `claude mcp add`. A flag of ours must never be listed here.
const OTHER_PROGRAMS_FLAGS: &[&str] = &[
    "--bin",
    "--features",
    "--ignore-missing",
    "--locked",
    "--offline",
    "--path",
    "--release",
    "--scope",
    "--workspace",
];

fn readme() -> String {
    let path = workspace_root().join("README.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// One row of the README's tool table: the tool, and the flag that offers it (none: always).
#[derive(Debug)]
struct ToolRow {
    name: String,
    flag: Option<String>,
}

/// The rows of the table under the `## Tools` heading (up to the next `## ` heading).
fn tool_table(readme: &str) -> Vec<ToolRow> {
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Tools\n"))
        .expect("the README has a `## Tools` section");
    let rows: Vec<ToolRow> = section
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            assert_eq!(cells.len(), 3, "a tool row has three cells: {line}");
            let name = cells[0].trim_matches('`').to_owned();
            let flag = match cells[2] {
                "always" => None,
                offered => Some(offered.trim_matches('`').to_owned()),
            };
            if let Some(flag) = &flag {
                assert!(
                    flag.starts_with("--") && !flag.contains(' '),
                    "`offered` is `always` or one flag in backticks: {line}"
                );
            }
            ToolRow { name, flag }
        })
        .collect();
    assert!(!rows.is_empty(), "no rows in the README's tool table");
    rows
}

/// The tool names the real server lists over stdio when started with `flags`.
fn listed_tools(flags: &[&str]) -> BTreeSet<String> {
    let mut server = ServerLaunch::samples().args(flags).stdio();
    let reply = server.request("tools/list", json!({}));
    let result = &reply["result"];
    assert!(result["nextCursor"].is_null(), "one page of tools: {reply}");
    let names = result["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in {reply}"))
        .iter()
        .map(|tool| tool["name"].as_str().unwrap_or_default().to_owned())
        .collect();
    server.close();
    names
}

#[test]
fn the_readme_tool_table_is_what_tools_list_offers_by_default_and_with_each_flag() {
    let rows = tool_table(&readme());
    let named: BTreeSet<&str> = rows.iter().map(|row| row.name.as_str()).collect();
    assert_eq!(named.len(), rows.len(), "a tool named twice: {rows:?}");
    let always: BTreeSet<String> = rows
        .iter()
        .filter(|row| row.flag.is_none())
        .map(|row| row.name.clone())
        .collect();
    assert_eq!(
        listed_tools(&[]),
        always,
        "the README's tools marked `always` against tools/list without flags"
    );
    let flags: BTreeSet<&str> = rows.iter().filter_map(|row| row.flag.as_deref()).collect();
    for flag in flags {
        let expected: BTreeSet<String> = rows
            .iter()
            .filter(|row| row.flag.as_deref().is_none_or(|f| f == flag))
            .map(|row| row.name.clone())
            .collect();
        assert_eq!(
            listed_tools(&[flag]),
            expected,
            "the README's tools offered always or by {flag} against tools/list with {flag}"
        );
    }
}

/// Every long flag of `command` and of its subcommands, as `--name`.
fn long_flags(command: &clap::Command, into: &mut BTreeSet<String>) {
    for arg in command.get_arguments() {
        into.extend(
            arg.get_long_and_visible_aliases()
                .into_iter()
                .flatten()
                .map(|l| format!("--{l}")),
        );
    }
    for sub in command.get_subcommands() {
        long_flags(sub, into);
    }
}

/// The `--flag` words of `text` (a word that starts with two dashes and a letter).
fn flags_in(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(offset) = text[at..].find("--") {
        let start = at + offset;
        let word_start =
            start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'-');
        let mut end = start + 2;
        while end < bytes.len()
            && (bytes[end].is_ascii_lowercase()
                || bytes[end].is_ascii_digit()
                || bytes[end] == b'-')
        {
            end += 1;
        }
        if word_start && end > start + 2 && bytes[start + 2].is_ascii_lowercase() {
            found.insert(text[start..end].trim_end_matches('-').to_owned());
        }
        at = end.max(start + 2);
    }
    found
}

#[test]
fn every_flag_the_readme_names_is_a_flag_of_the_server_or_the_client() {
    let mut ours = BTreeSet::new();
    long_flags(&pyrun_mcp_server::config::Cli::command_line(), &mut ours);
    long_flags(&pyrun_mcp_client::cli::Cli::command(), &mut ours);
    for flag in OTHER_PROGRAMS_FLAGS {
        assert!(
            !ours.contains(*flag),
            "{flag} is ours: take it off OTHER_PROGRAMS_FLAGS"
        );
    }
    let named = flags_in(&readme());
    assert!(
        named.contains("--projects-dir"),
        "the flag scan found {named:?}"
    );
    let unknown: Vec<&String> = named
        .iter()
        .filter(|flag| !ours.contains(*flag) && !OTHER_PROGRAMS_FLAGS.contains(&flag.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "the README names flags neither pyrun-mcp-server nor pyrun-mcp-client has: {unknown:?}"
    );
}

/// GitHub's anchor for a heading: lower case, spaces to dashes, other punctuation dropped.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// `text` without its fenced code blocks and HTML comments (neither renders a link).
fn prose(text: &str) -> String {
    let mut kept = String::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    let mut out = String::new();
    let mut rest = kept.as_str();
    while let Some(start) = rest.find("<!--") {
        out.push_str(&rest[..start]);
        rest = rest[start..]
            .find("-->")
            .map_or("", |end| &rest[start + end + 3..]);
    }
    out.push_str(rest);
    out
}

/// The anchors of a markdown file's headings.
fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .lines()
        .filter_map(|line| line.strip_prefix('#'))
        .map(|line| anchor(line.trim_start_matches('#')))
        .collect()
}

#[test]
fn every_link_of_the_readme_and_the_docs_pages_leads_to_a_file_and_heading_that_exist() {
    let root = workspace_root();
    let mut pages = vec![root.join("README.md"), root.join("SECURITY.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap().flatten() {
        if entry.path().extension().is_some_and(|e| e == "md") {
            pages.push(entry.path());
        }
    }
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        let prose = prose(&text);
        for link in prose.split("](").skip(1) {
            let Some(target) = link.split(')').next() else {
                continue;
            };
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(path)
            };
            let Ok(content) = std::fs::read(&file) else {
                broken.push(format!("{}: {target} (no such file)", page.display()));
                continue;
            };
            if !fragment.is_empty()
                && !anchors(&String::from_utf8_lossy(&content)).contains(fragment)
            {
                broken.push(format!("{}: {target} (no such heading)", page.display()));
            }
        }
    }
    assert!(
        checked > 20,
        "only {checked} links found: the scan is broken"
    );
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The README's first screens: everything a newcomer needs before the reference starts. A
/// quarter of the 981 lines the README had when what is protected came at line 350 and
/// connecting Claude at line 377.
const FIRST_SCREENS_LINES: usize = 250;

/// The 1-based line of the first line of `readme` that starts with `prefix`.
fn line_of(readme: &str, prefix: &str) -> usize {
    readme
        .lines()
        .position(|line| line.starts_with(prefix))
        .map(|at| at + 1)
        .unwrap_or_else(|| panic!("the README has no line starting with {prefix:?}"))
}

#[test]
fn the_readme_says_what_is_protected_per_platform_and_how_to_connect_claude_on_its_first_screens() {
    let readme = readme();
    let protected = line_of(&readme, "## What is protected");
    assert!(
        protected <= 100,
        "`What is protected` starts at line {protected}"
    );
    let table_head = readme[readme.find("## What is protected").unwrap()..]
        .lines()
        .find(|line| line.starts_with('|'))
        .unwrap_or_default()
        .to_owned();
    for platform in ["Linux", "macOS", "Windows"] {
        assert!(
            table_head.contains(platform),
            "the protection table's head: {table_head}"
        );
    }
    for heading in [
        "## Install",
        "### Claude Desktop",
        "### Claude Code",
        "### claude.ai",
        "## Tools",
    ] {
        let at = line_of(&readme, heading);
        assert!(at <= FIRST_SCREENS_LINES, "{heading} starts at line {at}");
    }
    let reference = line_of(&readme, "## Reference");
    assert!(
        reference <= FIRST_SCREENS_LINES,
        "the reference starts at line {reference}"
    );
    let developing = line_of(&readme, "## Developing");
    let suite = readme
        .lines()
        .position(|line| line.contains("bash scripts/test.sh"))
        .map(|at| at + 1)
        .expect("the README names the test-suite command");
    assert!(
        suite > developing,
        "the test suite (line {suite}) comes under Developing"
    );
}

/// The fenced `bash` blocks of the README's `## Try it`, each as its lines.
#[cfg(unix)]
fn try_it_blocks(readme: &str) -> Vec<Vec<String>> {
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Try it\n"))
        .expect("the README has a `## Try it` section");
    section
        .split("```bash\n")
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .map(|block| block.lines().map(str::to_owned).collect())
        .collect()
}

/// README's "Try it" works as written from a fresh clone: its build makes both programs, and
/// its commands, run by bash with those programs on PATH (the build's, here the tests'), do what
/// the comments say — the server listening (on a free port instead of 8000), the client's runs
/// and exit codes, the stdio `tools`.
#[cfg(unix)]
#[test]
fn the_readme_try_it_commands_work_as_written() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    let blocks = try_it_blocks(&readme());
    assert_eq!(
        blocks.len(),
        2,
        "a server block and a client block: {blocks:?}"
    );
    let build = &blocks[0][0];
    assert!(
        build.starts_with("cargo build")
            && build.contains("pyrun-mcp-server")
            && build.contains("pyrun-mcp-client"),
        "the first command builds both programs: {build}"
    );
    let bins = pyrun_mcp_tests::bin_path("pyrun-mcp-server");
    let bins = bins.parent().expect("the binaries' folder");
    let path = format!(
        "{}:{}",
        bins.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // A clone's folder: the samples (a private copy) at `python_projects`.
    let projects = pyrun_mcp_tests::projects_copy();
    let clone = tempfile::tempdir().expect("a temporary folder");
    std::os::unix::fs::symlink(projects.path(), clone.path().join("python_projects"))
        .expect("link the samples");
    let state = tempfile::tempdir().expect("a state folder");
    let bash = |script: &str| {
        let mut cmd = Command::new("bash");
        pyrun_mcp_tests::scrub_env(&mut cmd);
        cmd.env_remove("MCP_SERVER_URL")
            .env("PATH", &path)
            .env("PYRUN_STATE_DIR", state.path())
            .env("NO_COLOR", "1")
            .current_dir(clone.path())
            .arg("-c")
            .arg(script);
        cmd
    };

    // The server block, on a free port: its `listening on` line gives the URL.
    let server_lines: Vec<&String> = blocks[0][1..]
        .iter()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect();
    let script = server_lines
        .iter()
        .map(|l| {
            if l.starts_with("pyrun-mcp-server ") {
                format!("exec {l} --bind 127.0.0.1:0")
            } else {
                (*l).clone()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let mut server = bash(&script)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the server block");
    let stderr = server.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut url = None;
    while Instant::now() < deadline {
        let Some(Ok(line)) = lines.next() else { break };
        if let Some(found) = line.split("listening on ").nth(1) {
            url = Some(found.trim().trim_end_matches('/').to_owned());
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    let Some(url) = url else {
        let _ = server.kill();
        panic!("the server block printed no `listening on` line");
    };
    let port = url.rsplit(':').next().expect("a port").to_owned();

    for line in &blocks[1] {
        if line.trim_start().starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let command = line.replace("127.0.0.1:8000", &format!("127.0.0.1:{port}"));
        let out = bash(&command).output().expect("run a client line");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "`{line}` failed: {stdout}\n{stderr}");
        if let Some((_, said)) = line.split_once("  # ") {
            let said = said.trim();
            assert!(stdout.contains(said), "`{line}` printed {stdout}\n{stderr}");
        }
        if line.ends_with(" tools") {
            assert!(stdout.contains("run_python"), "`{line}`: {stdout}");
        }
    }
    let _ = server.kill();
    let _ = server.wait();
}
