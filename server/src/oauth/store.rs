//! The OAuth state that outlives a restart, in one SQLite file (`oauth.sqlite3` in the state
//! folder, mode 0600, WAL): registered clients, authorization codes, access and refresh tokens,
//! the owner secret's Argon2id hash, and the failed-secret counters. Codes and tokens are stored
//! only as SHA-256 hashes; nothing here can be replayed from a copy of the file.
//!
//! Every function takes `now` (Unix seconds) from its caller, so expiry is tested without waiting,
//! and every multi-row change is one transaction: a failure leaves the store as it was.
//! One connection behind a mutex: each call is a few indexed statements (microseconds), far
//! below what a request costs anyway; `oauth list|revoke|unlock` open their own connection.

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

/// The file's name in the state folder.
pub const FILE_NAME: &str = "oauth.sqlite3";

/// What the schema looks like; a newer file is refused rather than misread.
const SCHEMA_VERSION: i64 = 1;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS clients (
    client_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    redirect_uris TEXT NOT NULL,
    kind TEXT NOT NULL,
    created INTEGER NOT NULL,
    last_used INTEGER,
    revoked INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS codes (
    code_hash TEXT PRIMARY KEY,
    client_id TEXT NOT NULL,
    redirect_uri TEXT NOT NULL,
    code_challenge TEXT NOT NULL,
    scope TEXT NOT NULL,
    resource TEXT NOT NULL,
    family TEXT NOT NULL,
    expires INTEGER NOT NULL,
    used INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS tokens (
    token_hash TEXT PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
    client_id TEXT NOT NULL,
    family TEXT NOT NULL,
    scope TEXT NOT NULL,
    resource TEXT NOT NULL,
    expires INTEGER NOT NULL,
    used INTEGER NOT NULL DEFAULT 0,
    revoked INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS tokens_family ON tokens (family);
CREATE INDEX IF NOT EXISTS tokens_client ON tokens (client_id);
CREATE TABLE IF NOT EXISTS failures (
    key TEXT PRIMARY KEY,
    count INTEGER NOT NULL,
    last INTEGER NOT NULL
);
";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the OAuth store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot open the OAuth store: {0}")]
    Io(#[from] std::io::Error),
    #[error("the OAuth store was written by a newer pyrun-mcp (schema {0}); upgrade, or move the file away")]
    NewerSchema(i64),
}

/// How a client came to be known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientKind {
    /// RFC 7591 registration at `/oauth/register`.
    Registered,
    /// A Client ID Metadata Document: the `client_id` is its https URL.
    MetadataDocument,
}

impl ClientKind {
    fn as_str(self) -> &'static str {
        match self {
            Self::Registered => "registered",
            Self::MetadataDocument => "metadata-document",
        }
    }

    fn parse(text: &str) -> Self {
        if text == "metadata-document" {
            Self::MetadataDocument
        } else {
            Self::Registered
        }
    }
}

/// One client as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientRecord {
    pub client_id: String,
    pub name: String,
    pub redirect_uris: Vec<String>,
    pub kind: ClientKind,
    pub created: i64,
    pub last_used: Option<i64>,
    pub revoked: bool,
}

/// What an authorization code grants, fixed when the owner approves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeGrant {
    pub client_id: String,
    pub redirect_uri: String,
    pub code_challenge: String,
    pub scope: String,
    pub resource: String,
    /// The grant's token family: every token issued from this code, and every refresh of them.
    pub family: String,
}

/// What presenting a code (or a refresh token) found.
#[derive(Debug, PartialEq, Eq)]
pub enum Redeemed<T> {
    /// Valid; now marked used.
    Fresh(T),
    /// Used before: a replay. Everything its family holds is now revoked.
    Replayed,
    /// Unknown, expired or revoked.
    Invalid,
}

/// A grant carried by a token: who it belongs to and what it opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenGrant {
    pub client_id: String,
    pub client_name: String,
    pub family: String,
    pub scope: String,
    pub resource: String,
}

/// One pair of freshly issued tokens, as hashes, with their expiry times.
#[derive(Debug)]
pub struct IssuedHashes<'a> {
    pub access_hash: &'a str,
    pub access_expires: i64,
    pub refresh_hash: &'a str,
    pub refresh_expires: i64,
}

#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
}

impl Store {
    /// Opens (or makes, mode 0600) the store in `dir`, which must exist.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let path = dir.join(FILE_NAME);
        create_owner_only_file(&path)?;
        let conn = Connection::open(&path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        // `oauth revoke` from another process while the server writes: wait, do not fail.
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        Self::with_connection(conn)
    }

    /// A store that lives in memory only (tests).
    pub fn in_memory() -> Result<Self, StoreError> {
        Self::with_connection(Connection::open_in_memory()?)
    }

    fn with_connection(conn: Connection) -> Result<Self, StoreError> {
        conn.execute_batch(SCHEMA)?;
        let version: Option<String> = conn
            .query_row("SELECT value FROM meta WHERE key = 'schema'", [], |r| {
                r.get(0)
            })
            .optional()?;
        match version.and_then(|v| v.parse::<i64>().ok()) {
            Some(v) if v > SCHEMA_VERSION => return Err(StoreError::NewerSchema(v)),
            Some(_) => {}
            None => {
                conn.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema', ?1)",
                    [SCHEMA_VERSION.to_string()],
                )?;
            }
        }
        Ok(Self {
            conn: Mutex::new(conn),
        })
    }

    fn conn(&self) -> std::sync::MutexGuard<'_, Connection> {
        // A panic while holding the lock leaves SQLite consistent (transactions roll back).
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    // ----- the owner secret -----

    pub fn owner_secret_hash(&self) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT value FROM meta WHERE key = 'owner_secret'",
                [],
                |r| r.get(0),
            )
            .optional()?)
    }

    pub fn set_owner_secret_hash(&self, phc: &str) -> Result<(), StoreError> {
        self.conn().execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('owner_secret', ?1)",
            [phc],
        )?;
        Ok(())
    }

    // ----- clients -----

    pub fn client_count(&self) -> Result<u64, StoreError> {
        let n: i64 = self
            .conn()
            .query_row("SELECT COUNT(*) FROM clients", [], |r| r.get(0))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    pub fn insert_client(&self, client: &ClientRecord) -> Result<(), StoreError> {
        let uris = serde_json::to_string(&client.redirect_uris).unwrap_or_else(|_| "[]".into());
        self.conn().execute(
            "INSERT INTO clients (client_id, name, redirect_uris, kind, created, last_used, revoked)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                client.client_id,
                client.name,
                uris,
                client.kind.as_str(),
                client.created,
                client.last_used,
                client.revoked,
            ],
        )?;
        Ok(())
    }

    /// Records a metadata-document client the owner approved (so `oauth list` shows it and
    /// `oauth revoke` can cut it off); its name and redirect URIs follow the document, and a new
    /// approval lifts an earlier revocation (its `client_id` is fixed, the owner just agreed).
    pub fn remember_document_client(
        &self,
        client_id: &str,
        name: &str,
        redirect_uris: &[String],
        now: i64,
    ) -> Result<(), StoreError> {
        let uris = serde_json::to_string(redirect_uris).unwrap_or_else(|_| "[]".into());
        self.conn().execute(
            "INSERT INTO clients (client_id, name, redirect_uris, kind, created)
             VALUES (?1, ?2, ?3, 'metadata-document', ?4)
             ON CONFLICT (client_id) DO UPDATE SET name = ?2, redirect_uris = ?3, revoked = 0",
            params![client_id, name, uris, now],
        )?;
        Ok(())
    }

    pub fn client(&self, client_id: &str) -> Result<Option<ClientRecord>, StoreError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT client_id, name, redirect_uris, kind, created, last_used, revoked
                 FROM clients WHERE client_id = ?1",
                [client_id],
                client_from_row,
            )
            .optional()?)
    }

    /// Every client, newest first.
    pub fn clients(&self) -> Result<Vec<ClientRecord>, StoreError> {
        let conn = self.conn();
        let mut statement = conn.prepare(
            "SELECT client_id, name, redirect_uris, kind, created, last_used, revoked
             FROM clients ORDER BY created DESC, client_id",
        )?;
        let rows = statement.query_map([], client_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Cuts a client off at once: marks it revoked and revokes every token it holds. False when
    /// no such client exists.
    pub fn revoke_client(&self, client_id: &str) -> Result<bool, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found = tx.execute(
            "UPDATE clients SET revoked = 1 WHERE client_id = ?1",
            [client_id],
        )? > 0;
        tx.execute(
            "UPDATE tokens SET revoked = 1 WHERE client_id = ?1",
            [client_id],
        )?;
        tx.execute(
            "UPDATE codes SET used = 1 WHERE client_id = ?1",
            [client_id],
        )?;
        tx.commit()?;
        Ok(found)
    }

    /// Forgets registered clients that never received a code, registered before `before`:
    /// what a registration flood leaves behind. Returns how many went.
    pub fn purge_unused_clients(&self, before: i64) -> Result<usize, StoreError> {
        Ok(self.conn().execute(
            "DELETE FROM clients
             WHERE kind = 'registered' AND created < ?1
               AND NOT EXISTS (SELECT 1 FROM codes WHERE codes.client_id = clients.client_id)
               AND NOT EXISTS (SELECT 1 FROM tokens WHERE tokens.client_id = clients.client_id)",
            [before],
        )?)
    }

    /// Notes that a client used a token; written at most once a minute per client.
    pub fn touch_client(&self, client_id: &str, now: i64) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE clients SET last_used = ?2
             WHERE client_id = ?1 AND (last_used IS NULL OR last_used < ?2 - 60)",
            params![client_id, now],
        )?;
        Ok(())
    }

    // ----- authorization codes -----

    pub fn insert_code(
        &self,
        code_hash: &str,
        grant: &CodeGrant,
        expires: i64,
    ) -> Result<(), StoreError> {
        self.conn().execute(
            "INSERT INTO codes (code_hash, client_id, redirect_uri, code_challenge, scope,
                                resource, family, expires)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                code_hash,
                grant.client_id,
                grant.redirect_uri,
                grant.code_challenge,
                grant.scope,
                grant.resource,
                grant.family,
                expires,
            ],
        )?;
        Ok(())
    }

    /// Presents a code: a valid one is marked used and returned once; a used one is a replay
    /// (RFC 6749 §4.1.2: revoke what it issued).
    pub fn redeem_code(
        &self,
        code_hash: &str,
        now: i64,
    ) -> Result<Redeemed<CodeGrant>, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let row = tx
            .query_row(
                "SELECT client_id, redirect_uri, code_challenge, scope, resource, family,
                        expires, used
                 FROM codes WHERE code_hash = ?1",
                [code_hash],
                |r| {
                    Ok((
                        CodeGrant {
                            client_id: r.get(0)?,
                            redirect_uri: r.get(1)?,
                            code_challenge: r.get(2)?,
                            scope: r.get(3)?,
                            resource: r.get(4)?,
                            family: r.get(5)?,
                        },
                        r.get::<_, i64>(6)?,
                        r.get::<_, bool>(7)?,
                    ))
                },
            )
            .optional()?;
        let outcome = match row {
            None => Redeemed::Invalid,
            Some((grant, _, true)) => {
                revoke_family_in(&tx, &grant.family)?;
                Redeemed::Replayed
            }
            Some((grant, expires, false)) => {
                tx.execute(
                    "UPDATE codes SET used = 1 WHERE code_hash = ?1",
                    [code_hash],
                )?;
                if expires <= now {
                    Redeemed::Invalid
                } else {
                    Redeemed::Fresh(grant)
                }
            }
        };
        tx.commit()?;
        Ok(outcome)
    }

    // ----- tokens -----

    /// Stores a new access + refresh pair of `grant`'s family.
    pub fn insert_tokens(
        &self,
        grant: &TokenGrant,
        issued: &IssuedHashes<'_>,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        for (kind, hash, expires) in [
            ("access", issued.access_hash, issued.access_expires),
            ("refresh", issued.refresh_hash, issued.refresh_expires),
        ] {
            tx.execute(
                "INSERT INTO tokens (token_hash, kind, client_id, family, scope, resource, expires)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    hash,
                    kind,
                    grant.client_id,
                    grant.family,
                    grant.scope,
                    grant.resource,
                    expires
                ],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    /// The grant of a live access token: not expired, not revoked, its client not cut off.
    /// Read from the file on every request: a revocation takes effect at once.
    pub fn access_grant(
        &self,
        token_hash: &str,
        now: i64,
    ) -> Result<Option<TokenGrant>, StoreError> {
        // The one query of every authenticated request: prepared once per connection.
        let conn = self.conn();
        let mut statement = conn.prepare_cached(
            "SELECT t.client_id, c.name, t.family, t.scope, t.resource
             FROM tokens t JOIN clients c ON c.client_id = t.client_id
             WHERE t.token_hash = ?1 AND t.kind = 'access' AND t.revoked = 0
               AND t.expires > ?2 AND c.revoked = 0",
        )?;
        Ok(statement
            .query_row(params![token_hash, now], token_grant_from_row)
            .optional()?)
    }

    /// Presents a refresh token for rotation: a live one is marked used and its grant returned;
    /// a used one is a replay and revokes its whole family.
    pub fn redeem_refresh(
        &self,
        token_hash: &str,
        now: i64,
    ) -> Result<Redeemed<TokenGrant>, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let row = tx
            .query_row(
                "SELECT t.client_id, c.name, t.family, t.scope, t.resource,
                        t.expires, t.used, t.revoked OR c.revoked
                 FROM tokens t JOIN clients c ON c.client_id = t.client_id
                 WHERE t.token_hash = ?1 AND t.kind = 'refresh'",
                [token_hash],
                |r| {
                    Ok((
                        token_grant_from_row(r)?,
                        r.get::<_, i64>(5)?,
                        r.get::<_, bool>(6)?,
                        r.get::<_, bool>(7)?,
                    ))
                },
            )
            .optional()?;
        let outcome = match row {
            None => Redeemed::Invalid,
            Some((_, _, _, true)) => Redeemed::Invalid,
            Some((grant, _, true, false)) => {
                revoke_family_in(&tx, &grant.family)?;
                Redeemed::Replayed
            }
            Some((_, expires, false, false)) if expires <= now => Redeemed::Invalid,
            Some((grant, _, false, false)) => {
                tx.execute(
                    "UPDATE tokens SET used = 1 WHERE token_hash = ?1",
                    [token_hash],
                )?;
                // The access tokens issued before this rotation end with it.
                tx.execute(
                    "UPDATE tokens SET revoked = 1
                     WHERE family = ?1 AND kind = 'access'",
                    [&grant.family],
                )?;
                Redeemed::Fresh(grant)
            }
        };
        tx.commit()?;
        Ok(outcome)
    }

    /// RFC 7009: revokes the grant a token belongs to (access or refresh: the whole family).
    /// Returns the client it belonged to, if the token was known.
    pub fn revoke_token(&self, token_hash: &str) -> Result<Option<String>, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found: Option<(String, String)> = tx
            .query_row(
                "SELECT family, client_id FROM tokens WHERE token_hash = ?1",
                [token_hash],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        if let Some((family, _)) = &found {
            revoke_family_in(&tx, family)?;
        }
        tx.commit()?;
        Ok(found.map(|(_, client)| client))
    }

    /// Forgets codes and tokens that expired more than a day ago.
    pub fn purge_expired(&self, now: i64) -> Result<(), StoreError> {
        let conn = self.conn();
        conn.execute("DELETE FROM codes WHERE expires < ?1 - 86400", [now])?;
        conn.execute("DELETE FROM tokens WHERE expires < ?1 - 86400", [now])?;
        Ok(())
    }

    // ----- failed owner secrets -----

    /// `(count, time of the last failure)` under `key`.
    #[cfg(test)]
    pub fn failures(&self, key: &str) -> Result<(u32, i64), StoreError> {
        let found: Option<(i64, i64)> = self
            .conn()
            .query_row(
                "SELECT count, last FROM failures WHERE key = ?1",
                [key],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        Ok(found.map_or((0, 0), |(count, last)| {
            (u32::try_from(count).unwrap_or(u32::MAX), last)
        }))
    }

    /// One owner-secret attempt, counted before it is verified: in one transaction, reads the
    /// counters under `keys`, asks `wait` how long they still say to wait and, when that is
    /// zero, counts the attempt as a failure under every key (a right secret clears them
    /// after). Returns the wait; an attempt that must wait is not counted. Checking and counting
    /// apart would let a burst of parallel posts all pass the check before any was counted.
    pub fn count_attempt(
        &self,
        keys: &[&str],
        now: i64,
        wait: impl FnOnce(&[(u32, i64)]) -> i64,
    ) -> Result<i64, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut counters = Vec::with_capacity(keys.len());
        for key in keys {
            let found: Option<(i64, i64)> = tx
                .query_row(
                    "SELECT count, last FROM failures WHERE key = ?1",
                    [key],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            counters.push(found.map_or((0, 0), |(count, last)| {
                (u32::try_from(count).unwrap_or(u32::MAX), last)
            }));
        }
        let left = wait(&counters);
        if left == 0 {
            count_failures(&tx, keys, now)?;
        }
        tx.commit()?;
        Ok(left)
    }

    /// A failed attempt under each of `keys`, counted without a check (`count_attempt` checks).
    #[cfg(test)]
    pub fn record_failure(&self, keys: &[&str], now: i64) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        count_failures(&tx, keys, now)?;
        tx.commit()?;
        Ok(())
    }

    pub fn clear_failures(&self, keys: &[&str]) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction()?;
        for key in keys {
            tx.execute("DELETE FROM failures WHERE key = ?1", [key])?;
        }
        tx.commit()?;
        Ok(())
    }

    /// `oauth unlock`: every counter cleared. Returns how many there were.
    pub fn clear_all_failures(&self) -> Result<usize, StoreError> {
        Ok(self.conn().execute("DELETE FROM failures", [])?)
    }
}

fn revoke_family_in(tx: &rusqlite::Transaction<'_>, family: &str) -> rusqlite::Result<()> {
    tx.execute("UPDATE tokens SET revoked = 1 WHERE family = ?1", [family])?;
    tx.execute("UPDATE codes SET used = 1 WHERE family = ?1", [family])?;
    Ok(())
}

fn client_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ClientRecord> {
    let uris: String = r.get(2)?;
    let kind: String = r.get(3)?;
    Ok(ClientRecord {
        client_id: r.get(0)?,
        name: r.get(1)?,
        redirect_uris: serde_json::from_str(&uris).unwrap_or_default(),
        kind: ClientKind::parse(&kind),
        created: r.get(4)?,
        last_used: r.get(5)?,
        revoked: r.get(6)?,
    })
}

fn token_grant_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TokenGrant> {
    Ok(TokenGrant {
        client_id: r.get(0)?,
        client_name: r.get(1)?,
        family: r.get(2)?,
        scope: r.get(3)?,
        resource: r.get(4)?,
    })
}

/// Makes the file (and SQLite's `-wal` and `-shm` companions) owner-only before SQLite opens it.
fn create_owner_only_file(path: &Path) -> std::io::Result<()> {
    let mut files = vec![path.to_path_buf()];
    for suffix in ["-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        files.push(name.into());
    }
    for file in files {
        let mut options = std::fs::OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
            options.mode(0o600);
            let opened = options.open(&file)?;
            // An existing file keeps its mode through `open`: tighten it too.
            opened.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        }
        #[cfg(not(unix))]
        options.open(&file)?;
    }
    Ok(())
}

/// One more failed attempt for each of `keys`, at `now`.
fn count_failures(
    tx: &rusqlite::Transaction<'_>,
    keys: &[&str],
    now: i64,
) -> Result<(), StoreError> {
    for key in keys {
        tx.execute(
            "INSERT INTO failures (key, count, last) VALUES (?1, 1, ?2)
             ON CONFLICT (key) DO UPDATE SET count = count + 1, last = ?2",
            params![key, now],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(id: &str) -> ClientRecord {
        ClientRecord {
            client_id: id.into(),
            name: "Claude".into(),
            redirect_uris: vec!["https://claude.ai/api/mcp/auth_callback".into()],
            kind: ClientKind::Registered,
            created: 100,
            last_used: None,
            revoked: false,
        }
    }

    fn grant(family: &str) -> CodeGrant {
        CodeGrant {
            client_id: "c1".into(),
            redirect_uri: "https://claude.ai/api/mcp/auth_callback".into(),
            code_challenge: "challenge".into(),
            scope: "mcp".into(),
            resource: "https://x.example/mcp".into(),
            family: family.into(),
        }
    }

    fn token_grant(family: &str) -> TokenGrant {
        TokenGrant {
            client_id: "c1".into(),
            client_name: "Claude".into(),
            family: family.into(),
            scope: "mcp".into(),
            resource: "https://x.example/mcp".into(),
        }
    }

    fn issue(store: &Store, family: &str, access: &str, refresh: &str) {
        store
            .insert_tokens(
                &token_grant(family),
                &IssuedHashes {
                    access_hash: access,
                    access_expires: 1000,
                    refresh_hash: refresh,
                    refresh_expires: 5000,
                },
            )
            .unwrap();
    }

    #[test]
    fn a_code_is_redeemed_once_and_a_replay_revokes_what_it_issued() {
        let store = Store::in_memory().unwrap();
        store.insert_client(&client("c1")).unwrap();
        store.insert_code("h1", &grant("f1"), 200).unwrap();
        assert_eq!(
            store.redeem_code("h1", 150).unwrap(),
            Redeemed::Fresh(grant("f1"))
        );
        issue(&store, "f1", "a1", "r1");
        assert!(store.access_grant("a1", 150).unwrap().is_some());
        assert_eq!(store.redeem_code("h1", 151).unwrap(), Redeemed::Replayed);
        assert!(store.access_grant("a1", 152).unwrap().is_none());
        assert_eq!(store.redeem_refresh("r1", 152).unwrap(), Redeemed::Invalid);
    }

    #[test]
    fn an_expired_or_unknown_code_is_invalid() {
        let store = Store::in_memory().unwrap();
        store.insert_code("h1", &grant("f1"), 200).unwrap();
        assert_eq!(store.redeem_code("h1", 200).unwrap(), Redeemed::Invalid);
        assert_eq!(store.redeem_code("nope", 100).unwrap(), Redeemed::Invalid);
    }

    #[test]
    fn refresh_rotates_and_a_reused_refresh_token_revokes_the_family() {
        let store = Store::in_memory().unwrap();
        store.insert_client(&client("c1")).unwrap();
        issue(&store, "f1", "a1", "r1");
        let Redeemed::Fresh(g) = store.redeem_refresh("r1", 500).unwrap() else {
            panic!("first refresh refused");
        };
        assert_eq!(g.family, "f1");
        // Rotation ends the old access token; the new pair works.
        assert!(store.access_grant("a1", 500).unwrap().is_none());
        issue(&store, "f1", "a2", "r2");
        assert!(store.access_grant("a2", 500).unwrap().is_some());
        // The old refresh token again: a thief or a replay. The whole family ends.
        assert_eq!(store.redeem_refresh("r1", 501).unwrap(), Redeemed::Replayed);
        assert!(store.access_grant("a2", 501).unwrap().is_none());
        assert_eq!(store.redeem_refresh("r2", 502).unwrap(), Redeemed::Invalid);
    }

    #[test]
    fn tokens_expire_and_revocation_is_immediate() {
        let store = Store::in_memory().unwrap();
        store.insert_client(&client("c1")).unwrap();
        issue(&store, "f1", "a1", "r1");
        assert!(store.access_grant("a1", 999).unwrap().is_some());
        assert!(store.access_grant("a1", 1000).unwrap().is_none());
        assert_eq!(store.redeem_refresh("r1", 5000).unwrap(), Redeemed::Invalid);

        issue(&store, "f2", "a2", "r2");
        assert_eq!(store.revoke_token("r2").unwrap().as_deref(), Some("c1"));
        assert!(store.access_grant("a2", 10).unwrap().is_none());
        assert_eq!(store.revoke_token("unknown").unwrap(), None);
    }

    #[test]
    fn revoking_a_client_ends_every_token_it_holds() {
        let store = Store::in_memory().unwrap();
        store.insert_client(&client("c1")).unwrap();
        issue(&store, "f1", "a1", "r1");
        assert!(store.revoke_client("c1").unwrap());
        assert!(store.access_grant("a1", 10).unwrap().is_none());
        assert_eq!(store.redeem_refresh("r1", 10).unwrap(), Redeemed::Invalid);
        assert!(store.client("c1").unwrap().unwrap().revoked);
        assert!(!store.revoke_client("nobody").unwrap());
    }

    #[test]
    fn clients_that_never_got_a_code_are_purged_once_old() {
        let store = Store::in_memory().unwrap();
        for id in ["old-unused", "old-used", "new-unused"] {
            let mut c = client(id);
            c.created = if id.starts_with("new") { 1000 } else { 10 };
            store.insert_client(&c).unwrap();
        }
        let mut g = grant("f1");
        g.client_id = "old-used".into();
        store.insert_code("h", &g, 50).unwrap();
        assert_eq!(store.purge_unused_clients(500).unwrap(), 1);
        assert!(store.client("old-unused").unwrap().is_none());
        assert!(store.client("old-used").unwrap().is_some());
        assert!(store.client("new-unused").unwrap().is_some());
    }

    #[test]
    fn sql_in_values_is_data() {
        let store = Store::in_memory().unwrap();
        let mut evil = client("x'); DROP TABLE clients; --");
        evil.name = "Robert'); DELETE FROM tokens; --".into();
        store.insert_client(&evil).unwrap();
        let back = store.client(&evil.client_id).unwrap().unwrap();
        assert_eq!(back, evil);
        assert_eq!(store.client_count().unwrap(), 1);
    }

    #[test]
    fn failures_count_and_clear() {
        let store = Store::in_memory().unwrap();
        store.record_failure(&["all", "client:c1"], 10).unwrap();
        store.record_failure(&["all"], 12).unwrap();
        assert_eq!(store.failures("all").unwrap(), (2, 12));
        assert_eq!(store.failures("client:c1").unwrap(), (1, 10));
        store.clear_failures(&["client:c1"]).unwrap();
        assert_eq!(store.failures("client:c1").unwrap(), (0, 0));
        assert_eq!(store.clear_all_failures().unwrap(), 1);
        assert_eq!(store.failures("all").unwrap(), (0, 0));
    }

    #[cfg(unix)]
    #[test]
    fn the_file_is_owner_only_and_survives_a_reopen() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path()).unwrap();
            store.insert_client(&client("c1")).unwrap();
        }
        let mode = std::fs::metadata(dir.path().join(FILE_NAME))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.client_count().unwrap(), 1);
    }
}
