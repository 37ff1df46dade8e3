//! Real work inside the sandbox: one `run_python` through the built server runs numpy, pandas,
//! scipy, matplotlib, scikit-learn with `n_jobs=2`, asyncio with a subprocess, a thread pool and
//! a multiprocessing pool, with the venv's interpreter (`deps::workload_env`, from PyPI), once
//! as it is and once under `multiprocessing.set_start_method("forkserver")` (Python 3.14's
//! default on Linux: a UNIX socket). Each step reports `true` or the error it raised: seccomp's
//! allowlist, the namespaces and the file view must leave all of them working.
#![cfg(target_os = "linux")]

use std::ffi::OsStr;

use pyrun_mcp_tests::{workload_env, ServerLaunch, TempProjects};
use serde_json::{json, Value};

/// Each step prints `name true` or the exception; the last line is all of them as JSON.
const WORKLOAD: &str = r#"
import asyncio, json, os, sys
results = {}
def step(name):
    def wrap(f):
        try:
            results[name] = f()
        except BaseException as e:
            results[name] = "%s: %s" % (type(e).__name__, e)
        print(name, results[name], flush=True)
    return wrap

@step("numpy")
def _():
    import numpy as np
    a = np.random.default_rng(0).random((300, 300))
    return float(np.linalg.eigvalsh(a @ a.T).max()) > 0

@step("pandas")
def _():
    import pandas as pd
    df = pd.DataFrame({"k": [1, 2, 1, 2], "v": [1.0, 2.0, 3.0, 4.0]})
    return df.groupby("k")["v"].sum().to_dict() == {1: 4.0, 2: 6.0}

@step("scipy")
def _():
    from scipy import optimize, sparse
    r = optimize.minimize(lambda x: (x[0] - 3) ** 2, [0.0])
    return bool(abs(r.x[0] - 3) < 1e-4 and sparse.eye(3).nnz == 3)

@step("matplotlib")
def _():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3])
    path = os.path.join(os.environ.get("TMPDIR", "."), "plot.png")
    fig.savefig(path)
    return os.path.getsize(path) > 1000

@step("sklearn_n_jobs_2")
def _():
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import cross_val_score
    X, y = make_classification(n_samples=200, random_state=0)
    model = RandomForestClassifier(n_estimators=10, n_jobs=2, random_state=0)
    return len(cross_val_score(model, X, y, cv=3, n_jobs=2)) == 3

@step("asyncio")
def _():
    async def go():
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", "print(7)", stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        await asyncio.gather(*(asyncio.sleep(0.01) for _ in range(10)))
        return out.strip() == b"7"
    return asyncio.run(go())

@step("threads")
def _():
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(4) as ex:
        return sum(ex.map(lambda x: x * x, range(100))) == 328350

@step("multiprocessing_pool")
def _():
    import multiprocessing as mp
    with mp.Pool(2) as pool:
        return pool.map(abs, [-1, -2, 3]) == [1, 2, 3]

print(json.dumps(results))
"#;

/// The workload under the `forkserver` start method: set once in the main script, whose
/// top level (which the forkserver's children import again) does nothing else.
const FORKSERVER: &str = r#"
import multiprocessing, runpy
if __name__ == "__main__":
    multiprocessing.set_start_method("forkserver")
    runpy.run_path("workload.py", run_name="workload")
"#;

#[test]
fn numpy_pandas_scipy_matplotlib_sklearn_asyncio_and_a_process_pool_work_in_a_run() {
    run_workload("workload.py");
}

#[test]
fn the_workload_works_under_the_forkserver_start_method() {
    run_workload("forkserver.py");
}

/// Runs `script` of a projects folder holding the workload and its `forkserver` wrapper, and
/// asserts every step worked.
fn run_workload(script: &str) {
    let python = workload_env();
    let projects = TempProjects::named("projects")
        .file("workload.py", WORKLOAD)
        .file("forkserver.py", FORKSERVER);
    let mut server = ServerLaunch::new(
        pyrun_mcp_tests::bin_path("pyrun-mcp-server"),
        projects.path(),
    )
    .args([
        OsStr::new("--python"),
        python.as_os_str(),
        OsStr::new("--timeout"),
        OsStr::new("300"),
    ])
    .stdio();
    let result = server.call("run_python", json!({"file_name": script}));
    let run = &result["structuredContent"];
    let stdout = run["stdout"].as_str().unwrap_or_default();
    let steps: Value = stdout
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("no results: {result}"));
    let failed: Vec<String> = steps
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, outcome)| **outcome != json!(true))
        .map(|(step, outcome)| format!("{step}: {outcome}"))
        .collect();
    assert!(
        failed.is_empty(),
        "steps failed in the sandbox ({:?}):\n{}\nstderr:\n{}",
        run["sandbox"],
        failed.join("\n"),
        run["stderr"].as_str().unwrap_or_default()
    );
    assert_eq!(steps.as_object().map(|o| o.len()), Some(8), "{stdout}");
    // joblib falls back to one process, and says so, when it cannot make its semaphores.
    let stderr = run["stderr"].as_str().unwrap_or_default();
    assert!(
        !stderr.contains("serial mode"),
        "n_jobs=2 ran serially: {stderr}"
    );
    server.close();
}
