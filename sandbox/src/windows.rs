//! Windows: one kill-on-close Job Object per run, with memory, CPU-time and process-count limits.
//!
//! [`Sandbox::confine`](crate::Sandbox::confine) makes the child start suspended; the runner spawns it, then calls
//! [`Sandbox::assign_job`](crate::Sandbox::assign_job) with its process handle, which puts it in its job and only then lets
//! it run: nothing it starts is outside the job, and a quick script cannot exit before it is
//! assigned (which failed with "Access denied", seen under Wine). The runner keeps the returned
//! [`RunJob`] for the run's lifetime. Dropping it closes the job's last handle, and Windows kills
//! every process still in the job, however deep in the tree and whatever console or session
//! tricks it used. Children cannot break away (no `JOB_OBJECT_LIMIT_BREAKAWAY_OK`). Not covered:
//! files and network (no AppContainer).

use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle, RawHandle};

use windows_sys::Win32::Foundation::INVALID_HANDLE_VALUE;
use windows_sys::Win32::System::Diagnostics::ToolHelp::{
    CreateToolhelp32Snapshot, Thread32First, Thread32Next, TH32CS_SNAPTHREAD, THREADENTRY32,
};
use windows_sys::Win32::System::Threading::{
    GetProcessId, OpenThread, ResumeThread, CREATE_SUSPENDED, THREAD_SUSPEND_RESUME,
};

use windows_sys::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JobObjectExtendedLimitInformation,
    SetInformationJobObject, JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
    JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION, JOB_OBJECT_LIMIT_JOB_MEMORY,
    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, JOB_OBJECT_LIMIT_PROCESS_MEMORY,
    JOB_OBJECT_LIMIT_PROCESS_TIME,
};

use crate::error::SandboxError;
use crate::policy::{ResourceLimits, SandboxMode, SandboxPolicy};

#[derive(Debug)]
pub(super) struct JobSandbox {
    limits: ResourceLimits,
}

/// A run's Job Object. Keep it until the run is over; dropping it kills what is left of the run.
#[derive(Debug)]
pub struct RunJob {
    _job: OwnedHandle,
}

impl JobSandbox {
    pub(super) fn new(policy: SandboxPolicy) -> Result<Self, SandboxError> {
        let missing = "file access rules and network isolation (not implemented on Windows)";
        if policy.mode == SandboxMode::Strict {
            return Err(SandboxError::StrictUnavailable {
                missing: missing.into(),
            });
        }
        tracing::warn!("sandbox on Windows: Job Object limits only; missing {missing}");
        Ok(Self {
            limits: policy.limits,
        })
    }

    pub(super) fn layers(&self) -> Vec<&'static str> {
        vec!["job-object"]
    }

    /// Starts the child suspended: [`Sandbox::assign_job`](crate::Sandbox::assign_job) lets it run once it is in its job.
    pub(super) fn confine(&self, cmd: &mut std::process::Command) -> Result<(), SandboxError> {
        std::os::windows::process::CommandExt::creation_flags(cmd, CREATE_SUSPENDED);
        Ok(())
    }

    fn job(&self) -> Result<OwnedHandle, SandboxError> {
        let fail = |what: &str| SandboxError::prepare(what, std::io::Error::last_os_error());
        // SAFETY: null security attributes and name are allowed and create an anonymous job.
        let raw = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if raw.is_null() {
            return Err(fail("CreateJobObjectW"));
        }
        // SAFETY: `raw` is a fresh, valid handle that nothing else owns.
        let job = unsafe { OwnedHandle::from_raw_handle(raw as RawHandle) };

        let mut info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
        let basic = &mut info.BasicLimitInformation;
        basic.LimitFlags =
            JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION;
        let l = &self.limits;
        if l.processes > 0 {
            basic.LimitFlags |= JOB_OBJECT_LIMIT_ACTIVE_PROCESS;
            basic.ActiveProcessLimit = u32::try_from(l.processes).unwrap_or(u32::MAX);
        }
        if l.cpu_secs > 0 {
            basic.LimitFlags |= JOB_OBJECT_LIMIT_PROCESS_TIME;
            // In 100 ns units.
            basic.PerProcessUserTimeLimit =
                i64::try_from(l.cpu_secs.saturating_mul(10_000_000)).unwrap_or(i64::MAX);
        }
        if l.memory_bytes > 0 {
            let bytes = usize::try_from(l.memory_bytes).unwrap_or(usize::MAX);
            basic.LimitFlags |= JOB_OBJECT_LIMIT_PROCESS_MEMORY | JOB_OBJECT_LIMIT_JOB_MEMORY;
            info.ProcessMemoryLimit = bytes;
            info.JobMemoryLimit = bytes;
        }
        // SAFETY: `info` is a valid JOBOBJECT_EXTENDED_LIMIT_INFORMATION of the size passed, for
        // the information class that expects it; `job` is a valid job handle.
        let ok = unsafe {
            SetInformationJobObject(
                job.as_raw_handle() as _,
                JobObjectExtendedLimitInformation,
                (&info as *const JOBOBJECT_EXTENDED_LIMIT_INFORMATION).cast(),
                std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            )
        };
        if ok == 0 {
            return Err(fail("SetInformationJobObject"));
        }
        Ok(job)
    }

    /// Puts a freshly spawned run into a new job ([`Sandbox::assign_job`](crate::Sandbox::assign_job)),
    /// then lets it run.
    pub(crate) fn assign_job(&self, process: RawHandle) -> Result<RunJob, SandboxError> {
        let job = self.job()?;
        // SAFETY: both handles are valid for the call; `process` is the caller's child handle.
        let ok = unsafe { AssignProcessToJobObject(job.as_raw_handle() as _, process as _) };
        if ok == 0 {
            return Err(SandboxError::prepare(
                "AssignProcessToJobObject",
                std::io::Error::last_os_error(),
            ));
        }
        resume(process).map_err(|e| SandboxError::prepare("ResumeThread", e))?;
        Ok(RunJob { _job: job })
    }
}

/// Lets a process started suspended run: resumes its threads (a new process has one).
fn resume(process: RawHandle) -> std::io::Result<()> {
    // SAFETY: `process` is the caller's valid process handle.
    let pid = unsafe { GetProcessId(process as _) };
    // SAFETY: a snapshot of every thread of the system; no pointers.
    let raw = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) };
    if raw == INVALID_HANDLE_VALUE || pid == 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh, valid handle that nothing else owns.
    let snapshot = unsafe { OwnedHandle::from_raw_handle(raw as RawHandle) };
    let mut entry = THREADENTRY32 {
        dwSize: std::mem::size_of::<THREADENTRY32>() as u32,
        ..THREADENTRY32::default()
    };
    let mut resumed = 0;
    // SAFETY: a valid snapshot handle and an entry whose `dwSize` is set, as both calls require.
    let mut more = unsafe { Thread32First(snapshot.as_raw_handle() as _, &mut entry) } != 0;
    while more {
        if entry.th32OwnerProcessID == pid {
            // SAFETY: no pointers; a null result is checked.
            let thread = unsafe { OpenThread(THREAD_SUSPEND_RESUME, 0, entry.th32ThreadID) };
            if !thread.is_null() {
                // SAFETY: `thread` is a fresh, valid handle that nothing else owns.
                let thread = unsafe { OwnedHandle::from_raw_handle(thread as RawHandle) };
                // SAFETY: a valid thread handle with THREAD_SUSPEND_RESUME.
                if unsafe { ResumeThread(thread.as_raw_handle() as _) } != u32::MAX {
                    resumed += 1;
                }
            }
        }
        // SAFETY: as for Thread32First.
        more = unsafe { Thread32Next(snapshot.as_raw_handle() as _, &mut entry) } != 0;
    }
    if resumed == 0 {
        return Err(std::io::Error::other(
            "the run's thread was not found to resume it",
        ));
    }
    Ok(())
}
