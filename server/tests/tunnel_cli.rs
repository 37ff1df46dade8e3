//! `--tunnel ngrok` refuses what it must (no auth token, no ngrok authtoken, stdio) and fails
//! fast with a clear message when ngrok cannot be reached — never a hang. The real ngrok service
//! is not reachable from CI; a closed port and a silent one stand in for "no network".

#[cfg(feature = "tunnel")]
use std::net::TcpListener;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// A run of the server that must end by itself; the bound is far above the server's own.
fn server(args: &[&str], env: &[(&str, &str)]) -> Output {
    let projects = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pyrun-mcp-server"));
    cmd.args(["--bind", "127.0.0.1:0", "--projects-dir"])
        .arg(projects.path())
        .args(args)
        .current_dir(projects.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for name in pyrun_mcp_server::config::ENV_VARS {
        cmd.env_remove(name);
    }
    cmd.envs(env.iter().copied());
    let mut child = cmd.spawn().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the server hung with {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

fn failed_saying(out: &Output, words: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "exit 0: {stderr}");
    for word in words {
        assert!(stderr.contains(word), "{word:?} missing from: {stderr}");
    }
    assert!(
        !stderr.contains("listening on"),
        "it served anyway: {stderr}"
    );
}

#[test]
fn a_tunnel_without_an_auth_token_is_refused_even_when_unauthenticated_is_allowed() {
    let env = [("NGROK_AUTHTOKEN", "ngrok-token")];
    let out = server(&["--tunnel", "ngrok"], &env);
    failed_saying(&out, &["without an auth token", "MCP_AUTH_TOKEN"]);
    let out = server(&["--tunnel", "ngrok", "--allow-unauthenticated"], &env);
    failed_saying(&out, &["without an auth token"]);
}

#[test]
fn a_tunnel_without_an_ngrok_authtoken_or_over_stdio_is_refused() {
    let out = server(&["--tunnel", "ngrok", "--auth-token", "t0ken"], &[]);
    failed_saying(&out, &["NGROK_AUTHTOKEN", "dashboard.ngrok.com"]);
    let out = server(
        &["--tunnel", "ngrok", "--transport", "stdio"],
        &[("MCP_AUTH_TOKEN", "t0ken"), ("NGROK_AUTHTOKEN", "x")],
    );
    failed_saying(&out, &["--tunnel needs the HTTP transport"]);
    let out = server(
        &[
            "--tunnel",
            "ngrok",
            "--tunnel-domain",
            "https://x.ngrok.app/",
        ],
        &[("MCP_AUTH_TOKEN", "t0ken"), ("NGROK_AUTHTOKEN", "x")],
    );
    failed_saying(&out, &["--tunnel-domain", "https://x.ngrok.app/"]);
}

const READY: [(&str, &str); 2] = [("MCP_AUTH_TOKEN", "t0ken"), ("NGROK_AUTHTOKEN", "x")];

#[cfg(not(feature = "tunnel"))]
#[test]
fn without_the_feature_the_tunnel_says_how_to_get_it() {
    let out = server(&["--tunnel", "ngrok"], &READY);
    failed_saying(
        &out,
        &[
            "without tunnel support",
            "--features tunnel",
            "start-tunnel",
        ],
    );
}

#[cfg(feature = "tunnel")]
#[test]
fn an_unreachable_ngrok_service_is_a_clear_error() {
    // A port nothing listens on: connection refused, as with no network.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let out = server(&["--tunnel", "ngrok", "--ngrok-server-addr", &addr], &READY);
    failed_saying(&out, &["cannot reach the ngrok service", "hint:"]);
}

#[cfg(feature = "tunnel")]
#[test]
fn a_silent_ngrok_service_times_out_instead_of_hanging() {
    // Accepts the connection and never answers the TLS handshake.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    let out = server(&["--tunnel", "ngrok", "--ngrok-server-addr", &addr], &READY);
    failed_saying(&out, &["did not answer within", "hint:"]);
    drop(silent);
}

#[cfg(feature = "tunnel")]
#[test]
fn a_service_that_is_not_ngrok_is_a_clear_error() {
    // Answers with plain text instead of TLS (a captive portal, a wrong proxy).
    let fake = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = fake.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        use std::io::Write;
        if let Ok((mut stream, _)) = fake.accept() {
            let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\nnot ngrok\r\n");
        }
    });
    let out = server(&["--tunnel", "ngrok", "--ngrok-server-addr", &addr], &READY);
    failed_saying(&out, &["cannot reach the ngrok service", "tls"]);
}

#[cfg(feature = "tunnel")]
#[test]
fn oauth_opens_a_tunnel_without_a_static_token_and_warns_about_a_random_domain() {
    // `--oauth` is authentication enough for a public URL; the tunnel is then tried (and fails
    // here, where no ngrok service is reachable), after a loud warning about a random domain.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    let state = tempfile::tempdir().unwrap();
    let args = [
        "--tunnel",
        "ngrok",
        "--ngrok-server-addr",
        &addr,
        "--oauth",
        "--oauth-owner-password",
        "correct horse battery",
        "--state-dir",
        state.path().to_str().unwrap(),
    ];
    let out = server(&args, &[("NGROK_AUTHTOKEN", "x")]);
    failed_saying(
        &out,
        &[
            "RANDOM tunnel domain",
            "--tunnel-domain",
            "cannot reach the ngrok service",
        ],
    );
    // With a fixed domain: no warning.
    let mut fixed = args.to_vec();
    fixed.extend(["--tunnel-domain", "pyrun.ngrok.app"]);
    let out = server(&fixed, &[("NGROK_AUTHTOKEN", "x")]);
    failed_saying(&out, &["cannot reach the ngrok service"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("RANDOM"));
}

/// scripts/start-tunnel reads this to advise the built-in tunnel only where it exists.
#[test]
fn the_version_says_whether_the_tunnel_is_built_in() {
    let out = server(&["--version"], &[]);
    let said = String::from_utf8_lossy(&out.stdout);
    let expected = if cfg!(feature = "tunnel") {
        "(tunnel: built in)"
    } else {
        "(tunnel: not built in)"
    };
    assert!(said.contains(expected), "{said}");
}
