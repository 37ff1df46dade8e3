//! Staged stdin: text too large for one request (an HTTP body is capped by `--max-body-bytes`),
//! sent in pieces with `upload_stdin` and named by a run call's `stdin_upload`, for every client.
//!
//! An upload belongs to the caller that made it (another caller is told it does not exist), is
//! kept in memory until a run takes it, its caller abandons it, or [`LIFETIME`] after its first
//! piece (whatever pieces follow), and is bounded by `--max-stdin-bytes`, as is a run's inline
//! `stdin`. A caller's uploads hold at most `--max-stdin-bytes` in all (at most [`PER_CALLER`] of
//! them), so that several callers share the server's [`SERVER_UPLOADS`] times `--max-stdin-bytes`
//! and none can hold it all. A refused piece drops the upload it was for: a failed upload never
//! stays behind holding bytes. An empty piece is refused.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::client_message::ClientMessage;
use pyrun_run::caller::Caller;
use pyrun_run::ids::{has_id_shape, new_id};

/// How long an upload is kept after its first piece, however many pieces follow.
pub const LIFETIME: Duration = Duration::from_secs(600);
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
    created: Instant,
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

    /// Adds `text` to the caller's upload `id`, or to a new one when `id` is `None`. A refused
    /// piece for an existing upload drops that upload.
    pub fn append(
        &self,
        caller: &Caller,
        id: Option<&str>,
        text: &str,
    ) -> Result<Staged, ClientMessage> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        expire(&mut open);
        if let Some(id) = id {
            if !open.get(id).is_some_and(|u| &u.owner == caller) {
                return Err(unknown(id));
            }
        }
        match self.check(&open, caller, id, text) {
            Ok(()) => {}
            Err(message) => {
                return Err(match id.and_then(|id| open.remove(id)) {
                    Some(_) => message.then(
                        "\nthe upload was dropped: start again with a new upload, within the limit",
                    ),
                    None => message,
                })
            }
        }
        let upload_id = match id {
            Some(id) => id.to_owned(),
            None => new_id(PREFIX).map_err(|_| {
                ClientMessage::new("the server could not make an upload id; try again")
            })?,
        };
        let upload = open.entry(upload_id.clone()).or_insert_with(|| Upload {
            owner: caller.clone(),
            text: String::new(),
            created: Instant::now(),
        });
        upload.text.push_str(text);
        Ok(Staged {
            upload_id,
            bytes: upload.text.len(),
        })
    }

    /// Whether `text` may be added to the caller's upload `id` (a new one for `None`).
    fn check(
        &self,
        open: &HashMap<String, Upload>,
        caller: &Caller,
        id: Option<&str>,
        text: &str,
    ) -> Result<(), ClientMessage> {
        if text.is_empty() {
            return Err(ClientMessage::new(
                "an empty piece adds nothing to a stdin upload; send text, or the run",
            ));
        }
        let so_far = id.and_then(|id| open.get(id)).map_or(0, |u| u.text.len());
        let bytes = so_far.saturating_add(text.len());
        if bytes > self.max_bytes {
            return Err(too_large(bytes, self.max_bytes));
        }
        let mine = || open.values().filter(|u| &u.owner == caller);
        if id.is_none() && mine().count() >= PER_CALLER {
            return Err(ClientMessage::new("you have ")
                .number(PER_CALLER)
                .then(" stdin uploads not yet run, the most a caller may hold")
                .hint("run or abandon them (upload_stdin with abandon), or wait 10 minutes for them to expire"));
        }
        let held_by_caller: usize = mine().map(|u| u.text.len()).sum();
        if held_by_caller.saturating_add(text.len()) > self.max_bytes {
            return Err(ClientMessage::new("your stdin uploads not yet run would hold ")
                .number(held_by_caller.saturating_add(text.len()))
                .then(" bytes, more than the ")
                .number(self.max_bytes)
                .then(" bytes a caller may hold in all (--max-stdin-bytes)")
                .hint("run or abandon them (upload_stdin with abandon), or wait 10 minutes for them to expire"));
        }
        let held: usize = open.values().map(|u| u.text.len()).sum();
        if held.saturating_add(text.len()) > self.max_bytes.saturating_mul(SERVER_UPLOADS) {
            return Err(
                ClientMessage::new("the server holds as much staged stdin as it may (")
                    .number(SERVER_UPLOADS)
                    .then(" times --max-stdin-bytes) for uploads not yet run")
                    .hint("try again in a few minutes: uploads expire 10 minutes after their first piece"),
            );
        }
        Ok(())
    }

    /// Drops the caller's upload `id` (a client abandoning an upload it will not run).
    pub fn abandon(&self, caller: &Caller, id: &str) -> Result<(), ClientMessage> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        expire(&mut open);
        match open.get(id) {
            Some(upload) if &upload.owner == caller => {
                open.remove(id);
                Ok(())
            }
            _ => Err(unknown(id)),
        }
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
                expire(&mut open);
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

/// Drops the uploads older than [`LIFETIME`].
fn expire(open: &mut HashMap<String, Upload>) {
    let now = Instant::now();
    open.retain(|_, upload| now.duration_since(upload.created) < LIFETIME);
}

fn unknown(id: &str) -> ClientMessage {
    let message = if has_id_shape(PREFIX, id) {
        ClientMessage::new("no stdin upload ").given(id)
    } else {
        ClientMessage::new("stdin upload ids look like stdin_ and 32 hex digits, not ").given(id)
    };
    message.then(" (an upload feeds one run, and is dropped 10 minutes after its first piece, or when a piece is refused)")
}

fn too_large(bytes: usize, max: usize) -> ClientMessage {
    ClientMessage::new("the stdin reached ")
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
        let gone = uploads.append(&Caller::Local, Some(&id), "a").unwrap_err();
        assert!(gone.as_str().contains("no stdin upload"), "{gone}");
    }

    #[test]
    fn callers_share_the_server_and_none_holds_it_all() {
        let uploads = StdinUploads::new(10);
        let attacker = Caller::Anonymous;
        uploads.append(&attacker, None, &"a".repeat(10)).unwrap();
        let share = uploads.append(&attacker, None, "b").unwrap_err();
        assert!(share.as_str().contains("--max-stdin-bytes"), "{share}");
        let victim = uploads.append(&Caller::Local, None, "0123456789").unwrap();
        assert_eq!(victim.bytes, 10);
        let empty = uploads.append(&Caller::Local, None, "").unwrap_err();
        assert!(empty.as_str().contains("empty"), "{empty}");
        for _ in 0..PER_CALLER {
            uploads.append(&Caller::BearerToken, None, "a").unwrap();
        }
        assert!(uploads.append(&Caller::BearerToken, None, "a").is_err());
    }

    #[test]
    fn uploads_expire_after_their_first_piece_whatever_follows() {
        let uploads = StdinUploads::new(10);
        let id = uploads
            .append(&Caller::Local, None, "abc")
            .unwrap()
            .upload_id;
        {
            let mut open = uploads.open.lock().unwrap();
            let upload = open.get_mut(&id).unwrap();
            upload.created = Instant::now()
                .checked_sub(LIFETIME + Duration::from_secs(1))
                .unwrap();
        }
        assert!(uploads.append(&Caller::Local, Some(&id), "d").is_err());
        assert!(uploads.stdin_of(&Caller::Local, None, Some(&id)).is_err());
    }

    #[test]
    fn an_abandoned_upload_is_gone_and_only_its_owner_may_abandon_it() {
        let uploads = StdinUploads::new(10);
        let id = uploads
            .append(&Caller::Local, None, "abc")
            .unwrap()
            .upload_id;
        assert!(uploads.abandon(&Caller::Anonymous, &id).is_err());
        uploads.abandon(&Caller::Local, &id).unwrap();
        assert!(uploads.stdin_of(&Caller::Local, None, Some(&id)).is_err());
    }
}
