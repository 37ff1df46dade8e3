//! Inline code (`run_python_code`, `--allow-inline-code`) with the official Python MCP SDK over
//! Streamable HTTP, in both its modes: listed, run in a project folder with args and stdin, a
//! traceback that names no host path, and the size cap as a tool error; `install_packages`
//! (`--allow-install`) listed, and a smuggled option refused as a tool error. `list_packages`
//! (always offered) of a project with its own venv: the venv's packages and its name; a Python
//! session's round trip (state kept from one `session_exec` to the next).

use pyrun_mcp_tests::{args, python_client, HttpServer};

const TOKEN: &str = "python-sdk-inline-token";

#[test]
fn inline_code_runs_in_a_project_and_refuses_oversized_code_in_both_modes() {
    let server = HttpServer::samples(&[
        "--auth-token",
        TOKEN,
        "--allow-inline-code",
        "--max-code-bytes",
        "1000",
        "--allow-install",
        "--package-index",
        "http://127.0.0.1:1/simple/",
    ]);
    let url = server.mcp_url();
    // mathpkg gets a venv of the server's interpreter with one (metadata-only) package.
    let venv = server.projects().join("mathpkg/.venv");
    let made = std::process::Command::new(pyrun_mcp_tests::python())
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(made.success());
    let site = std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.is_dir())
        .unwrap();
    std::fs::create_dir_all(site.join("sdk_check-1.2.dist-info")).unwrap();
    std::fs::write(
        site.join("sdk_check-1.2.dist-info/METADATA"),
        "Metadata-Version: 2.1\nName: sdk-check\nVersion: 1.2\n",
    )
    .unwrap();
    let host_folder = std::fs::canonicalize(server.projects()).unwrap();
    for mode in ["legacy", "auto"] {
        let report = python_client(
            "python_sdk_inline.py",
            &args(&["--mode", mode, "--http", &url, "--token", TOKEN]),
        );
        assert!(
            report["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t == "run_python_code"),
            "{report}"
        );
        let ran = &report["calls"]["project"];
        assert_eq!(ran["is_error"], false, "{report}");
        assert_eq!(
            ran["structured"]["stdout"], "argv ['x', 'y z']\nstdin fed\ncwd has geometry.py True\n",
            "{report}"
        );
        assert_eq!(ran["structured"]["exit_code"], 0, "{report}");

        let raised = &report["calls"]["traceback"];
        let stderr = raised["structured"]["stderr"].as_str().unwrap();
        assert!(stderr.contains("ValueError: bad"), "{report}");
        assert!(stderr.contains("_pyrun_inline.py\", line 2"), "{report}");
        assert!(!stderr.contains(host_folder.to_str().unwrap()), "{report}");
        assert!(!stderr.contains("pyrun-mcp-"), "{report}");
        assert_eq!(raised["structured"]["exit_code"], 1, "{report}");

        let refused = &report["calls"]["install_refused"];
        assert_eq!(refused["is_error"], true, "{report}");
        assert!(
            refused["text"]
                .as_str()
                .unwrap()
                .contains("is an installer option"),
            "{report}"
        );
        assert!(
            report["tools"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t == "install_packages"),
            "{report}"
        );

        let packages = &report["calls"]["packages"];
        assert_eq!(packages["is_error"], false, "{report}");
        assert_eq!(
            packages["structured"]["packages"],
            serde_json::json!([{"name": "sdk-check", "version": "1.2"}]),
            "{report}"
        );
        assert_eq!(
            packages["structured"]["python"]["venv"], "mathpkg/.venv",
            "{report}"
        );
        assert_eq!(
            ran["structured"]["python"]["venv"], "mathpkg/.venv",
            "{report}"
        );
        let escape = &report["calls"]["packages_escape"];
        assert_eq!(escape["is_error"], true, "{report}");
        assert!(
            !escape["text"]
                .as_str()
                .unwrap()
                .contains(host_folder.to_str().unwrap()),
            "{report}"
        );

        let oversized = &report["calls"]["oversized"];
        assert_eq!(oversized["is_error"], true, "{report}");
        assert!(
            oversized["text"]
                .as_str()
                .unwrap()
                .contains("1200 bytes, more than the 1000 bytes"),
            "{report}"
        );

        let calls = &report["calls"];
        assert_eq!(calls["session_start"]["is_error"], false, "{report}");
        assert_eq!(
            calls["session_start"]["structured"]["project"], "mathpkg",
            "{report}"
        );
        assert_eq!(
            calls["session_set"]["structured"]["error"],
            serde_json::Value::Null,
            "{report}"
        );
        assert_eq!(
            calls["session_get"]["structured"]["result"], "42",
            "{report}"
        );
        assert_eq!(calls["session_stop"]["is_error"], false, "{report}");
    }
}
