//! `run`'s flags as the arguments of `run_python` and `start_python`: what the waited `run` and
//! a detached start (`runs`) both send. The script's stdin goes in the call when it is small,
//! else first in pieces with the server's `upload_stdin`, named then by `stdin_upload` (one
//! request's body is capped by the server's `--max-body-bytes`, 4 MiB unless set).

use std::io::Read;

use rmcp::model::JsonObject;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::cli::RunArgs;
use crate::error::ClientError;
use crate::session::Session;

/// The tool a waited `run` calls.
pub const TOOL: &str = "run_python";
/// The server's tool that takes stdin in pieces.
pub const UPLOAD: &str = "upload_stdin";
/// Stdin up to this size goes in the run call itself; larger goes in pieces.
pub const INLINE_BYTES: usize = 32 * 1024;
/// The first pieces' size: even escaped for JSON (at most 6 bytes a byte) under the server's
/// default body cap. A piece the server finds too large (a lower `--max-body-bytes`) is sent
/// again in halves, down to [`MIN_PIECE_BYTES`].
pub const PIECE_BYTES: usize = 512 * 1024;
const MIN_PIECE_BYTES: usize = 4 * 1024;

/// `run`'s flags as `run_python` (and `start_python`) arguments, with its stdin sent.
pub async fn arguments(session: &Session, args: &RunArgs) -> Result<JsonObject, ClientError> {
    let mut arguments = JsonObject::new();
    arguments.insert("file_name".into(), json!(args.file));
    let script_args: Vec<&String> = args.script_args.iter().chain(&args.args).collect();
    if !script_args.is_empty() {
        arguments.insert("args".into(), json!(script_args));
    }
    let given = stdin_of(args.stdin, args.stdin_file.as_deref())?;
    if let Some(text) = given.or_else(|| args.stdin_text.clone()) {
        put_stdin(session, &mut arguments, text).await?;
    }
    if let Some(seconds) = args.script_timeout {
        arguments.insert("timeout_seconds".into(), json!(seconds));
    }
    Ok(arguments)
}

/// The script's stdin: our own with `-i` (or `--stdin-file -`), a file's, or none. Our stdin is
/// read only when asked: a `while read … < list` loop keeps its input, and a pipe that never
/// closes cannot hang a run that did not ask for it.
pub fn stdin_of(ours: bool, file: Option<&std::path::Path>) -> Result<Option<String>, ClientError> {
    if ours {
        return read_text(std::path::Path::new("-"), "stdin").map(Some);
    }
    match file {
        Some(path) => read_text(path, "stdin").map(Some),
        None => Ok(None),
    }
}

/// Puts `text` in the call as `stdin`, or (larger than a piece) uploads it in pieces and puts
/// the upload's id as `stdin_upload`.
pub async fn put_stdin(
    session: &Session,
    arguments: &mut JsonObject,
    text: String,
) -> Result<(), ClientError> {
    if text.len() <= INLINE_BYTES {
        arguments.insert("stdin".into(), Value::String(text));
        return Ok(());
    }
    #[derive(Deserialize)]
    struct Staged {
        upload_id: String,
    }
    let mut upload_id: Option<String> = None;
    let (mut rest, mut size) = (text.as_str(), PIECE_BYTES);
    while !rest.is_empty() {
        let piece = piece(rest, size);
        let mut call = JsonObject::new();
        call.insert("text".into(), json!(piece));
        if let Some(id) = &upload_id {
            call.insert("upload_id".into(), json!(id));
        }
        let result = match session.call_tool(UPLOAD, call).await {
            Ok(result) => result,
            Err(ClientError::TooLarge { .. }) if size > MIN_PIECE_BYTES => {
                size /= 2;
                continue;
            }
            Err(ClientError::UnknownTool { .. }) => {
                return Err(ClientError::BadArguments {
                    tool: TOOL.into(),
                    reason: format!(
                        "the stdin is {} bytes, and this server takes no stdin in pieces \
                         (it has no {UPLOAD} tool): give at most {INLINE_BYTES} bytes",
                        text.len()
                    ),
                })
            }
            Err(other) => return Err(other),
        };
        rest = &rest[piece.len()..];
        if result.is_error == Some(true) {
            return Err(ClientError::tool_failed(UPLOAD, &result));
        }
        let staged = result
            .structured_content
            .and_then(|v| serde_json::from_value::<Staged>(v).ok())
            .ok_or_else(|| {
                ClientError::Protocol(format!("{UPLOAD} answered without an upload_id"))
            })?;
        upload_id = Some(staged.upload_id);
    }
    arguments.insert("stdin_upload".into(), json!(upload_id));
    Ok(())
}

/// The first piece of `text`: at most `size` bytes, cut at a character boundary (one whole
/// character when `size` is smaller than it).
fn piece(text: &str, size: usize) -> &str {
    let mut end = size.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    if end == 0 {
        end = text.chars().next().map_or(0, char::len_utf8);
    }
    &text[..end]
}

/// A local file's text, or our stdin's for `-`; `what` says what it is for (`stdin`, `code`).
pub fn read_text(path: &std::path::Path, what: &str) -> Result<String, ClientError> {
    let io_error = |source| ClientError::Io {
        context: format!("cannot read {}", path.display()),
        source,
    };
    let mut bytes = Vec::new();
    let name = if path.as_os_str() == "-" {
        std::io::stdin().read_to_end(&mut bytes).map_err(io_error)?;
        "our stdin".to_owned()
    } else {
        bytes = std::fs::read(path).map_err(io_error)?;
        path.display().to_string()
    };
    String::from_utf8(bytes).map_err(|_| {
        ClientError::Usage(format!(
            "{name} is not UTF-8 text (a script's {what} is sent as text)"
        ))
    })
}

/// Whether our stdin may hold something meant for the script: a pipe or a file, not a terminal
/// or `/dev/null`, and not a pipe already closed empty (as harnesses give children). Asked after
/// the run, so that a writer (`seq 1 10 | …`) has had its time; nothing is read.
pub fn stdin_is_data() -> bool {
    #[cfg(unix)]
    {
        use rustix::event::{poll, PollFd, PollFlags, Timespec};
        use std::os::fd::AsFd;
        use std::os::unix::fs::FileTypeExt;
        let stdin = std::io::stdin();
        let fd = stdin.as_fd();
        let Ok(meta) = fd
            .try_clone_to_owned()
            .map(std::fs::File::from)
            .and_then(|f| f.metadata())
        else {
            return false;
        };
        if meta.file_type().is_file() {
            return meta.len() > 0;
        }
        if !meta.file_type().is_fifo() && !meta.file_type().is_socket() {
            return false;
        }
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        let now = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        match poll(&mut fds, Some(&now)) {
            // Readable: data waits. Hung up and not readable: closed empty, nothing was lost.
            Ok(_) => {
                let events = fds[0].revents();
                events.contains(PollFlags::IN) || !events.contains(PollFlags::HUP)
            }
            Err(_) => true,
        }
    }
    #[cfg(not(unix))]
    {
        use std::io::IsTerminal;
        !std::io::stdin().is_terminal()
    }
}

/// The note for a run whose stdin was not passed.
pub const STDIN_NOT_PASSED: &str = "this command's stdin was not passed to the script (it read \
     end-of-file); pass it with -i (--stdin), or a file with --stdin-file FILE";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_cut_at_character_boundaries_and_join_back() {
        let text = "aé€😀".repeat(100);
        for size in [1, 2, 3, 5, 7, 64] {
            let (mut rest, mut joined) = (text.as_str(), String::new());
            while !rest.is_empty() {
                let part = piece(rest, size);
                assert!(!part.is_empty() && part.len() <= size.max(4));
                joined.push_str(part);
                rest = &rest[part.len()..];
            }
            assert_eq!(joined, text);
        }
        assert_eq!(piece("", 4), "");
    }
}
