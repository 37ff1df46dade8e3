//! How callers name files, end to end over stdio with the real binary: the neutral `/projects/...`
//! form, one refusal for every host path (so none probes where the folder lives), and a
//! listing no file name can add lines to.

use pyrun_mcp_tests::stdio::{text, StdioServer};
use pyrun_mcp_tests::TempProjects;
use serde_json::json;

/// `base/p1` is the projects folder; `base/outside.py` and `base/p1/sub/` are there to probe.
fn folder() -> (tempfile::TempDir, std::path::PathBuf) {
    TempProjects::named("p1")
        .file("hello.py", "print('hi')\n")
        .file("sub/inner.py", "print('inner')\n")
        .file("notes.txt", "x")
        .outside("outside.py", "print('ESCAPED')\n")
        .into_parts()
}

#[test]
fn the_neutral_projects_form_names_the_same_files() {
    let (_base, projects) = folder();
    let mut server = StdioServer::start(&projects, &[]);
    let run = server.call("run_python", json!({"file_name": "/projects/sub/inner.py"}));
    assert_eq!(text(&run), "inner\n", "{run}");
    let listed = server.call("list_python_files", json!({"directory": "/projects/sub"}));
    assert_eq!(
        listed["structuredContent"]["files"],
        json!(["sub/inner.py"])
    );
}

#[test]
fn every_host_path_gets_the_same_refusal_even_the_folders_own() {
    let (_base, projects) = folder();
    let root = projects.parent().unwrap().to_path_buf();
    let mut server = StdioServer::start(&projects, &[]);
    let host = |p: std::path::PathBuf| p.to_str().unwrap().to_owned();
    let probes = [
        host(projects.join("hello.py")),
        host(projects.join("sub/inner.py")),
        "../p1/hello.py".to_owned(),
        host(projects.join("missing.py")),
        host(projects.join("sub")),
        host(projects.join("notes.txt")),
        host(root.join("outside.py")),
        host(root.join("p2/x.py")),
        host(root.clone()),
        "/etc/passwd".to_owned(),
        "/no/such/dir/x.py".to_owned(),
        "../p1/missing.py".to_owned(),
    ];
    let mut answers = Vec::new();
    for probe in &probes {
        let result = server.call("run_python", json!({"file_name": probe}));
        assert_eq!(result["isError"], true, "{probe}: {result}");
        answers.push(text(&result).replace(probe.as_str(), "PATH"));
    }
    for probe in [
        host(projects.clone()),
        host(projects.join("sub")),
        host(projects.join("hello.py")),
        host(projects.join("nope")),
        host(root.clone()),
        "/etc".to_owned(),
    ] {
        let result = server.call("list_python_files", json!({"directory": probe}));
        assert_eq!(result["isError"], true, "{probe}: {result}");
        answers.push(text(&result).replace(probe.as_str(), "PATH"));
    }
    answers.dedup();
    assert_eq!(
        answers.len(),
        1,
        "the answers tell paths apart: {answers:#?}"
    );
    assert!(
        answers[0].contains("outside the projects folder"),
        "{}",
        answers[0]
    );
}

#[cfg(unix)]
#[test]
fn a_file_name_cannot_add_lines_to_the_listing() {
    let (_base, projects) = folder();
    std::fs::write(projects.join("a\nfake.py"), "").unwrap();
    std::fs::write(projects.join("b\r\u{1b}[2K\u{202e}yp.c.py"), "").unwrap();
    let mut server = StdioServer::start(&projects, &[]);
    let listed = server.call("list_python_files", json!({}));
    let shown = text(&listed);
    assert_eq!(
        shown.lines().collect::<Vec<_>>(),
        [
            "a\\nfake.py",
            "b\\r\\u{1b}[2K\\u{202e}yp.c.py",
            "hello.py",
            "sub/inner.py"
        ],
        "{shown:?}"
    );
    // The structured list keeps the real names, which run.
    let files = listed["structuredContent"]["files"].as_array().unwrap();
    assert!(files.contains(&json!("a\nfake.py")), "{files:?}");
    let run = server.call("run_python", json!({"file_name": "a\nfake.py"}));
    assert_eq!(run["isError"], false, "{run}");
}
