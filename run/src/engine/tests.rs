//! The engine's run policy, tried on a real engine (sandbox off, nothing run): where a file
//! run goes, run ids and artifact targets, what a client may read.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::backend::{BackendFuture, BackendHealth};
use super::placement::RunMode;
use super::settings::tests::settings;
use super::*;
use crate::background::{RemoteRun, RunKind};

/// A remote backend that counts the jobs it was asked to pack and packs none.
#[derive(Debug, Default)]
struct Counting {
    prepared: AtomicUsize,
}

impl RemoteBackend for Counting {
    fn name(&self) -> &'static str {
        "elsewhere"
    }
    fn prepare<'a>(
        &'a self,
        _: &'a ProjectPath,
        _: JobSpec<'a>,
    ) -> BackendFuture<'a, Result<Box<dyn RemoteRun>, PrepareError>> {
        self.prepared.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Err(PrepareError::Unreadable(std::io::ErrorKind::NotFound)) })
    }
    fn health(&self) -> BackendFuture<'_, BackendHealth> {
        Box::pin(async {
            BackendHealth {
                reachable: true,
                key_works: true,
                workers: serde_json::Value::Null,
                jobs: serde_json::Value::Null,
                error: None,
            }
        })
    }
}

struct Fixture {
    engine: Engine,
    script: ProjectPath,
    _projects: tempfile::TempDir,
}

fn engine(change: impl FnOnce(&mut EngineSettings)) -> Fixture {
    let projects = tempfile::tempdir().unwrap();
    std::fs::write(projects.path().join("main.py"), "print(1)\n").unwrap();
    let mut settings = settings(projects.path());
    change(&mut settings);
    let engine = Engine::new(settings, CancellationToken::new()).unwrap();
    let script = engine.root().resolve_script("main.py").unwrap();
    Fixture {
        engine,
        script,
        _projects: projects,
    }
}

fn file_run(script: &ProjectPath, backend: Option<Arc<dyn RemoteBackend>>) -> FileRun {
    FileRun {
        script: script.clone(),
        args: vec!["--epochs".into(), "3".into()],
        stdin: None,
        timeout: Duration::from_secs(5),
        python: None,
        backend,
    }
}

#[tokio::test]
async fn a_run_the_call_waits_for_stays_in_the_call_without_detach_after() {
    let f = engine(|_| {});
    let started = f
        .engine
        .start_call(&Caller::Local, &file_run(&f.script, None))
        .await
        .unwrap();
    assert!(matches!(started, Started::InCall), "{started:?}");
    assert!(f.engine.runs().list("local").is_empty());
}

#[tokio::test]
async fn a_detachable_run_without_room_goes_on_in_the_call_but_a_background_run_is_refused() {
    let f = engine(|s| {
        s.background.detach_after = Some(Duration::from_secs(60));
        s.background.max_per_caller = 0;
    });
    let run = file_run(&f.script, None);
    let started = f.engine.start_call(&Caller::Local, &run).await;
    assert!(matches!(started, Ok(Started::InCall)), "{started:?}");
    let refused = f
        .engine
        .start_background(&Caller::Local, &run, RunKind::Background)
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            StartRefused::Full(StartError::CallerFull { max: 0 })
        ),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_remote_run_at_the_callers_quota_is_refused_before_its_project_is_packed() {
    let backend = Arc::new(Counting::default());
    let f = engine(|s| s.background.max_per_caller = 0);
    let run = file_run(&f.script, Some(backend.clone()));
    let refused = f.engine.start_call(&Caller::Local, &run).await.unwrap_err();
    assert!(matches!(refused, StartRefused::Full(_)), "{refused:?}");
    for kind in [RunKind::Background, RunKind::Task] {
        let refused = f
            .engine
            .start_background(&Caller::Local, &run, kind)
            .await
            .unwrap_err();
        assert!(matches!(refused, StartRefused::Full(_)), "{refused:?}");
    }
    assert_eq!(backend.prepared.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_remote_run_whose_job_cannot_be_made_is_refused_and_not_registered() {
    let backend = Arc::new(Counting::default());
    let f = engine(|s| s.remote = vec![backend.clone()]);
    let chosen = f.engine.backends().choose(Some("elsewhere")).unwrap();
    let run = file_run(&f.script, chosen);
    let refused = f
        .engine
        .start_background(&Caller::Local, &run, RunKind::Task)
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            StartRefused::Prepare(PrepareError::Unreadable(std::io::ErrorKind::NotFound))
        ),
        "{refused:?}"
    );
    assert_eq!(backend.prepared.load(Ordering::SeqCst), 1);
    assert!(f.engine.runs().list("local").is_empty());
}

#[tokio::test]
async fn each_run_in_a_call_gets_its_own_run_id_kept_for_its_owner_and_the_retention() {
    let f = engine(|s| s.background.retention = Duration::from_secs(77));
    let (a, b) = (f.engine.call_run("alice"), f.engine.call_run("alice"));
    let (id_a, id_b) = (a.run_id.clone().unwrap(), b.run_id.clone().unwrap());
    assert!(artifacts::is_run_id(&id_a), "{id_a}");
    assert_ne!(id_a, id_b);
    let target = a.artifacts.as_ref().unwrap();
    assert_eq!(target.run_id, id_a);
    assert_eq!(target.owner, "alice");
    assert_eq!(target.retention, Duration::from_secs(77));
    assert!(Arc::ptr_eq(&target.store, f.engine.artifacts()));
    assert_eq!(a.live.totals(crate::live_output::Stream::Stdout).written, 0);
}

#[tokio::test]
async fn a_kept_run_is_found_only_by_its_owner_and_only_under_a_run_ids_shape() {
    let f = engine(|_| {});
    let call = f.engine.call_run("alice");
    let outcome = RunOutcome {
        stdout: "not kept: the output is in the capture".into(),
        stderr: String::new(),
        exit_code: Some(0),
        signal: None,
        timed_out: false,
        cancelled: false,
        stdout_truncated: false,
        stderr_truncated: false,
        duration: Duration::from_millis(3),
        artifacts: None,
        python: None,
        quarantined: Vec::new(),
        warm: false,
    };
    let id = f
        .engine
        .keep_ended(&call, &outcome, "alice", (&f.script).into())
        .unwrap();
    assert_eq!(Some(&id), call.run_id.as_ref());
    let record = f.engine.find_run("alice", &id).unwrap();
    assert_eq!(record.file_name, "main.py");
    assert!(f.engine.find_run("bob", &id).is_none());
    assert!(f.engine.find_run("alice", "main.py").is_none());
    assert!(f.engine.runs().list("alice").is_empty(), "kept unlisted");
    match record.end() {
        Some(crate::background::RunEnd::Finished(kept)) => assert!(kept.stdout.is_empty()),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        f.engine.sandbox_layers("alice", Some(&id)),
        f.engine.layers_now()
    );
}

#[tokio::test]
async fn the_host_folders_are_cut_from_what_a_client_reads() {
    let f = engine(|_| {});
    let projects = f.engine.root().path().display().to_string();
    let scratch = f.engine.runner().scratch_root().display().to_string();
    let sep = std::path::MAIN_SEPARATOR;
    let text = format!(
        "File \"{projects}{sep}main.py\", line 1\nFile \"{scratch}{sep}slot-3{sep}x.py\"\n{projects}"
    );
    assert_eq!(
        f.engine.without_host_folder(&text),
        format!("File \"main.py\", line 1\nFile \"slot-3{sep}x.py\"\n{projects}")
    );
}

#[tokio::test]
async fn calls_and_background_runs_have_their_own_time_limits() {
    let f = engine(|s| {
        s.timeout = Duration::from_secs(30);
        s.background.timeout = Duration::from_secs(3600);
    });
    assert_eq!(f.engine.time_limit(RunMode::Call), Duration::from_secs(30));
    assert_eq!(
        f.engine.time_limit(RunMode::Task),
        Duration::from_secs(3600)
    );
}

#[tokio::test]
async fn a_held_run_is_killed_and_forgotten_with_its_call_unless_handed_over_or_kept() {
    let f = engine(|_| {});
    let kept = |owner: &str| {
        let call = f.engine.call_run(owner);
        let outcome = RunOutcome {
            stdout: String::new(),
            stderr: String::new(),
            exit_code: None,
            signal: None,
            timed_out: false,
            cancelled: false,
            stdout_truncated: false,
            stderr_truncated: false,
            duration: Duration::ZERO,
            artifacts: None,
            python: None,
            quarantined: Vec::new(),
            warm: false,
        };
        let id = f
            .engine
            .keep_ended(&call, &outcome, owner, (&f.script).into())
            .unwrap();
        f.engine.find_run(owner, &id).unwrap()
    };
    let dropped = kept("alice");
    drop(f.engine.hold(&dropped));
    assert!(f.engine.find_run("alice", &dropped.id).is_none());

    let handed = kept("alice");
    f.engine.hold(&handed).hand_over();
    let listed: Vec<_> = f.engine.runs().list("alice");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].id, handed.id);

    let stays = kept("alice");
    f.engine.hold(&stays).keep();
    assert!(f.engine.find_run("alice", &stays.id).is_some());
    assert_eq!(f.engine.runs().list("alice").len(), 1, "kept, not listed");
}
