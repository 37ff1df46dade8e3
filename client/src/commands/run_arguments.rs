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
    if let Some(source) = given.or_else(|| args.stdin_text.clone().map(StdinSource::text)) {
        put_stdin(session, &mut arguments, source).await?;
    }
    if let Some(seconds) = args.script_timeout {
        arguments.insert("timeout_seconds".into(), json!(seconds));
    }
    Ok(arguments)
}

/// Where a script's stdin comes from: read as it is sent, never more than the server's
/// `--max-stdin-bytes` and one byte (an endless pipe costs no more memory than that).
pub struct StdinSource {
    reader: Box<dyn Read + Send>,
    /// What it is, for messages: `our stdin` or the file's path.
    name: String,
}

impl StdinSource {
    /// Text already in hand (the interactive menu's).
    pub fn text(text: String) -> Self {
        Self {
            reader: Box::new(std::io::Cursor::new(text.into_bytes())),
            name: "the stdin".into(),
        }
    }
}

/// The script's stdin: our own with `-i` (or `--stdin-file -`), a file's, or none. Our stdin is
/// read only when asked: a `while read … < list` loop keeps its input, and a pipe that never
/// closes cannot hang a run that did not ask for it. Nothing is read yet.
pub fn stdin_of(
    ours: bool,
    file: Option<&std::path::Path>,
) -> Result<Option<StdinSource>, ClientError> {
    let path = match (ours, file) {
        (true, _) => std::path::Path::new("-"),
        (false, Some(path)) => path,
        (false, None) => return Ok(None),
    };
    if path.as_os_str() == "-" {
        return Ok(Some(StdinSource {
            reader: Box::new(std::io::stdin()),
            name: "our stdin".into(),
        }));
    }
    let file = std::fs::File::open(path).map_err(|source| ClientError::Io {
        context: format!("cannot read {}", path.display()),
        source,
    })?;
    Ok(Some(StdinSource {
        reader: Box::new(file),
        name: path.display().to_string(),
    }))
}

/// Puts the stdin in the call as `stdin` when it is small, else uploads it in pieces as it is
/// read and puts the upload's id as `stdin_upload`. The first piece's answer gives the server's
/// `max_bytes`: past it reading stops and the run is not made. An upload that fails is
/// abandoned, so that it holds none of the server's room for staged stdin.
pub async fn put_stdin(
    session: &Session,
    arguments: &mut JsonObject,
    mut source: StdinSource,
) -> Result<(), ClientError> {
    let mut pending = Vec::new();
    let eof = fill(&mut source, &mut pending, INLINE_BYTES + 1)?;
    if eof && pending.len() <= INLINE_BYTES {
        let text = String::from_utf8(pending).map_err(|_| not_utf8(&source.name))?;
        arguments.insert("stdin".into(), Value::String(text));
        return Ok(());
    }
    let mut upload_id = None;
    match send_pieces(session, &mut source, pending, &mut upload_id).await {
        Ok(()) => {
            arguments.insert("stdin_upload".into(), json!(upload_id));
            Ok(())
        }
        Err(error) => {
            if let Some(id) = upload_id {
                let mut call = JsonObject::new();
                call.insert("upload_id".into(), json!(id));
                call.insert("abandon".into(), json!(true));
                // Best effort: the server drops it within 10 minutes anyway.
                let _ = session.call_tool(UPLOAD, call).await;
            }
            Err(error)
        }
    }
}

/// Sends `pending` and the rest of `source` as `upload_stdin` pieces; `upload_id` is the
/// upload's id once the server made one (to abandon it on failure).
async fn send_pieces(
    session: &Session,
    source: &mut StdinSource,
    mut pending: Vec<u8>,
    upload_id: &mut Option<String>,
) -> Result<(), ClientError> {
    #[derive(Deserialize)]
    struct Staged {
        upload_id: String,
        max_bytes: Option<usize>,
    }
    let (mut size, mut sent) = (PIECE_BYTES, 0usize);
    let mut max_bytes: Option<usize> = None;
    let mut eof = false;
    loop {
        if !eof && pending.len() < size {
            // Never more than the limit and one byte in all: enough to know it is passed.
            let room = max_bytes.map_or(usize::MAX, |max| {
                max.saturating_add(1).saturating_sub(sent + pending.len())
            });
            let want = size.min(pending.len().saturating_add(room));
            eof = fill(source, &mut pending, want)?;
        }
        if let Some(max) = max_bytes {
            if sent + pending.len() > max {
                return Err(over_limit(&source.name, max));
            }
        }
        if pending.is_empty() {
            break;
        }
        let end = utf8_end(&pending[..size.min(pending.len())], eof, pending.len())
            .ok_or_else(|| not_utf8(&source.name))?;
        let piece = String::from_utf8_lossy(&pending[..end]).into_owned();
        let mut call = JsonObject::new();
        call.insert("text".into(), json!(piece));
        if let Some(id) = upload_id.as_ref() {
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
                        "the stdin is more than {INLINE_BYTES} bytes, and this server takes no \
                         stdin in pieces (it has no {UPLOAD} tool): give at most {INLINE_BYTES} bytes"
                    ),
                })
            }
            Err(other) => return Err(other),
        };
        if result.is_error == Some(true) {
            return Err(ClientError::tool_failed(UPLOAD, &result));
        }
        let staged = result
            .structured_content
            .and_then(|v| serde_json::from_value::<Staged>(v).ok())
            .ok_or_else(|| {
                ClientError::Protocol(format!("{UPLOAD} answered without an upload_id"))
            })?;
        *upload_id = Some(staged.upload_id);
        max_bytes = max_bytes.or(staged.max_bytes);
        pending.drain(..end);
        sent += end;
    }
    Ok(())
}

/// Reads from `source` until `pending` holds `want` bytes or the source ends; true at its end.
fn fill(source: &mut StdinSource, pending: &mut Vec<u8>, want: usize) -> Result<bool, ClientError> {
    let missing = want.saturating_sub(pending.len());
    if missing == 0 {
        return Ok(false);
    }
    let got = (&mut source.reader)
        .take(missing as u64)
        .read_to_end(pending)
        .map_err(|source_error| ClientError::Io {
            context: format!("cannot read {}", source.name),
            source: source_error,
        })?;
    Ok(got < missing)
}

/// Where the piece `bytes` (the start of `pending_len` bytes read so far) ends at a character
/// boundary; `None` when it is not UTF-8. A character cut at the piece's end is left for the
/// next piece, unless nothing follows it.
fn utf8_end(bytes: &[u8], eof: bool, pending_len: usize) -> Option<usize> {
    match std::str::from_utf8(bytes) {
        Ok(_) => Some(bytes.len()),
        Err(e) if e.error_len().is_none() && e.valid_up_to() > 0 => {
            (!eof || bytes.len() < pending_len).then_some(e.valid_up_to())
        }
        Err(_) => None,
    }
}

fn not_utf8(name: &str) -> ClientError {
    ClientError::Usage(format!(
        "{name} is not UTF-8 text (a script's stdin is sent as text)"
    ))
}

fn over_limit(name: &str, max: usize) -> ClientError {
    ClientError::Refused {
        what: "take the stdin".into(),
        reason: format!(
            "{name} is more than the {max} bytes this server gives a run (--max-stdin-bytes); \
             give the script a file of the projects folder to read instead, or ask the operator \
             to raise --max-stdin-bytes"
        ),
    }
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
pub const STDIN_NOT_PASSED: &str = "this command's stdin holds data that was not passed to the \
     script (its stdin was empty); pass it with -i (--stdin), or a file with --stdin-file FILE";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_end_at_character_boundaries() {
        let text = "aé€😀".as_bytes();
        for cut in 1..text.len() {
            let end = utf8_end(&text[..cut], false, text.len()).unwrap_or(0);
            assert!(std::str::from_utf8(&text[..end]).is_ok(), "{cut}");
        }
        assert_eq!(utf8_end(text, true, text.len()), Some(text.len()));
        assert_eq!(
            utf8_end(&text[..2], true, 2),
            None,
            "a cut character at the end"
        );
        assert_eq!(utf8_end(b"a\xffb", false, 3), None);
    }

    #[test]
    fn the_inline_stdin_is_read_whole_and_no_further() {
        let mut source = StdinSource::text("x".repeat(10));
        let mut pending = Vec::new();
        assert!(!fill(&mut source, &mut pending, 4).unwrap());
        assert_eq!(pending.len(), 4);
        assert!(fill(&mut source, &mut pending, 100).unwrap());
        assert_eq!(pending.len(), 10);
    }
}
