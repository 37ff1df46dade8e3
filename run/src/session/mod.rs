//! Persistent Python sessions: long-lived sandboxed interpreters that keep their variables,
//! imports and open files from one exec to the next.
//!
//! A session is one resident run (`Runner::start_resident`: its own slot, every sandbox layer,
//! the memory and process limits applied to the whole session) of the driver
//! `python/_pyrun_session.py`, which `interpreter` talks to over pipes of their own. Sessions have
//! a pool of their own (`--max-python-sessions`, server-wide): an idle session holds no run
//! permit, and an exec takes none. Each belongs to the caller that started it (a
//! [`Caller::key`](super::caller::Caller::key)), like a background run: a reconnecting client
//! finds it again, anyone else gets the same answer as for an id that never existed. A caller
//! holds at most `--max-python-sessions-per-caller`; a session unused for
//! `--python-session-idle-timeout` is closed by a sweeper task (started with the first session),
//! which also closes every session when the server shuts down. A session whose interpreter died
//! is removed at its next exec. Nothing survives a restart.

mod frame;
mod interpreter;
mod raw_output;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use interpreter::Interpreter;
pub use interpreter::{ExecError, ExecOutcome, INTERRUPT_GRACE};

use super::paths::ProjectDir;
use super::python_env::PythonEnv;
use super::runner::{RunError, Runner};

/// The driver module, in the server's support folder.
pub const SESSION_DRIVER: &str = "_pyrun_session.py";
const ID_PREFIX: &str = "ses_";

/// What the registry needs from the configuration.
#[derive(Debug, Clone)]
pub struct SessionSettings {
    /// Sessions open at once, server-wide.
    pub max_sessions: usize,
    pub max_per_caller: usize,
    /// A session unused this long is closed.
    pub idle_timeout: Duration,
    /// The most output kept per stream of an exec (the runner's cap).
    pub max_output: usize,
}

/// Why a session was not started.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("the caller has {max} sessions open already")]
    CallerFull { max: usize },
    #[error("{max} sessions are open on this server already")]
    ServerFull { max: usize },
    #[error("no session id could be drawn (no randomness from the OS)")]
    NoId,
    #[error(transparent)]
    Start(#[from] RunError),
}

/// One session.
#[derive(Debug)]
pub struct Session {
    pub id: String,
    owner: String,
    /// The project folder it works in, relative to the projects folder (`None`: its scratch).
    pub project: Option<String>,
    pub started_at: SystemTime,
    last_used_at: Mutex<(Instant, SystemTime)>,
    execs: AtomicU64,
    /// Execs under way (an exec keeps its session from going idle).
    busy: AtomicU64,
    interpreter: Arc<Interpreter>,
    _permit: OwnedSemaphorePermit,
}

impl Session {
    /// When it last started or ended an exec (its start, before any).
    pub fn last_used_at(&self) -> SystemTime {
        self.lock_used().1
    }

    /// Execs it has run (or started).
    pub fn execs(&self) -> u64 {
        self.execs.load(Ordering::Relaxed)
    }

    fn lock_used(&self) -> std::sync::MutexGuard<'_, (Instant, SystemTime)> {
        self.last_used_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn touch(&self) {
        *self.lock_used() = (Instant::now(), SystemTime::now());
    }

    fn is_idle(&self, now: Instant, limit: Duration) -> bool {
        self.busy.load(Ordering::Relaxed) == 0 && now.duration_since(self.lock_used().0) >= limit
    }
}

/// Every session of the server.
pub struct Sessions {
    runner: Arc<Runner>,
    settings: SessionSettings,
    permits: Arc<Semaphore>,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// Starts one at a time, so that a caller's count is checked against what exists.
    starting: tokio::sync::Mutex<()>,
    sweeper: OnceLock<()>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("settings", &self.settings)
            .field("open", &self.lock().len())
            .finish_non_exhaustive()
    }
}

impl Sessions {
    pub fn new(runner: Arc<Runner>, settings: SessionSettings) -> Arc<Self> {
        Arc::new(Self {
            runner,
            permits: Arc::new(Semaphore::new(settings.max_sessions.max(1))),
            settings,
            sessions: Mutex::default(),
            starting: tokio::sync::Mutex::new(()),
            sweeper: OnceLock::new(),
        })
    }

    pub fn settings(&self) -> &SessionSettings {
        &self.settings
    }

    /// Sessions not yet dropped (their interpreter may still be ending), for the shutdown.
    pub fn alive(&self) -> usize {
        self.settings
            .max_sessions
            .max(1)
            .saturating_sub(self.permits.available_permits())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts a session for `owner` in `cwd` (shown to its owner as `project`) in the environment
    /// `python` (the runner's interpreter without a venv when `None`).
    pub async fn start(
        self: &Arc<Self>,
        owner: &str,
        cwd: Option<&ProjectDir>,
        project: Option<String>,
        python: Option<&PythonEnv>,
    ) -> Result<Arc<Session>, SessionError> {
        self.start_sweeper();
        let _one_at_a_time = self.starting.lock().await;
        let max = self.settings.max_per_caller;
        if self.list(owner).len() >= max {
            return Err(SessionError::CallerFull { max });
        }
        let permit =
            self.permits
                .clone()
                .try_acquire_owned()
                .map_err(|_| SessionError::ServerFull {
                    max: self.settings.max_sessions,
                })?;
        let id = new_session_id().ok_or(SessionError::NoId)?;
        let run = self
            .runner
            .start_resident(
                SESSION_DRIVER,
                std::slice::from_ref(&id),
                cwd,
                python,
                Some(owner),
            )
            .await?;
        let interpreter = Interpreter::new(run, self.settings.max_output).map_err(|_| {
            SessionError::Start(RunError::Spawn {
                what: "the session's pipes were missing",
                source: std::io::Error::from(std::io::ErrorKind::BrokenPipe),
            })
        })?;
        let session = Arc::new(Session {
            id: id.clone(),
            owner: owner.to_owned(),
            project,
            started_at: SystemTime::now(),
            last_used_at: Mutex::new((Instant::now(), SystemTime::now())),
            execs: AtomicU64::new(0),
            busy: AtomicU64::new(0),
            interpreter,
            _permit: permit,
        });
        self.lock().insert(id, session.clone());
        Ok(session)
    }

    /// The owner's session with this id; `None` for unknown, closed and foreign ids alike.
    pub fn get(&self, owner: &str, id: &str) -> Option<Arc<Session>> {
        if !is_session_id(id) {
            return None;
        }
        self.lock().get(id).filter(|s| s.owner == owner).cloned()
    }

    /// The owner's sessions, oldest first.
    pub fn list(&self, owner: &str) -> Vec<Arc<Session>> {
        let mut mine: Vec<_> = self
            .lock()
            .values()
            .filter(|s| s.owner == owner)
            .cloned()
            .collect();
        mine.sort_by_key(|s| s.started_at);
        mine
    }

    /// Closes the owner's session: its whole process tree is killed. False when it is not theirs.
    pub async fn stop(&self, owner: &str, id: &str) -> bool {
        let Some(session) = self.get(owner, id) else {
            return false;
        };
        self.remove(&session).await;
        true
    }

    async fn remove(&self, session: &Session) {
        self.lock().remove(&session.id);
        session.interpreter.close().await;
    }

    /// Runs `code` in `session`. A session that ended or was killed is removed.
    pub async fn exec(
        &self,
        session: &Arc<Session>,
        code: String,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<ExecOutcome, ExecError> {
        session.execs.fetch_add(1, Ordering::Relaxed);
        session.touch();
        let outcome = {
            // Busy until the exec ends, also when this future is dropped halfway.
            session.busy.fetch_add(1, Ordering::Relaxed);
            let _busy = DecrementOnDrop(&session.busy);
            session.interpreter.exec(code, timeout, cancel).await
        };
        session.touch();
        if outcome.as_ref().is_err_and(ExecError::ends_session) {
            self.remove(session).await;
        }
        outcome
    }

    /// Closes the sessions idle for the idle timeout; all of them once the server shuts down.
    fn start_sweeper(self: &Arc<Self>) {
        self.sweeper.get_or_init(|| {
            let registry: Weak<Self> = Arc::downgrade(self);
            let shutdown = self.runner.shutdown_token().clone();
            let every = (self.settings.idle_timeout / 4)
                .clamp(Duration::from_millis(100), Duration::from_secs(30));
            tokio::spawn(async move {
                let mut ticks = tokio::time::interval(every);
                loop {
                    let closing = tokio::select! {
                        _ = ticks.tick() => false,
                        () = shutdown.cancelled() => true,
                    };
                    let Some(registry) = registry.upgrade() else {
                        return;
                    };
                    registry.sweep(closing).await;
                    if closing {
                        return;
                    }
                }
            });
        });
    }

    async fn sweep(&self, all: bool) {
        let now = Instant::now();
        let limit = self.settings.idle_timeout;
        let gone: Vec<Arc<Session>> = self
            .lock()
            .values()
            .filter(|s| all || s.is_idle(now, limit) || s.interpreter.has_ended())
            .cloned()
            .collect();
        for session in gone {
            tracing::info!(
                session = %session.id,
                owner = %session.owner,
                "python session closed (unused, ended, or the server shutting down)"
            );
            self.remove(&session).await;
        }
    }
}

/// `ses_` and 32 hex digits, from the OS's randomness.
fn new_session_id() -> Option<String> {
    crate::ids::new_id(ID_PREFIX).ok()
}

/// True for a string shaped like a session id.
pub fn is_session_id(id: &str) -> bool {
    crate::ids::has_id_shape(ID_PREFIX, id)
}

/// Takes one off a counter when dropped.
struct DecrementOnDrop<'a>(&'a AtomicU64);

impl Drop for DecrementOnDrop<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_random_and_checked_for_shape() {
        let a = new_session_id().unwrap();
        assert!(is_session_id(&a), "{a}");
        assert_ne!(a, new_session_id().unwrap());
        for bad in [
            "",
            "ses_",
            "ses_../../x",
            "run_0123456789abcdef0123456789abcdef",
            "ses_0123456789ABCDEF0123456789abcdef",
        ] {
            assert!(!is_session_id(bad), "{bad}");
        }
    }
}
