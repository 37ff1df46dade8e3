//! Results sized for a model, through the real server over stdio: a large picture comes back at
//! most 1568 px (its link reads the original byte for byte), a decompression bomb falls back to
//! its link with the reason, a 50 MB print shows its head and tail with what was cut and keeps
//! the whole capture behind a link and get_run, and a CSV or JSON artifact is previewed.
#![cfg(unix)]

use std::io::Cursor;

use base64::Engine as _;
use pyrun_mcp_tests::stdio::{text, StdioServer};
use serde_json::{json, Value};

use crate::util;

fn blocks<'a>(result: &'a Value, kind: &str) -> Vec<&'a Value> {
    result["content"]
        .as_array()
        .unwrap_or_else(|| panic!("no content in {result}"))
        .iter()
        .filter(|b| b["type"] == kind)
        .collect()
}

fn base64_decoded(data: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap()
}

/// A 6000x3000 "plot": a white canvas with a few coloured curves, as matplotlib leaves them.
fn big_plot_png() -> Vec<u8> {
    let (width, height) = (6000u32, 3000u32);
    let image = image::RgbImage::from_fn(width, height, |x, y| {
        let curve = (f64::from(x) / 300.0).sin() * 1000.0 + 1500.0;
        if (f64::from(y) - curve).abs() < 6.0 {
            image::Rgb([31, 119, 180])
        } else if x % 500 == 0 || y % 500 == 0 {
            image::Rgb([220, 220, 220])
        } else {
            image::Rgb([255, 255, 255])
        }
    });
    let mut out = Cursor::new(Vec::new());
    image::DynamicImage::ImageRgb8(image)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

/// Copies `plot.png` of the project (made by the test) into the run's output folder.
const LEAVE_PLOT: &str = r#"
import os, shutil
shutil.copy("plot.png", os.path.join(os.environ["PYRUN_OUTPUT_DIR"], "plot.png"))
print("saved")
"#;

#[test]
fn a_6000x3000_plot_comes_back_at_most_1568_px_and_its_link_reads_the_original_byte_for_byte() {
    let original = big_plot_png();
    let (dir, _) = util::project(&[("leave.py", LEAVE_PLOT)]);
    std::fs::write(dir.path().join("plot.png"), &original).unwrap();
    let mut server = StdioServer::start(dir.path(), &[]);
    let result = server.call("run_python", json!({"file_name": "leave.py"}));
    assert_eq!(result["structuredContent"]["exit_code"], 0, "{result}");

    let images = blocks(&result, "image");
    assert_eq!(images.len(), 1, "{}", text(&result));
    assert_eq!(images[0]["mimeType"], "image/png");
    let data = images[0]["data"].as_str().unwrap();
    assert!(data.len() <= 1_500_000, "{} bytes of base64", data.len());
    let shown = image::load_from_memory(&base64_decoded(data)).unwrap();
    assert_eq!((shown.width(), shown.height()), (1568, 784));
    let notes = text(&result);
    assert!(
        notes.contains("shown inline scaled: plot.png (1568x784 PNG, from 6000x3000; the original is at its link)"),
        "{notes}"
    );

    let link = blocks(&result, "resource_link")[0]["uri"]
        .as_str()
        .unwrap()
        .to_owned();
    let read = server.request("resources/read", json!({"uri": link}));
    let blob = read["result"]["contents"][0]["blob"].as_str().unwrap();
    assert!(
        base64_decoded(blob) == original,
        "the link must read the original"
    );
    server.close();
}

/// A PNG whose header claims 100000x100000 pixels (a decompression bomb's shape), with a valid
/// CRC and a tiny body.
const LEAVE_BOMB: &str = r#"
import os, struct, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
png = (b"\x89PNG\r\n\x1a\n"
       + chunk(b"IHDR", struct.pack(">IIBBBBB", 100000, 100000, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(b"\x00" * 4096)) + chunk(b"IEND", b""))
with open(os.path.join(os.environ["PYRUN_OUTPUT_DIR"], "bomb.png"), "wb") as f:
    f.write(png)
with open(os.path.join(os.environ["PYRUN_OUTPUT_DIR"], "broken.png"), "wb") as f:
    f.write(png[:33] + b"garbage, not a zlib stream" * 10)
print("left a bomb")
"#;

#[test]
fn a_png_claiming_100000x100000_pixels_or_a_broken_one_falls_back_to_its_link_with_the_reason() {
    let (dir, _) = util::project(&[("bomb.py", LEAVE_BOMB)]);
    let mut server = StdioServer::start(dir.path(), &[]);
    let result = server.call("run_python", json!({"file_name": "bomb.py"}));
    assert_eq!(result["structuredContent"]["exit_code"], 0, "{result}");
    assert!(blocks(&result, "image").is_empty(), "{result}");
    assert_eq!(blocks(&result, "resource_link").len(), 2);
    let notes = text(&result);
    assert!(
        notes.contains("not shown inline: bomb.png (100000x100000 px is too large to decode"),
        "{notes}"
    );
    assert!(
        notes.contains("not shown inline: broken.png (not a picture the server could"),
        "{notes}"
    );
    // The server serves on.
    let again = server.call("run_python", json!({"file_name": "bomb.py"}));
    assert_eq!(again["structuredContent"]["exit_code"], 0, "{again}");
    server.close();
}

/// Twelve PNGs of 16384x16384 grey pixels of one colour: 260 KB each, seconds of the server's
/// CPU each to decode and scale.
const LEAVE_SCALING_BOMBS: &str = r#"
import os, struct, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
edge = 16384
z = zlib.compressobj(9)
row = b"\x00" * (edge + 1)
body = b"".join(z.compress(row) for _ in range(edge)) + z.flush()
png = (b"\x89PNG\r\n\x1a\n"
       + chunk(b"IHDR", struct.pack(">IIBBBBB", edge, edge, 8, 0, 0, 0, 0))
       + chunk(b"IDAT", body) + chunk(b"IEND", b""))
for i in range(12):
    with open(os.path.join(os.environ["PYRUN_OUTPUT_DIR"], f"bomb{i:02}.png"), "wb") as f:
        f.write(png)
print("left twelve")
"#;

#[test]
fn scaling_a_results_pictures_stops_after_its_time_and_the_rest_are_links() {
    let (dir, _) = util::project(&[("bombs.py", LEAVE_SCALING_BOMBS)]);
    let mut server = StdioServer::start(dir.path(), &[]);
    let started = std::time::Instant::now();
    let result = server.call("run_python", json!({"file_name": "bombs.py"}));
    let took = started.elapsed();
    assert_eq!(result["structuredContent"]["exit_code"], 0, "{result}");
    assert_eq!(blocks(&result, "resource_link").len(), 12, "{result}");
    let notes = text(&result);
    assert!(
        notes.contains("16384x16384 px needs scaling, and the server spent the 5 s"),
        "{notes}"
    );
    assert!(
        !blocks(&result, "image").is_empty(),
        "the first ones are scaled: {notes}"
    );
    assert!(took < std::time::Duration::from_secs(30), "{took:?}");
    server.close();
}

/// 50 MB of numbered lines, then one last line.
const PRINT_50_MB: &str = r#"
import sys
line = "x" * 88
chunk = "".join(f"line {i:08d} {line}\n" for i in range(10_000))
for block in range(50):
    sys.stdout.write(chunk.replace("line 0000", f"line {block:04d}"))
sys.stdout.write("THE END\n")
"#;

#[test]
fn a_script_printing_50_mb_returns_head_and_tail_with_counts_and_the_whole_capture_behind_a_link_and_get_run(
) {
    let (dir, _) = util::project(&[("loud.py", PRINT_50_MB)]);
    let mut server = StdioServer::start(dir.path(), &[]);
    let result = server.call("run_python", json!({"file_name": "loud.py"}));
    let s = &result["structuredContent"];
    assert_eq!(s["exit_code"], 0, "{}", &text(&result)[..2000]);
    // Neither the text nor the structured content carries the megabyte.
    assert!(
        result.to_string().len() < 150_000,
        "{} bytes",
        result.to_string().len()
    );
    let shown = text(&result);
    assert!(shown.starts_with("line 00000000 x"), "{}", &shown[..200]);
    assert!(
        shown.contains("line 00499950"),
        "the tail is how the output really ended"
    );
    let stdout = s["stdout"].as_str().unwrap();
    let last = format!("line 00499999 {}\nTHE END\n", "x".repeat(88));
    assert!(stdout.ends_with(&last), "{}", &stdout[stdout.len() - 300..]);
    assert!(stdout.len() <= 24 * 1024 + 1024, "{}", stdout.len());

    let cut = &s["stdout_cut"];
    let total = 50 * 10_000 * (14 + 88 + 1) + "THE END\n".len();
    assert_eq!(cut["total_bytes"], total, "{cut}");
    assert_eq!(cut["captured_bytes"], 1 << 20);
    let shown_lines = stdout.lines().count() as u64 - 1;
    assert_eq!(
        cut["omitted_lines"].as_u64().unwrap() + shown_lines,
        500_001
    );
    let line = format!(
        "[... {} bytes ({} lines) of stdout cut here",
        cut["omitted_bytes"], cut["omitted_lines"]
    );
    assert!(shown.contains(&line), "{line} not in the text");
    assert!(shown.contains("The server kept its first 1048576 bytes"));

    // The whole capture behind its link, and by offset with get_run.
    let uri = cut["uri"].as_str().unwrap();
    let run_id = cut["run_id"].as_str().unwrap();
    assert_eq!(uri, format!("pyrun://runs/{run_id}/stdout"));
    assert!(shown.contains(uri));
    let read = server.request("resources/read", json!({"uri": uri}));
    let whole = read["result"]["contents"][0]["text"].as_str().unwrap();
    assert_eq!(whole.len(), 1 << 20);
    assert!(whole.starts_with("line 00000000 x"));
    let head = cut["head_bytes"].as_u64().unwrap();
    let page = server.call("get_run", json!({"run_id": run_id, "stdout_offset": head}));
    let next = page["structuredContent"]["stdout"].as_str().unwrap();
    assert_eq!(next, &whole[head as usize..head as usize + next.len()]);
    assert!(next.starts_with("line "), "{}", &next[..100]);
    server.close();
}

/// A CSV of 1000 rows and a small JSON file.
const LEAVE_TABLES: &str = r#"
import csv, json, os
out = os.environ["PYRUN_OUTPUT_DIR"]
with open(os.path.join(out, "data.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["id", "name", "value"])
    for i in range(1000):
        w.writerow([i, f"item {i}", i * 1.5])
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump({"rows": 1000, "mean": 749.25}, f)
print("tables written")
"#;

#[test]
fn a_csv_and_a_json_artifact_are_previewed_with_counts_header_and_first_rows() {
    let (dir, _) = util::project(&[("tables.py", LEAVE_TABLES)]);
    let mut server = StdioServer::start(dir.path(), &[]);
    let result = server.call("run_python", json!({"file_name": "tables.py"}));
    let shown = text(&result);
    assert!(
        shown.contains(
            "preview of data.csv: 1000 rows x 3 columns (the header and first 10):\n\
             | id | name | value |\n|---|---|---|\n| 0 | item 0 | 0.0 |\n"
        ),
        "{shown}"
    );
    assert!(shown.contains("| 9 | item 9 | 13.5 |"), "{shown}");
    assert!(!shown.contains("item 10 "), "{shown}");
    assert!(
        shown.contains("preview of summary.json: {\n  \"mean\": 749.25,\n  \"rows\": 1000\n}"),
        "{shown}"
    );
    let artifacts = result["structuredContent"]["artifacts"].as_array().unwrap();
    let csv = artifacts.iter().find(|a| a["name"] == "data.csv").unwrap();
    assert!(csv["preview"]
        .as_str()
        .unwrap()
        .starts_with("1000 rows x 3 columns"));
    server.close();
}

#[test]
fn the_result_output_setting_sizes_what_a_result_shows() {
    let (dir, _) = util::project(&[(
        "ten_kb.py",
        "for i in range(1000):\n    print(f'{i:09d}')\n",
    )]);
    let mut server = StdioServer::start(dir.path(), &["--max-result-output-bytes", "2048"]);
    let result = server.call("run_python", json!({"file_name": "ten_kb.py"}));
    let cut = &result["structuredContent"]["stdout_cut"];
    assert_eq!(cut["total_bytes"], 10_000, "{result}");
    assert_eq!(cut["captured_bytes"], 10_000);
    let stdout = result["structuredContent"]["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("000000000\n") && stdout.ends_with("000000999\n"));
    assert!(stdout.len() < 2048 + 400, "{}", stdout.len());
    server.close();
}

#[test]
fn a_cut_output_stays_readable_after_run_python_code_and_after_a_run_that_could_have_been_handed_over(
) {
    let code = "for i in range(1000):\n    print(f'{i:09d}')\n";
    let (dir, _) = util::project(&[("ten_kb.py", code)]);
    let mut server = StdioServer::start(
        dir.path(),
        &[
            "--max-result-output-bytes",
            "2048",
            "--allow-inline-code",
            "--detach-after",
            "30",
        ],
    );
    let inline = server.call("run_python_code", json!({"code": code}));
    let detachable = server.call("run_python", json!({"file_name": "ten_kb.py"}));
    for result in [inline, detachable] {
        let cut = &result["structuredContent"]["stdout_cut"];
        let run_id = cut["run_id"].as_str().unwrap_or_else(|| panic!("{result}"));
        let head = cut["head_bytes"].as_u64().unwrap();
        let page = server.call("get_run", json!({"run_id": run_id, "stdout_offset": head}));
        let rest = page["structuredContent"]["stdout"].as_str().unwrap();
        assert_eq!(rest.len() as u64, 10_000 - head, "{page}");
        assert!(rest.ends_with("000000999\n"));
        let read = server.request("resources/read", json!({"uri": cut["uri"]}));
        assert_eq!(
            read["result"]["contents"][0]["text"]
                .as_str()
                .unwrap()
                .len(),
            10_000
        );
        // Kept for reading, not listed as a background run.
        let listed = server.call("list_runs", json!({}));
        assert_eq!(listed["structuredContent"]["runs"], json!([]), "{listed}");
    }
    // A mangled or unknown output URI is "not found", as an unknown artifact is.
    let unknown = format!("pyrun://runs/run_{}/stdout", "0".repeat(32));
    let read = server.request("resources/read", json!({"uri": unknown}));
    assert!(
        read["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("no run output"),
        "{read}"
    );
    server.close();
}

/// A `\r` progress bar reaches a model as its last frame per line, in the text and in the
/// structured `stdout`/`stderr` alike; a caller that follows the live output (the CLI, to print
/// it) gets every byte, and so does the whole capture.
#[test]
fn progress_frames_reach_a_model_as_the_last_frame_of_each_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bar.py"),
        "import sys\nprint('start')\nfor i in range(101):\n    sys.stdout.write('\\r%3d%%' % i)\n\
         \x20   sys.stderr.write('\\rstep %d' % i)\nprint()\nsys.stderr.write('\\n')\nprint('done')\n",
    )
    .unwrap();
    let mut server = StdioServer::start(dir.path(), &[]);
    let result = server.call("run_python", json!({"file_name": "bar.py"}));
    let structured = &result["structuredContent"];
    assert_eq!(structured["stdout"], "start\n100%\ndone\n", "{result}");
    assert_eq!(structured["stderr"], "step 100\n", "{result}");
    let shown = text(&result);
    assert!(shown.starts_with("start\n100%\ndone\n"), "{shown}");
    assert!(!shown.contains('\r'), "{shown}");
    // Asked for live chunks (`_meta`), the result keeps every frame.
    let reply = server.request(
        "tools/call",
        json!({"name": "run_python", "arguments": {"file_name": "bar.py"},
               "_meta": {"progressToken": "bar", "pyrun/live_output": true}}),
    );
    let raw = reply["result"]["structuredContent"]["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(raw.starts_with("start\n\r  0%\r  1%"), "{reply}");
    assert!(raw.ends_with("\r100%\ndone\n"), "{reply}");
}
