//! `upload_stdin` through the real binary: a caller's uploads hold at most `--max-stdin-bytes`
//! in all (several callers share the server's budget), an empty piece is refused, a piece that
//! would go over the limit drops its upload (and says so), and `abandon` drops one at once.

use pyrun_mcp_tests::stdio::{text, StdioServer};
use pyrun_mcp_tests::TempProjects;
use serde_json::{json, Value};

fn upload(server: &mut StdioServer, arguments: Value) -> Value {
    server.call("upload_stdin", arguments)
}

fn refused(reply: &Value) -> bool {
    reply["isError"] == json!(true)
}

fn id_of(reply: &Value) -> String {
    reply["structuredContent"]["upload_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no upload_id in {reply}"))
        .to_owned()
}

#[test]
fn stdin_uploads_are_bounded_per_caller_and_dropped_when_refused() {
    let projects = TempProjects::named("p").file("hello.py", "print('hi')\n");
    let mut server = StdioServer::start(projects.path(), &["--max-stdin-bytes", "1000"]);

    // One caller fills its share: a second upload, however small, is refused.
    let full = upload(&mut server, json!({"text": "x".repeat(1000)}));
    assert!(!refused(&full), "{full}");
    let full_id = id_of(&full);
    let second = upload(&mut server, json!({"text": "0123456789"}));
    assert!(
        refused(&second),
        "the caller holds its whole share: {second}"
    );
    assert!(text(&second).contains("--max-stdin-bytes"), "{second}");

    // An empty piece adds nothing and is refused (it would keep an upload alive for ever).
    let empty = upload(&mut server, json!({"text": "", "upload_id": full_id}));
    assert!(refused(&empty), "{empty}");

    // Going over the limit drops the upload: it is gone, and its bytes are free again.
    let over = upload(&mut server, json!({"text": "y", "upload_id": full_id}));
    assert!(refused(&over), "{over}");
    assert!(text(&over).contains("dropped"), "{over}");
    let gone = upload(&mut server, json!({"text": "z", "upload_id": full_id}));
    assert!(text(&gone).contains("no stdin upload"), "{gone}");
    let fresh = upload(&mut server, json!({"text": "x".repeat(900)}));
    assert!(!refused(&fresh), "{fresh}");

    // Abandoning drops an upload at once.
    let fresh_id = id_of(&fresh);
    let abandoned = upload(&mut server, json!({"upload_id": fresh_id, "abandon": true}));
    assert!(!refused(&abandoned), "{abandoned}");
    let gone = upload(&mut server, json!({"text": "z", "upload_id": fresh_id}));
    assert!(text(&gone).contains("no stdin upload"), "{gone}");
    let again = upload(&mut server, json!({"text": "x".repeat(1000)}));
    assert!(!refused(&again), "{again}");
}
