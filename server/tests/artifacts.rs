//! Artifacts end to end through the real server over stdio: what a script leaves in
//! `PYRUN_OUTPUT_DIR` comes back as image blocks, resource links, structured `artifacts` and
//! notes; links, FIFOs and the like are named and never followed; `plt.show()` gives PNGs.
#![cfg(unix)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use crate::util;
use base64::Engine as _;
use pyrun_mcp_tests::stdio::{text, StdioServer};
use serde_json::{json, Value};

/// Writes a real 1x1 PNG, a CSV, links to a secret of the project and to /etc/passwd, and a FIFO
/// into its output folder.
const LEAVE_FILES: &str = r#"
import os, struct, zlib
out = os.environ["PYRUN_OUTPUT_DIR"]
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))
with open(os.path.join(out, "dot.png"), "wb") as f:
    f.write(png)
with open(os.path.join(out, "table.csv"), "w") as f:
    f.write("a,b\n1,2\n")
os.symlink(os.path.join(os.getcwd(), "secret.txt"), os.path.join(out, "secret-link"))
os.symlink("/etc/passwd", os.path.join(out, "passwd"))
os.mkfifo(os.path.join(out, "pipe"))
print("left", sorted(os.listdir(out)))
"#;

const SECRET: &str = "the project's secret";

fn blocks<'a>(result: &'a Value, kind: &str) -> Vec<&'a Value> {
    result["content"]
        .as_array()
        .unwrap_or_else(|| panic!("no content in {result}"))
        .iter()
        .filter(|b| b["type"] == kind)
        .collect()
}

fn decoded(image: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(image["data"].as_str().unwrap())
        .unwrap()
}

#[test]
fn a_runs_files_come_back_as_images_links_and_notes_and_links_or_fifos_are_never_followed() {
    let (dir, _) = util::project(&[("leave.py", LEAVE_FILES), ("secret.txt", SECRET)]);
    let mut server = StdioServer::start(dir.path(), &[]);
    let result = server.call("run_python", json!({"file_name": "leave.py"}));
    let s = &result["structuredContent"];
    assert_eq!(s["exit_code"], 0, "{result}");

    // The picture, inline and really a PNG.
    let images = blocks(&result, "image");
    assert_eq!(images.len(), 1, "{result}");
    assert_eq!(images[0]["mimeType"], "image/png");
    assert!(decoded(images[0]).starts_with(b"\x89PNG\r\n\x1a\n"));

    // A link per kept file, with the structured list saying the same.
    let links = blocks(&result, "resource_link");
    let names: Vec<_> = links.iter().map(|l| l["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["dot.png", "table.csv"]);
    let artifacts = s["artifacts"].as_array().unwrap();
    assert_eq!(artifacts.len(), 2);
    let csv = &artifacts[1];
    assert_eq!(csv["name"], "table.csv");
    assert_eq!(csv["size"], 8);
    assert_eq!(csv["mime_type"], "text/csv");
    let uri = csv["uri"].as_str().unwrap();
    assert!(
        uri.starts_with("pyrun://runs/run_") && uri.ends_with("/files/table.csv"),
        "{uri}"
    );
    assert_eq!(links[1]["uri"], csv["uri"]);
    assert_eq!(links[1]["mimeType"], "text/csv");

    // Links and the FIFO: named with the reason, never followed (the secret is nowhere).
    let skipped: Vec<(String, String)> = serde_json::from_value(
        s["skipped_artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| json!([v["name"], v["reason"]]))
            .collect(),
    )
    .unwrap();
    let link = "not a regular file (symbolic link)";
    assert_eq!(
        skipped,
        [
            ("passwd".into(), link.into()),
            ("pipe".into(), "not a regular file (FIFO)".into()),
            ("secret-link".into(), link.into()),
        ]
    );
    let text = text(&result);
    assert!(
        text.contains("artifact not kept: pipe (not a regular file (FIFO))"),
        "{text}"
    );
    assert!(
        text.contains("artifact: table.csv (text/csv, 8 bytes) pyrun://runs/"),
        "{text}"
    );
    assert!(!result.to_string().contains(SECRET));
    assert!(!result.to_string().contains("root:"));

    // The next run starts with an empty output folder, and the server serves on.
    std::fs::write(
        dir.path().join("look.py"),
        "import os; print(os.listdir(os.environ['PYRUN_OUTPUT_DIR']))",
    )
    .unwrap();
    let again = server.call("run_python", json!({"file_name": "look.py"}));
    assert_eq!(again["structuredContent"]["stdout"], "[]\n", "{again}");
    assert_eq!(again["structuredContent"]["artifacts"], json!([]));
    assert_eq!(again["structuredContent"]["skipped_artifacts"], json!([]));
    assert_eq!(blocks(&again, "resource_link").len(), 0);
    server.close();
}

#[test]
fn an_artifact_link_reads_back_for_its_caller_and_a_mangled_one_is_not_found() {
    let (dir, _) = util::project(&[("leave.py", LEAVE_FILES), ("secret.txt", SECRET)]);
    let mut server = StdioServer::start(dir.path(), &[]);
    let result = server.call("run_python", json!({"file_name": "leave.py"}));
    let csv = result["structuredContent"]["artifacts"][1]["uri"]
        .as_str()
        .unwrap()
        .to_owned();
    let read = server.request("resources/read", json!({"uri": csv}));
    let contents = &read["result"]["contents"][0];
    assert_eq!(contents["text"], "a,b\n1,2\n", "{read}");
    assert_eq!(contents["mimeType"], "text/csv");
    let png = result["structuredContent"]["artifacts"][0]["uri"]
        .as_str()
        .unwrap()
        .to_owned();
    let read = server.request("resources/read", json!({"uri": png}));
    let blob = read["result"]["contents"][0]["blob"].as_str().unwrap();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .unwrap();
    assert!(bytes.starts_with(b"\x89PNG"));
    // Another run id, a link's name, a path out: all the same "not found", no host path.
    let other = csv.replace("/files/", "0/files/");
    for uri in [
        other,
        csv.replace("table.csv", "secret-link"),
        csv.replace("table.csv", "..%2F..%2Fsecret.txt"),
    ] {
        let read = server.request("resources/read", json!({"uri": uri}));
        let message = read["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("no artifact"), "{uri}: {read}");
        assert!(!read.to_string().contains("/tmp/"), "{read}");
    }
    server.close();
}

/// An interpreter with matplotlib: the tests' own, else Debian's `/usr/bin/python3`. `None`
/// (with the reason printed) when there is none; with `PYRUN_REQUIRE_MATPLOTLIB=1` (set by
/// `scripts/test.sh`) that fails the test instead.
fn python_with_matplotlib() -> Option<PathBuf> {
    let has = |python: &PathBuf| {
        Command::new(python)
            .args(["-c", "import matplotlib"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let found = [pyrun_mcp_tests::python(), PathBuf::from("/usr/bin/python3")]
        .into_iter()
        .find(has);
    if found.is_none() {
        let required = std::env::var_os("PYRUN_REQUIRE_MATPLOTLIB").is_some_and(|v| v == "1");
        assert!(
            !required,
            "PYRUN_REQUIRE_MATPLOTLIB=1 but neither the tests' interpreter nor /usr/bin/python3 \
             has matplotlib (apt-get install python3-matplotlib)"
        );
        eprintln!("skipped: no interpreter with matplotlib (apt-get install python3-matplotlib)");
    }
    found
}

const TWO_FIGURES: &str = r#"
import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [1, 4, 9])
plt.figure()
plt.bar(["a", "b"], [3, 5])
plt.show()
plt.plot([0, 1], [1, 0])
plt.show()
print("shown")
"#;

#[test]
fn plt_show_hands_back_each_open_figure_as_a_png_in_every_sandbox_mode() {
    let Some(python) = python_with_matplotlib() else {
        return;
    };
    let python = python.to_string_lossy().into_owned();
    let (dir, _) = util::project(&[("figures.py", TWO_FIGURES)]);
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../python_projects/plot_demo.py"
        ),
        dir.path().join("plot_demo.py"),
    )
    .unwrap();
    for mode in ["standard", "off"] {
        let mut server = StdioServer::start(dir.path(), &["--python", &python, "--sandbox", mode]);
        let started = Instant::now();
        let result = server.call("run_python", json!({"file_name": "figures.py"}));
        let took = started.elapsed();
        let s = &result["structuredContent"];
        assert_eq!(s["exit_code"], 0, "{mode}: {result}");
        assert_eq!(s["stdout"], "shown\n", "{mode}: {result}");
        // No warning about config or cache folders on every run.
        assert_eq!(s["stderr"], "", "{mode}: {result}");
        let names: Vec<_> = s["artifacts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            names,
            ["figure-1.png", "figure-2.png", "figure-3.png"],
            "{mode}"
        );
        let images = blocks(&result, "image");
        assert_eq!(images.len(), 3, "{mode}");
        for image in images {
            assert!(decoded(image).starts_with(b"\x89PNG\r\n\x1a\n"));
        }
        eprintln!("{mode}: a run with three figures took {took:?}");

        let demo = server.call("run_python", json!({"file_name": "plot_demo.py"}));
        assert_eq!(demo["structuredContent"]["exit_code"], 0, "{demo}");
        assert_eq!(blocks(&demo, "image").len(), 1, "{demo}");
        server.close();
    }
}

#[test]
fn the_plot_demo_says_so_and_exits_cleanly_without_matplotlib() {
    // `-I` style isolation is not needed: a folder that shadows matplotlib with a broken one.
    let (dir, _) = util::project(&[("matplotlib/__init__.py", "raise ImportError('none here')")]);
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../python_projects/plot_demo.py"
        ),
        dir.path().join("plot_demo.py"),
    )
    .unwrap();
    let mut server = StdioServer::start(dir.path(), &[]);
    let result = server.call("run_python", json!({"file_name": "plot_demo.py"}));
    assert_eq!(result["structuredContent"]["exit_code"], 0, "{result}");
    assert!(
        text(&result).contains("matplotlib is not installed"),
        "{result}"
    );
    server.close();
}
