//! `pyrun-mcp-server oauth list|revoke|unlock`: the owner's view of who connected, on the same
//! state file the running server uses (SQLite's WAL lets both work at once; a revocation takes
//! effect on the server's next request, since it caches nothing).

use std::io::Write;
use std::path::Path;

use anyhow::Context;

use super::store::{ClientKind, Store, FILE_NAME};
use crate::config::OAuthAction;

/// Runs one action; output on stdout (data), nothing secret in it.
pub fn run(action: &OAuthAction, state_dir: &Path, out: &mut impl Write) -> anyhow::Result<()> {
    if !state_dir.join(FILE_NAME).is_file() {
        anyhow::bail!(
            "no OAuth state in {}: no client has connected yet, or the server uses another folder\nhint: pass the server's --state-dir (PYRUN_STATE_DIR)",
            state_dir.display()
        );
    }
    let store = Store::open(state_dir).context("opening the OAuth state")?;
    match action {
        OAuthAction::List => list(&store, out),
        OAuthAction::Revoke { client_id } => {
            if !store.revoke_client(client_id)? {
                anyhow::bail!(
                    "no client with id '{client_id}'\nhint: `pyrun-mcp-server oauth list` shows the ids"
                );
            }
            writeln!(out, "revoked {client_id}: its tokens no longer work")?;
            Ok(())
        }
        OAuthAction::Unlock => {
            let cleared = store.clear_all_failures()?;
            writeln!(
                out,
                "cleared {cleared} wrong-secret counter(s): the consent page accepts the owner secret again at once"
            )?;
            Ok(())
        }
    }
}

fn list(store: &Store, out: &mut impl Write) -> anyhow::Result<()> {
    let clients = store.clients()?;
    if clients.is_empty() {
        writeln!(out, "no OAuth clients")?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<24} {:<48} {:<17} {:<17} {:<9} KIND",
        "NAME", "CLIENT ID", "CREATED (UTC)", "LAST USED (UTC)", "STATUS"
    )?;
    for client in clients {
        let kind = match client.kind {
            ClientKind::Registered => "registered",
            ClientKind::MetadataDocument => "metadata-document",
        };
        writeln!(
            out,
            "{:<24} {:<48} {:<17} {:<17} {:<9} {kind}",
            printable(&client.name, 24),
            client.client_id,
            utc(client.created),
            client.last_used.map_or_else(|| "never".to_owned(), utc),
            if client.revoked { "revoked" } else { "active" },
        )?;
    }
    Ok(())
}

/// A name as a terminal shows it safely: no control characters, at most `width` characters.
fn printable(name: &str, width: usize) -> String {
    let clean: String = name
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if clean.chars().count() > width {
        let cut: String = clean.chars().take(width - 1).collect();
        format!("{cut}…")
    } else {
        clean
    }
}

fn utc(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0).map_or_else(
        || "?".to_owned(),
        |t| t.format("%Y-%m-%d %H:%M").to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oauth::store::ClientRecord;

    #[test]
    fn list_revoke_and_unlock_work_on_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut out = Vec::new();
        let err = run(&OAuthAction::List, dir.path(), &mut out).unwrap_err();
        assert!(err.to_string().contains("--state-dir"), "{err}");
        {
            let store = Store::open(dir.path()).unwrap();
            store
                .insert_client(&ClientRecord {
                    client_id: "pyc_abc".into(),
                    name: "Claude\u{1b}[31m".into(),
                    redirect_uris: vec![],
                    kind: ClientKind::Registered,
                    created: 1_764_000_000,
                    last_used: None,
                    revoked: false,
                })
                .unwrap();
            store.record_failure(&["all"], 5).unwrap();
        }
        run(&OAuthAction::List, dir.path(), &mut out).unwrap();
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.contains("pyc_abc") && text.contains("active") && text.contains("never"));
        assert!(!text.contains('\u{1b}'), "{text}");
        out.clear();
        run(
            &OAuthAction::Revoke {
                client_id: "pyc_abc".into(),
            },
            dir.path(),
            &mut out,
        )
        .unwrap();
        let unknown = OAuthAction::Revoke {
            client_id: "nobody".into(),
        };
        assert!(run(&unknown, dir.path(), &mut out).is_err());
        run(&OAuthAction::Unlock, dir.path(), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains("revoked pyc_abc") && text.contains("cleared 1"),
            "{text}"
        );
        assert!(
            Store::open(dir.path())
                .unwrap()
                .client("pyc_abc")
                .unwrap()
                .unwrap()
                .revoked
        );
    }
}
