//! The spares: warm interpreters waiting for their run, at most one per key and `max` in all,
//! each stopped after `idle` unused, replaced in the background after a run of its key — once
//! no foreground run is in flight, and only for a kind whose calls come slower than its spare
//! gets ready (`pace`): a spare's start never shares the CPU with a run that waits for it.
//! Taking one checks it is alive, that its environment's packages did not change since it
//! started (an install in between makes it stale: it is stopped and the run starts cold), and
//! that the run's sandbox scope is still the one its view was made for (a protected name that
//! appeared since, e.g. a `.env`, would be writable in the older view).

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::hold;
use super::key::{LearnKey, Stamp, WarmKey};
use super::learned::{Learned, MAX_REPORT};
use super::pace::Pace;
use super::{WarmSettings, READY, REPORT_NAME, WARM_DRIVER};
use crate::launch::{Launch, Program, RunError, Spawned, Starter};
use crate::slots::SlotLease;
use pyrun_sandbox::{RunScope, Sandbox};

/// How long a spare may take to import its preload set and say READY.
const READY_WITHIN: Duration = Duration::from_secs(30);
/// The longest list of noisy names a driver may send.
const MAX_NOISY: u64 = 64 * 1024;
/// Starts of one spare at most (a second one without the names the first found noisy).
const ATTEMPTS: usize = 2;
/// Keys whose pace is kept at most (the map starts over beyond).
const MAX_TIMINGS: usize = 1024;
/// How long the server must have had no foreground run in flight before a spare starts: a
/// client calling back to back sends its next call within a millisecond or two of a reply, and
/// that call then finds the CPU free of a spare's start.
const IDLE_BEFORE_REFILL: Duration = Duration::from_millis(10);
/// How often the spares are looked at: unused for `--warm-idle`, or woken from inside (see
/// `hold`), a spare is stopped for good.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// A warm interpreter, ready: its process and the slot it runs in (dropped together: the
/// process tree is killed, then the slot goes back).
pub(crate) struct Spare {
    pub(crate) child: Spawned,
    pub(crate) slot: SlotLease,
    stamp: Option<Stamp>,
    /// What its view was made for: writable part and protected names, as found at its start.
    scope: RunScope,
    ready: Instant,
}

/// The spares and what they preload.
pub(crate) struct Warm {
    shared: Arc<Shared>,
}

struct Shared {
    settings: WarmSettings,
    state: Mutex<State>,
    shutdown: CancellationToken,
}

/// A foreground run in flight, from its arrival until it is over (dropped): no spare starts
/// meanwhile. The last to go starts the spares asked for while runs were in flight.
pub(crate) struct Arrival {
    shared: Arc<Shared>,
}

impl Drop for Arrival {
    fn drop(&mut self) {
        let launch = {
            let mut state = self.shared.lock();
            state.in_flight = state.in_flight.saturating_sub(1);
            state.last_run_over = Some(Instant::now());
            state.in_flight == 0 && !state.scheduled.is_empty()
        };
        if launch {
            launch_when_idle(&self.shared);
        }
    }
}

/// Where a scheduled spare starts.
type StartsIn = (Arc<Starter>, Arc<Sandbox>);

#[derive(Default)]
struct State {
    spares: HashMap<WarmKey, Spare>,
    /// Spares being started: closed (the sender dropped) once each is ready or failed.
    starting: HashMap<WarmKey, (watch::Receiver<()>, Instant)>,
    /// Spares asked for, started once no foreground run is in flight.
    scheduled: HashMap<WarmKey, StartsIn>,
    /// Foreground runs in flight (their `Arrival`s), and when the last one was over.
    in_flight: usize,
    last_run_over: Option<Instant>,
    /// What each key's runs and spares showed.
    paces: HashMap<WarmKey, Pace>,
    learned: HashMap<LearnKey, Learned>,
    sweeping: bool,
}

impl Warm {
    pub(crate) fn new(settings: WarmSettings, shutdown: CancellationToken) -> Self {
        Self {
            shared: Arc::new(Shared {
                settings,
                state: Mutex::default(),
                shutdown,
            }),
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.shared.settings.enabled
    }

    /// A foreground run of `key` arrives: it counts as in flight until the `Arrival` drops.
    pub(crate) fn arrive(&self, key: &WarmKey) -> Arrival {
        let mut state = self.shared.lock();
        state.in_flight += 1;
        if state.paces.len() >= MAX_TIMINGS && !state.paces.contains_key(key) {
            state.paces.clear();
        }
        state
            .paces
            .entry(key.clone())
            .or_default()
            .arrived(Instant::now());
        Arrival {
            shared: self.shared.clone(),
        }
    }

    /// A run of `key` ended after `took` (start to its tree's death), `warm` or not.
    pub(crate) fn ended(&self, key: &WarmKey, warm: bool, took: Duration) {
        if let Some(pace) = self.shared.lock().paces.get_mut(key) {
            pace.ended(Instant::now(), warm, took);
        }
    }

    /// Spares ready now.
    pub(crate) fn ready(&self) -> usize {
        self.shared.lock().spares.len()
    }

    /// The key's spare, when one is ready, alive and not stale: `scope_now` says the run's
    /// scope as found now, with the spare's slot folder (a cold start would make its view for
    /// that one).
    pub(crate) fn take(
        &self,
        key: &WarmKey,
        scope_now: &dyn Fn(&Path) -> RunScope,
    ) -> Option<Spare> {
        let mut spare = self.shared.lock().spares.remove(key)?;
        let fresh = spare.ready.elapsed() < self.shared.settings.idle
            && !key.startup_runs_project_code()
            && !spare.child.has_exited()
            && spare.stamp.is_some()
            && key.stamp() == spare.stamp
            && scope_now(spare.slot.dir()) == spare.scope;
        // Held still since READY: it runs again from here, for its run.
        (fresh && hold::resume(&mut spare.child).is_ok()).then_some(spare)
    }

    /// The key's spare: one ready, or one already starting whose rest of its start (by the key's
    /// last spare's) is shorter than what a warm start saves, waited for within `wait` and never
    /// longer than that saving (`Pace::wait_for`). Otherwise the run starts cold at once.
    pub(crate) async fn take_or_wait(
        &self,
        key: &WarmKey,
        scope_now: &(dyn Fn(&Path) -> RunScope + Sync),
        wait: Duration,
    ) -> Option<Spare> {
        if let Some(spare) = self.take(key, scope_now) {
            return Some(spare);
        }
        let (mut starting, wait) = {
            let state = self.shared.lock();
            let (starting, since) = state.starting.get(key).cloned()?;
            let at_most = state.paces.get(key)?.wait_for(since.elapsed())?;
            (starting, at_most.min(wait))
        };
        let _ = tokio::time::timeout(wait, starting.changed()).await;
        self.take(key, scope_now)
    }

    /// Reads what the run in `slot_dir` imported (the driver's report, the run's own file:
    /// untrusted, bounded) into its key's preload set, and removes the report.
    pub(crate) fn learn(&self, key: &WarmKey, slot_dir: &Path) {
        let Some(report) = read_report(&slot_dir.join(REPORT_NAME)) else {
            return;
        };
        self.shared
            .lock()
            .learned
            .entry(key.learn_key())
            .or_default()
            .add_report(&report);
    }

    /// Asks for the key's next spare, unless one is ready, starting or asked for, warm runs are
    /// off or the server is shutting down. It starts once no foreground run has been in flight
    /// for `IDLE_BEFORE_REFILL`, if the key's calls come slower than its spare gets ready.
    pub(crate) fn refill(&self, key: WarmKey, starter: Arc<Starter>, sandbox: Arc<Sandbox>) {
        let settings = &self.shared.settings;
        if !settings.enabled || settings.max == 0 || self.shared.shutdown.is_cancelled() {
            return;
        }
        // Code a run can write would run when the spare starts, outside any call.
        if key.startup_runs_project_code() {
            return;
        }
        let idle = {
            let mut state = self.shared.lock();
            if state.spares.contains_key(&key) || state.starting.contains_key(&key) {
                return;
            }
            state.scheduled.insert(key, (starter, sandbox));
            state.in_flight == 0
        };
        // Otherwise the last run in flight launches it as it goes (`Arrival`).
        if idle {
            launch_when_idle(&self.shared);
        }
    }

    /// Stops every spare (the server is closing).
    pub(crate) fn close(&self) {
        let spares: Vec<Spare> = {
            let mut state = self.shared.lock();
            state.scheduled.clear();
            state.spares.drain().map(|(_, s)| s).collect()
        };
        drop(spares);
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The driver's argument for the key's next spare.
    fn preload_arg(&self, key: &WarmKey, operator: &[String]) -> String {
        self.lock().learned.get(&key.learn_key()).map_or_else(
            || Learned::default().preload_arg(operator),
            |l| l.preload_arg(operator),
        )
    }

    /// Drops the names runs taught the key (its noisy names stay).
    fn forget_learned(&self, key: &WarmKey) {
        if let Some(learned) = self.lock().learned.get_mut(&key.learn_key()) {
            learned.forget_names();
        }
    }

    /// Names a spare of the key found noisy: never preloaded for it again.
    fn learn_noisy(&self, key: &WarmKey, names: &[String]) {
        let report: String = names.iter().map(|name| format!("!{name}\n")).collect();
        self.lock()
            .learned
            .entry(key.learn_key())
            .or_default()
            .add_report(report.as_bytes());
    }
}

/// Starts the scheduled spares once no foreground run has been in flight for
/// `IDLE_BEFORE_REFILL` (a run that arrives meanwhile leaves them to its own end), each only if
/// its key's calls come slower than its spare gets ready, within `--warm-max` starts in flight.
fn launch_when_idle(shared: &Arc<Shared>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let shared = shared.clone();
    runtime.spawn(async move {
        tokio::time::sleep(IDLE_BEFORE_REFILL).await;
        if shared.shutdown.is_cancelled() {
            return;
        }
        let mut launched = Vec::new();
        {
            let mut state = shared.lock();
            // A run that came and went meanwhile launched again as it went.
            let quiet = state
                .last_run_over
                .is_none_or(|over| over.elapsed() >= IDLE_BEFORE_REFILL);
            if state.in_flight > 0 || !quiet {
                return;
            }
            let scheduled: Vec<(WarmKey, StartsIn)> = state.scheduled.drain().collect();
            for (key, starts_in) in scheduled {
                let pays = state
                    .paces
                    .get(&key)
                    .is_none_or(|pace| pace.spare_pays(IDLE_BEFORE_REFILL));
                // Starts in flight count against --warm-max too: each holds a slot, an
                // interpreter and its preload's memory until READY, and one quick run in each of
                // many folders would otherwise start as many at once.
                if !pays
                    || state.spares.contains_key(&key)
                    || state.starting.contains_key(&key)
                    || state.starting.len() >= shared.settings.max
                {
                    continue;
                }
                let (started, _) = watch::channel(());
                state
                    .starting
                    .insert(key.clone(), (started.subscribe(), Instant::now()));
                launched.push((key, starts_in, started));
            }
            if !launched.is_empty() && !state.sweeping {
                state.sweeping = true;
                sweep_idle(Arc::downgrade(&shared), shared.settings.idle);
            }
        }
        for (key, (starter, sandbox), started) in launched {
            start_in_background(shared.clone(), key, starter, sandbox, started);
        }
    });
}

/// Starts the key's spare (`started` dropped once it is ready or failed) and keeps it, within
/// `--warm-max` spares (the oldest stopped).
fn start_in_background(
    shared: Arc<Shared>,
    key: WarmKey,
    starter: Arc<Starter>,
    sandbox: Arc<Sandbox>,
    started: watch::Sender<()>,
) {
    tokio::spawn(async move {
        let (max, operator) = (shared.settings.max, shared.settings.preload.clone());
        let begun = Instant::now();
        let mut made = None;
        for _ in 0..ATTEMPTS {
            let preload = shared.preload_arg(&key, &operator);
            let start = start_spare(&starter, &sandbox, &key, preload);
            let outcome = tokio::select! {
                outcome = start => outcome,
                _ = shared.shutdown.cancelled() => break,
            };
            match outcome {
                Ok((spare, noisy)) if noisy.is_empty() => {
                    made = Some(spare);
                    break;
                }
                Ok((spare, noisy)) => {
                    tracing::debug!(?noisy, "a preload import printed or changed the process");
                    drop(spare);
                    shared.learn_noisy(&key, &noisy);
                }
                Err(e) => {
                    // What runs taught this key may be what stalls it (a report is a run's
                    // own file): its next spares import the defaults and --preload only.
                    tracing::debug!(error = %e, "a warm interpreter did not start");
                    shared.forget_learned(&key);
                    break;
                }
            }
        }
        let mut stopped = Vec::new();
        {
            let mut state = shared.lock();
            state.starting.remove(&key);
            match made {
                Some(spare) if !shared.shutdown.is_cancelled() => {
                    if let Some(pace) = state.paces.get_mut(&key) {
                        pace.spare_took(begun.elapsed());
                    }
                    tracing::debug!(
                        took_ms = begun.elapsed().as_millis() as u64,
                        rss_kib = resident_kib(&spare.child),
                        "warm interpreter ready"
                    );
                    while state.spares.len() >= max {
                        let oldest = state
                            .spares
                            .iter()
                            .min_by_key(|(_, s)| s.ready)
                            .map(|(k, _)| k.clone());
                        match oldest.and_then(|k| state.spares.remove(&k)) {
                            Some(spare) => stopped.push(spare),
                            None => break,
                        }
                    }
                    state.spares.insert(key, spare);
                }
                Some(spare) => stopped.push(spare),
                None => {}
            }
        }
        // Runs waiting for this spare look now.
        drop(started);
        drop(stopped);
    });
}

/// Stops spares unused for `idle`, and spares no longer held still, until the pool is gone or
/// the server shuts down.
fn sweep_idle(shared: Weak<Shared>, idle: Duration) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SWEEP_EVERY);
        tick.tick().await;
        loop {
            let Some(shutdown) = shared.upgrade().map(|s| s.shutdown.clone()) else {
                return;
            };
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.cancelled() => {
                    if let Some(shared) = shared.upgrade() {
                        let spares: Vec<Spare> =
                            shared.lock().spares.drain().map(|(_, s)| s).collect();
                        drop(spares);
                    }
                    return;
                }
            }
            let Some(shared) = shared.upgrade() else {
                return;
            };
            let stale: Vec<Spare> = {
                let mut state = shared.lock();
                let old: Vec<WarmKey> = state
                    .spares
                    .iter_mut()
                    .filter_map(|(key, spare)| {
                        let idle = spare.ready.elapsed() >= idle;
                        let woke = !idle && !hold::still_held(&mut spare.child);
                        if woke {
                            tracing::warn!("a waiting warm interpreter ran again: stopped");
                        }
                        (idle || woke).then(|| key.clone())
                    })
                    .collect();
                old.iter().filter_map(|k| state.spares.remove(k)).collect()
            };
            drop(stale);
        }
    });
}

/// Starts one spare of `key` and waits for its READY and the names it found noisy.
async fn start_spare(
    starter: &Starter,
    sandbox: &Sandbox,
    key: &WarmKey,
    preload: String,
) -> Result<(Spare, Vec<String>), RunError> {
    let stamp = key.stamp();
    let slot = starter.take_slot(sandbox).await?;
    let args = [super::driver_arg(&preload)];
    let launch = Launch {
        place: key.placement(slot.dir()),
        program: Program::Support(WARM_DRIVER),
        args: &args,
        stdin_piped: true,
        python: key.python(),
    };
    let scope = launch.scope(sandbox);
    let mut child = starter.spawn(&launch, sandbox, &slot, &scope)?;
    let noisy = await_ready(&mut child, READY_WITHIN)
        .await
        .map_err(|source| RunError::Spawn {
            what: "a warm interpreter did not get ready",
            source,
        })?;
    // What its start-up left running gets no CPU until a run takes it.
    hold::stop(&mut child)
        .await
        .map_err(|source| RunError::Spawn {
            what: "a warm interpreter could not be held still",
            source,
        })?;
    let spare = Spare {
        child,
        slot,
        stamp,
        scope,
        ready: Instant::now(),
    };
    Ok((spare, noisy))
}

/// Reads the driver's READY from the child's stdout (nothing else may come before it), then the
/// names whose preload was noisy.
pub(crate) async fn await_ready(child: &mut Spawned, within: Duration) -> io::Result<Vec<String>> {
    let stdout = child
        .stdout
        .as_mut()
        .ok_or_else(|| io::Error::other("no stdout pipe"))?;
    let read = async {
        let mut token = [0u8; READY.len() + 4];
        stdout.read_exact(&mut token).await?;
        if &token[..READY.len()] != READY {
            return Err(io::Error::from(io::ErrorKind::InvalidData));
        }
        let length = u32::from_be_bytes([token[18], token[19], token[20], token[21]]);
        if u64::from(length) > MAX_NOISY {
            return Err(io::Error::from(io::ErrorKind::InvalidData));
        }
        let mut names = vec![0; length as usize];
        stdout.read_exact(&mut names).await?;
        Ok(String::from_utf8_lossy(&names)
            .lines()
            .map(str::to_owned)
            .collect())
    };
    tokio::time::timeout(within, read)
        .await
        .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))?
}

/// The job frame the driver reads: a 4-byte big-endian length, then JSON. `None` when a path
/// or argument is not UTF-8 (such a run starts cold).
pub(crate) fn job_frame(
    script: &Path,
    args: &[String],
    cwd: &Path,
    stdin: bool,
    scratch: &Path,
) -> Option<Vec<u8>> {
    // What exec would refuse (a NUL, one string over MAX_ARG_STRLEN, 128 KiB) starts cold and
    // fails there, as with --warm off; a spare would take it and run.
    if args
        .iter()
        .any(|a| a.contains('\0') || a.len() >= 128 * 1024)
    {
        return None;
    }
    let text = |p: &Path| p.to_str().map(str::to_owned);
    let argv: Vec<String> = std::iter::once(text(script)?)
        .chain(args.iter().cloned())
        .collect();
    let job = serde_json::json!({
        "argv": argv,
        "cwd": text(cwd)?,
        "stdin": stdin,
        "report": text(&scratch.join(REPORT_NAME))?,
    });
    let body = serde_json::to_vec(&job).ok()?;
    let mut frame = u32::try_from(body.len()).ok()?.to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    Some(frame)
}

/// A report file the run left: a regular file (never through a link, never a FIFO that would
/// block), at most `MAX_REPORT` bytes read; removed after.
fn read_report(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path);
    let _ = std::fs::remove_file(path);
    let file = file.ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut report = Vec::new();
    file.take(MAX_REPORT).read_to_end(&mut report).ok()?;
    Some(report)
}

/// The resident memory of the interpreter under the run's pid 1, for the log.
fn resident_kib(child: &Spawned) -> u64 {
    let Some(pid) = child.id() else { return 0 };
    let children =
        std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
    children
        .split_whitespace()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok())
        .filter_map(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_frame_is_length_and_json() {
        let frame = job_frame(
            Path::new("/projects/a/x.py"),
            &["--n".into(), "3".into()],
            Path::new("/projects/a"),
            true,
            Path::new("/tmp"),
        )
        .unwrap();
        let length = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(length, frame.len() - 4);
        let job: serde_json::Value = serde_json::from_slice(&frame[4..]).unwrap();
        assert_eq!(
            job["argv"],
            serde_json::json!(["/projects/a/x.py", "--n", "3"])
        );
        assert_eq!(job["cwd"], "/projects/a");
        assert_eq!(job["stdin"], true);
        assert_eq!(job["report"], "/tmp/.pyrun-warm-imports");
    }

    #[test]
    fn a_report_is_read_only_as_a_regular_file_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let report = dir.path().join(REPORT_NAME);
        std::fs::write(&report, b"json\nnumpy\n").unwrap();
        assert_eq!(read_report(&report).unwrap(), b"json\nnumpy\n");
        assert!(!report.exists());
        // A link to a file elsewhere is not followed.
        let elsewhere = dir.path().join("secret");
        std::fs::write(&elsewhere, b"secret").unwrap();
        std::os::unix::fs::symlink(&elsewhere, &report).unwrap();
        assert_eq!(read_report(&report), None);
        // A FIFO does not block.
        let made = std::process::Command::new("mkfifo").arg(&report).status();
        assert!(made.unwrap().success());
        assert_eq!(read_report(&report), None);
    }
}
