//! Background runs and plots with the official Python MCP SDK (`mcp`), in both its modes:
//! `start_python` → `get_run` (long polls with offsets) until the run ends; the figure that
//! `plot_demo.py` draws with `plt.show()` arrives as image content that decodes to a real PNG,
//! and its `resource_link` reads back the same PNG with `resources/read`.

use std::path::Path;
use std::process::Command;

use pyrun_mcp_tests::{args, python_client, ServerLaunch};

const TOKEN: &str = "python-sdk-runs-token";

/// Debian's interpreter, where the full suite installs matplotlib (`scripts/test.sh`).
const PLOTTING_PYTHON: &str = "/usr/bin/python3";

fn has_matplotlib(python: &str) -> bool {
    Path::new(python).exists()
        && Command::new(python)
            .args(["-c", "import matplotlib"])
            .output()
            .is_ok_and(|out| out.status.success())
}

#[test]
fn a_plot_started_in_the_background_comes_back_as_a_png_in_both_modes() {
    assert!(
        has_matplotlib(PLOTTING_PYTHON),
        "{PLOTTING_PYTHON} has no matplotlib: scripts/test.sh installs python3-matplotlib"
    );
    let server = ServerLaunch::samples()
        .args(["--auth-token", TOKEN, "--python", PLOTTING_PYTHON])
        .http();
    let url = server.mcp_url();
    for mode in ["legacy", "auto"] {
        let report = python_client(
            "python_sdk_runs.py",
            &args(&[
                "--mode",
                mode,
                "--http",
                &url,
                "--token",
                TOKEN,
                "--file",
                "plot_demo.py",
            ]),
        );
        assert_eq!(report["status"], "exited", "{report}");
        assert_eq!(report["exit_code"], 0, "{report}");
        assert!(
            report["stdout"]
                .as_str()
                .unwrap()
                .contains("plotted sin and cos"),
            "{report}"
        );
        let image = &report["images"][0];
        assert_eq!(image["png"], true, "{report}");
        assert!(image["width"].as_u64().unwrap() >= 100, "{report}");
        assert!(image["height"].as_u64().unwrap() >= 100, "{report}");
        assert_eq!(report["artifacts"][0]["name"], "figure-1.png", "{report}");
        let link = report["links"][0].as_str().expect("a resource link");
        assert_eq!(report["artifacts"][0]["uri"], link, "{report}");
        let read = &report["read_back"][0];
        assert_eq!(read["png"], true, "{report}");
        assert_eq!(read["mime"], "image/png", "{report}");
        assert_eq!(
            read["size"], image["size"],
            "the link reads the same PNG: {report}"
        );
        let run_id = report["run_id"].as_str().unwrap();
        assert!(
            report["listed"]
                .as_array()
                .unwrap()
                .iter()
                .any(|id| id == run_id),
            "{report}"
        );
    }
}
