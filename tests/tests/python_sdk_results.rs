//! What a run's result holds, through the official Python MCP SDK over Streamable HTTP in both
//! its modes: a 6000x3000 plot comes back at most 1568 px wide (its link reads the original
//! byte for byte), a CSV and a JSON artifact are previewed in the result's text, and a 50 MB
//! print returns its head and tail with what was cut, the whole capture behind a link and
//! get_run.

use std::process::Command;

use pyrun_mcp_tests::{args, python_client, HttpServer};

const TOKEN: &str = "python-sdk-results-token";

/// Writes a 6000x3000 PNG "plot" (white, a blue sine curve) to argv[1], with the standard
/// library only.
const MAKE_PLOT: &str = r#"
import math, struct, sys, zlib
w, h = 6000, 3000
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
curve = [int(1500 + 1000 * math.sin(x / 300)) for x in range(w)]
rows = []
for y in range(h):
    row = bytearray(b"\xff" * (3 * w))
    for x in range(w):
        if abs(curve[x] - y) < 6:
            row[3 * x:3 * x + 3] = b"\x1f\x77\xb4"
    rows.append(b"\x00" + bytes(row))
png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b""))
open(sys.argv[1], "wb").write(png)
"#;

const LEAVE_PLOT: &str = r#"
import os, shutil
shutil.copy("plot.png", os.path.join(os.environ["PYRUN_OUTPUT_DIR"], "plot.png"))
print("saved")
"#;

const TABLES: &str = r#"
import csv, json, os
out = os.environ["PYRUN_OUTPUT_DIR"]
with open(os.path.join(out, "data.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["id", "name", "value"])
    for i in range(1000):
        w.writerow([i, f"item {i}", i * 1.5])
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump({"rows": 1000}, f)
print("tables written")
"#;

const LOUD: &str = r#"
import sys
chunk = "".join(f"line {i:08d} {'x' * 88}\n" for i in range(10_000))
for block in range(50):
    sys.stdout.write(chunk.replace("line 0000", f"line {block:04d}"))
sys.stdout.write("THE END\n")
"#;

#[test]
fn pictures_tables_and_a_50_mb_print_come_back_sized_for_a_model_in_both_modes() {
    // Half the default capture: the SDK refuses a server-sent event over 1 MiB, which a whole
    // 1 MiB capture read as one resource would pass (docs/results.md says so).
    let server = HttpServer::samples(&["--auth-token", TOKEN, "--max-output-bytes", "524288"]);
    let projects = server.projects();
    for (name, code) in [
        ("leave_plot.py", LEAVE_PLOT),
        ("tables.py", TABLES),
        ("loud.py", LOUD),
    ] {
        std::fs::write(projects.join(name), code).unwrap();
    }
    let plot = projects.join("plot.png");
    let made = Command::new(pyrun_mcp_tests::python())
        .args(["-c", MAKE_PLOT])
        .arg(&plot)
        .status()
        .unwrap();
    assert!(made.success());
    let plot_path = plot.to_string_lossy().into_owned();
    let url = server.mcp_url();
    for mode in ["legacy", "auto"] {
        let report = python_client(
            "python_sdk_results.py",
            &args(&[
                "--mode",
                mode,
                "--http",
                &url,
                "--token",
                TOKEN,
                "--original",
                &plot_path,
            ]),
        );
        // The plot: scaled to 1568 px on its longest edge, aspect kept; the link is the original.
        let images = report["plot"]["images"].as_array().unwrap();
        assert_eq!(images.len(), 1, "{report}");
        assert_eq!(images[0]["png"], true, "{report}");
        assert_eq!(images[0]["width"], 1568, "{report}");
        assert_eq!(images[0]["height"], 784, "{report}");
        assert!(images[0]["base64_bytes"].as_u64().unwrap() <= 1_500_000);
        assert_eq!(report["plot"]["link_same_bytes"], true, "{report}");

        // The table and the JSON file, previewed in the text.
        let tables = report["tables"]["text"].as_str().unwrap();
        assert!(
            tables.contains("preview of data.csv: 1000 rows x 3 columns (the header and first 10):\n| id | name | value |"),
            "{tables}"
        );
        assert!(tables.contains("| 9 | item 9 | 13.5 |"), "{tables}");
        assert!(
            tables.contains("preview of summary.json: {\n  \"rows\": 1000\n}"),
            "{tables}"
        );

        // The 50 MB print: head and tail with counts, small text and structured content, the
        // whole capture behind the link and get_run.
        let loud = &report["loud"];
        assert!(loud["text_bytes"].as_u64().unwrap() < 60_000, "{loud}");
        assert!(
            loud["structured_bytes"].as_u64().unwrap() < 60_000,
            "{loud}"
        );
        assert!(
            loud["text_head"]
                .as_str()
                .unwrap()
                .starts_with("line 00000000 x"),
            "{loud}"
        );
        assert!(
            // The real end of the output, then the hint naming the output cap.
            loud["text_tail"]
                .as_str()
                .unwrap()
                .contains("THE END\n\nhint: output over 524288 bytes"),
            "{loud}"
        );
        let cut = &loud["stdout_cut"];
        assert_eq!(cut["total_bytes"], 50 * 10_000 * 103 + 8, "{loud}");
        assert_eq!(cut["captured_bytes"], 524_288, "{loud}");
        let counts = format!(
            "[... {} bytes ({} lines) of stdout cut here",
            cut["omitted_bytes"], cut["omitted_lines"]
        );
        assert!(loud["text"].as_str().unwrap().contains(&counts), "{loud}");
        assert_eq!(loud["whole_bytes"], 524_288, "{loud}");
        assert_eq!(loud["page_matches"], true, "{loud}");
    }
}
