//! Staged stdin: text too large for one request (an HTTP body is capped by `--max-body-bytes`),
//! sent in pieces with `upload_stdin` and named by a run call's `stdin_upload`, for every client.
//!
//! An upload belongs to the caller that made it (another caller is told it does not exist), is
//! kept in memory until a run takes it or [`IDLE`] after its last piece, and is bounded by
//! `--max-stdin-bytes`, as is a run's inline `stdin`. A caller holds at most [`PER_CALLER`] open
//! uploads, and the server at most [`SERVER_UPLOADS`] times `--max-stdin-bytes` in all.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::client_message::ClientMessage;
use pyrun_run::caller::Caller;
use pyrun_run::ids::{has_id_shape, new_id};

/// How long an upload waits for its next piece or its run.
pub const IDLE: Duration = Duration::from_secs(600);
/// Open uploads per caller.
pub const PER_CALLER: usize = 4;
/// The bytes all uploads may hold at once, in multiples of `--max-stdin-bytes`.
pub const SERVER_UPLOADS: usize = 4;
/// The prefix of an upload's id.
const PREFIX: &str = "stdin_";

/// The server's staged stdin, shared by every session (stdio, `/mcp`, `/sse`).
#[derive(Debug)]
pub struct StdinUploads {
    max_bytes: usize,
    open: Mutex<HashMap<String, Upload>>,
}

#[derive(Debug)]
struct Upload {
    owner: Caller,
    text: String,
    touched: Instant,
}

/// An upload after a piece was added: its id and size so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    pub upload_id: String,
    pub bytes: usize,
}

impl StdinUploads {
    pub fn new(max_bytes: usize) -> Self {
        Self {
            max_bytes,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// The largest stdin a run may be given (`--max-stdin-bytes`).
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Adds `text` to the caller's upload `id`, or to a new one when `id` is `None`.
    pub fn append(
        &self,
        caller: &Caller,
        id: Option<&str>,
        text: &str,
    ) -> Result<Staged, ClientMessage> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        open.retain(|_, upload| now.duration_since(upload.touched) < IDLE);
        let held: usize = open.values().map(|u| u.text.len()).sum();
        if held.saturating_add(text.len()) > self.max_bytes.saturating_mul(SERVER_UPLOADS) {
            return Err(
                ClientMessage::new("the server holds as much staged stdin as it may (")
                    .number(SERVER_UPLOADS)
                    .then(" times --max-stdin-bytes) for uploads not yet run")
                    .hint("run or let expire the uploads you made, then try again"),
            );
        }
        let upload_id = match id {
            Some(id) => {
                let upload = open
                    .get_mut(id)
                    .filter(|u| &u.owner == caller)
                    .ok_or_else(|| unknown(id))?;
                let bytes = upload.text.len().saturating_add(text.len());
                if bytes > self.max_bytes {
                    return Err(too_large(bytes, self.max_bytes));
                }
                upload.text.push_str(text);
                upload.touched = now;
                return Ok(Staged {
                    upload_id: id.to_owned(),
                    bytes,
                });
            }
            None => {
                if text.len() > self.max_bytes {
                    return Err(too_large(text.len(), self.max_bytes));
                }
                let mine = open.values().filter(|u| &u.owner == caller).count();
                if mine >= PER_CALLER {
                    return Err(ClientMessage::new("you have ")
                        .number(mine)
                        .then(" stdin uploads not yet run, the most a caller may hold")
                        .hint("run them (stdin_upload) or wait 10 minutes for them to expire"));
                }
                new_id(PREFIX).map_err(|_| {
                    ClientMessage::new("the server could not make an upload id; try again")
                })?
            }
        };
        open.insert(
            upload_id.clone(),
            Upload {
                owner: caller.clone(),
                text: text.to_owned(),
                touched: now,
            },
        );
        Ok(Staged {
            upload_id,
            bytes: text.len(),
        })
    }

    /// The stdin a run call gives: its `stdin` text, or the upload `stdin_upload` names (taken:
    /// an upload feeds one run), or none.
    pub fn stdin_of(
        &self,
        caller: &Caller,
        stdin: Option<String>,
        stdin_upload: Option<&str>,
    ) -> Result<Option<String>, ClientMessage> {
        match (stdin, stdin_upload) {
            (Some(_), Some(_)) => Err(ClientMessage::new(
                "give either stdin or stdin_upload, not both",
            )),
            (Some(text), None) if text.len() > self.max_bytes => {
                Err(too_large(text.len(), self.max_bytes))
            }
            (text, None) => Ok(text),
            (None, Some(id)) => {
                let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
                let now = Instant::now();
                open.retain(|_, upload| now.duration_since(upload.touched) < IDLE);
                match open.get(id) {
                    Some(upload) if &upload.owner == caller => {
                        Ok(open.remove(id).map(|upload| upload.text))
                    }
                    _ => Err(unknown(id)),
                }
            }
        }
    }
}

fn unknown(id: &str) -> ClientMessage {
    let message = if has_id_shape(PREFIX, id) {
        ClientMessage::new("no stdin upload ").given(id)
    } else {
        ClientMessage::new("stdin upload ids look like stdin_ and 32 hex digits, not ").given(id)
    };
    message.then(" (an upload feeds one run, and is dropped 10 minutes after its last piece)")
}

fn too_large(bytes: usize, max: usize) -> ClientMessage {
    ClientMessage::new("the stdin is ")
        .number(bytes)
        .then(" bytes, more than the ")
        .number(max)
        .then(" bytes this server gives a run (--max-stdin-bytes)")
        .hint("give the script a file of the projects folder to read instead, or ask the operator to raise --max-stdin-bytes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_add_up_and_a_run_takes_the_upload_once() {
        let uploads = StdinUploads::new(10);
        let first = uploads.append(&Caller::Local, None, "abc").unwrap();
        let id = first.upload_id.clone();
        assert_eq!(
            uploads
                .append(&Caller::Local, Some(&id), "def")
                .unwrap()
                .bytes,
            6
        );
        assert!(uploads.append(&Caller::Anonymous, Some(&id), "x").is_err());
        assert!(uploads
            .stdin_of(&Caller::Anonymous, None, Some(&id))
            .is_err());
        assert_eq!(
            uploads.stdin_of(&Caller::Local, None, Some(&id)).unwrap(),
            Some("abcdef".to_owned())
        );
        let again = uploads
            .stdin_of(&Caller::Local, None, Some(&id))
            .unwrap_err();
        assert!(again.as_str().contains("no stdin upload"), "{again}");
    }

    #[test]
    fn limits_name_their_setting() {
        let uploads = StdinUploads::new(4);
        let id = uploads
            .append(&Caller::Local, None, "abc")
            .unwrap()
            .upload_id;
        let over = uploads.append(&Caller::Local, Some(&id), "de").unwrap_err();
        assert!(
            over.as_str().contains("5 bytes, more than the 4 bytes"),
            "{over}"
        );
        assert!(over.as_str().contains("--max-stdin-bytes"), "{over}");
        let inline = uploads
            .stdin_of(&Caller::Local, Some("abcde".into()), None)
            .unwrap_err();
        assert!(inline.as_str().contains("--max-stdin-bytes"), "{inline}");
        assert!(uploads
            .stdin_of(&Caller::Local, Some("a".into()), Some(&id))
            .is_err());
        for _ in 1..PER_CALLER {
            uploads.append(&Caller::Local, None, "a").unwrap();
        }
        assert!(uploads.append(&Caller::Local, None, "a").is_err());
    }
}
