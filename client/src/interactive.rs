//! `interactive`: a small menu on a terminal — run a file (picked from the server's list, with
//! arguments and the script's stdin typed in), list files, list tools, a Python session, quit. A driver beside
//! `execute` in lib.rs, not a command: it runs the commands and hands their data to `output`,
//! which prints every line of the conversation. Ctrl-C during a run cancels that run and the
//! menu comes back; Ctrl-C at the menu ends the session.

use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};

use crate::cli::RunArgs;
use crate::commands::{files, run, sessions, tools};
use crate::error::ClientError;
use crate::output::Output;
use crate::session::Session;

const MENU: &str =
    "\n  1) run a file   2) list files   3) list tools   4) Python session   q) quit\n";

type Input = Lines<BufReader<Stdin>>;

/// Ends with 0 on `q` or end of input; each run shows its exit code instead.
pub async fn execute(session: &Session, output: &Output) -> Result<u8, ClientError> {
    let mut input = BufReader::new(tokio::io::stdin()).lines();
    let name = session.server_name().unwrap_or_else(|| "the server".into());
    output.connected(&name);
    loop {
        let Some(choice) = prompt(session, &mut input, output, &format!("{MENU}> ")).await? else {
            return Ok(0);
        };
        let step = match choice.as_str() {
            "1" | "r" | "run" => run_one(session, &mut input, output).await.map(|code| {
                if let Some(code) = code {
                    output.run_exit_code(code);
                }
            }),
            "2" | "f" | "files" => files::execute(session, None)
                .await
                .map(|list| output.files(&list)),
            "3" | "t" | "tools" => tools::execute(session)
                .await
                .map(|t| output.tools(&t, false)),
            "4" | "s" | "session" => python_session(session, &mut input, output).await,
            "q" | "quit" | "exit" => return Ok(0),
            "" => Ok(()),
            other => {
                output.unknown_choice(other);
                Ok(())
            }
        };
        // A failed or stopped action is reported and the menu comes back.
        match step {
            Err(ClientError::Interrupted) => output.note("cancelled"),
            Err(e) => output.error(&e),
            Ok(()) => {}
        }
    }
}

async fn run_one(
    session: &Session,
    input: &mut Input,
    output: &Output,
) -> Result<Option<u8>, ClientError> {
    let Some(file) = pick_file(session, input, output).await? else {
        return Ok(None);
    };
    let Some(line) = prompt(
        session,
        input,
        output,
        "arguments (shell-style, empty for none): ",
    )
    .await?
    else {
        return Ok(None);
    };
    let args = shlex::split(&line).ok_or_else(|| ClientError::BadArguments {
        tool: run::TOOL.into(),
        reason: "unbalanced quotes".into(),
    })?;
    let Some(stdin) = read_stdin(session, input, output).await? else {
        return Ok(None);
    };
    let run_args = RunArgs {
        file,
        script_args: vec![],
        args,
        stdin: false,
        stdin_file: None,
        stdin_text: stdin,
        script_timeout: None,
        detach: false,
        save_artifacts: None,
    };
    let report = run::execute(session, &run_args, true).await?;
    output.run_report(&report, false);
    Ok(Some(report.exit_code()))
}

/// A Python session for as long as the menu item lasts (over stdio the server ends with this
/// client, so a session lives within one `interactive`): each line runs in it, a line ending
/// in `:` opens a block that an empty line closes; an empty line (or `exit`, or end of input)
/// stops the session and the menu comes back.
async fn python_session(
    session: &Session,
    input: &mut Input,
    output: &Output,
) -> Result<(), ClientError> {
    let started = sessions::start(session, None).await?;
    let id = started.value.session_id;
    output.note(&format!(
        "Python session {id}: type code; a line ending in `:` opens a block an empty line \
         closes; an empty line ends the session"
    ));
    let result = session_loop(session, input, output, &id).await;
    // Stopped however the loop ended (Ctrl-C included); a failure to stop is only noted.
    if let Err(e) = sessions::stop(session, &id).await {
        output.error(&e);
    }
    result
}

async fn session_loop(
    session: &Session,
    input: &mut Input,
    output: &Output,
    id: &str,
) -> Result<(), ClientError> {
    loop {
        let Some(first) = prompt_raw(session, input, output, ">>> ").await? else {
            return Ok(());
        };
        if first.trim().is_empty() || first.trim() == "exit" {
            return Ok(());
        }
        let mut code = format!("{first}\n");
        if first.trim_end().ends_with(':') {
            while let Some(line) = prompt_raw(session, input, output, "... ").await? {
                if line.trim().is_empty() {
                    break;
                }
                code.push_str(&line);
                code.push('\n');
            }
        }
        let answer = sessions::exec(session, id, &code, None).await?;
        output.session_exec(&answer);
    }
}

/// The server's files, numbered; the answer is a number or a path. `None`: nothing picked.
async fn pick_file(
    session: &Session,
    input: &mut Input,
    output: &Output,
) -> Result<Option<String>, ClientError> {
    let list = files::execute(session, None).await?;
    output.numbered(&list.files);
    let Some(answer) = prompt(session, input, output, "file (number or path): ").await? else {
        return Ok(None);
    };
    if answer.is_empty() {
        return Ok(None);
    }
    let picked = answer
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| list.files.get(i).cloned());
    Ok(Some(picked.unwrap_or(answer)))
}

/// The script's stdin, typed line by line until an empty line (`Some(None)`: none at all);
/// `None` at end of input.
async fn read_stdin(
    session: &Session,
    input: &mut Input,
    output: &Output,
) -> Result<Option<Option<String>>, ClientError> {
    output.note("stdin for the script, line by line; an empty line ends it:");
    let mut text = String::new();
    loop {
        match prompt(session, input, output, "| ").await? {
            None => return Ok(None),
            Some(line) if line.is_empty() => break,
            Some(line) => {
                text.push_str(&line);
                text.push('\n');
            }
        }
    }
    Ok(Some((!text.is_empty()).then_some(text)))
}

/// A line as typed (its indentation kept, for code); `None` at end of input.
async fn prompt_raw(
    session: &Session,
    input: &mut Input,
    output: &Output,
    text: &str,
) -> Result<Option<String>, ClientError> {
    output.prompt(text);
    session
        .limits()
        .guard(async {
            input.next_line().await.map_err(|source| ClientError::Io {
                context: "cannot read stdin".into(),
                source,
            })
        })
        .await
}

/// `None` at end of input.
async fn prompt(
    session: &Session,
    input: &mut Input,
    output: &Output,
    text: &str,
) -> Result<Option<String>, ClientError> {
    let line = prompt_raw(session, input, output, text).await?;
    Ok(line.map(|l| l.trim().to_owned()))
}
