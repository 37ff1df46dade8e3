//! The local / remote / detached choice, in one place: given how a file run was asked for
//! ([`RunMode`]), whether it goes to a remote backend, and `--detach-after`, where it runs —
//! in the call itself, or in the background registry (which kind, pool, listed or not, handed
//! over after how long: a [`Registration`]) — and under which time limit. Pure: the engine acts
//! on the answer.

use std::time::Duration;

use crate::background::RunKind;
use crate::runner::Pool;

/// How a file run was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunMode {
    /// `run_python`: the call waits for it.
    Call,
    /// `start_python`: the call returns its id at once.
    Background,
    /// A `run_python` call that became an MCP task.
    Task,
}

/// A run's place in the background registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registration {
    pub kind: RunKind,
    pub pool: Pool,
    /// Listed by `list_runs` from the start (a waited-for run is listed once handed over).
    pub listed: bool,
    /// A waited-for run is handed over to the background after this long.
    pub hand_over_after: Option<Duration>,
    /// When the registry has no room, the run goes on in the call instead of being refused.
    pub or_in_call: bool,
}

/// Where a run the call waits for goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Run in the call, by the runner, not registered (its record is kept only when its output
    /// was too long to show).
    InCall,
    /// Started in the background registry, the call following it until it is handed over.
    Registry(Registration),
}

/// Where a run the call waits for goes. A remote run always goes through the registry (it is
/// driven like a background run), handed over only with `--detach-after`; a local run goes
/// through the registry only with `--detach-after`, and stays in the call when it has no room.
pub fn place_call(remote: bool, detach_after: Option<Duration>) -> Placement {
    match (remote, detach_after) {
        (true, after) => Placement::Registry(Registration {
            kind: RunKind::Background,
            pool: Pool::Background,
            listed: false,
            hand_over_after: Some(after.unwrap_or(Duration::MAX)),
            or_in_call: false,
        }),
        (false, Some(after)) => Placement::Registry(Registration {
            kind: RunKind::Background,
            // It still holds the call: a place of the foreground pool, as a plain call's.
            pool: Pool::Foreground,
            listed: false,
            hand_over_after: Some(after),
            or_in_call: true,
        }),
        (false, None) => Placement::InCall,
    }
}

/// Where a background run (`start_python`) or a task goes, local or remote alike: listed at
/// once, in the background pool.
pub fn place_background(kind: RunKind) -> Registration {
    Registration {
        kind,
        pool: Pool::Background,
        listed: true,
        hand_over_after: None,
        or_in_call: false,
    }
}

/// The time limit of a run asked for as `mode`: a call's (`--timeout`), else the background's.
pub fn time_limit(mode: RunMode, call: Duration, background: Duration) -> Duration {
    match mode {
        RunMode::Call => call,
        RunMode::Background | RunMode::Task => background,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn a_waited_for_local_run_stays_in_the_call_unless_it_may_detach() {
        assert_eq!(place_call(false, None), Placement::InCall);
        assert_eq!(
            place_call(false, Some(MIN)),
            Placement::Registry(Registration {
                kind: RunKind::Background,
                pool: Pool::Foreground,
                listed: false,
                hand_over_after: Some(MIN),
                or_in_call: true,
            })
        );
    }

    #[test]
    fn a_waited_for_remote_run_goes_through_the_registry_and_is_handed_over_only_when_asked() {
        let Placement::Registry(never) = place_call(true, None) else {
            panic!("a remote run is a registry run");
        };
        assert_eq!(
            never,
            Registration {
                kind: RunKind::Background,
                pool: Pool::Background,
                listed: false,
                hand_over_after: Some(Duration::MAX),
                or_in_call: false,
            }
        );
        let Placement::Registry(after) = place_call(true, Some(MIN)) else {
            panic!("a remote run is a registry run");
        };
        assert_eq!(after.hand_over_after, Some(MIN));
        assert!(
            !after.or_in_call,
            "a remote run cannot fall back to this machine"
        );
    }

    #[test]
    fn background_runs_and_tasks_are_listed_at_once_in_the_background_pool() {
        for kind in [RunKind::Background, RunKind::Task] {
            assert_eq!(
                place_background(kind),
                Registration {
                    kind,
                    pool: Pool::Background,
                    listed: true,
                    hand_over_after: None,
                    or_in_call: false,
                }
            );
        }
    }

    #[test]
    fn only_a_call_has_the_call_time_limit() {
        let (call, background) = (Duration::from_secs(30), Duration::from_secs(3600));
        assert_eq!(time_limit(RunMode::Call, call, background), call);
        assert_eq!(
            time_limit(RunMode::Background, call, background),
            background
        );
        assert_eq!(time_limit(RunMode::Task, call, background), background);
    }
}
