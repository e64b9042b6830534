//! Running the build tools an install needs (go, mvn, java): found on PATH, run with a
//! bound on time, their output appended to the install's log so a failure can point at it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::InstallError;
use crate::provision::executable::find_executable;

/// One tool invocation, for the log and for errors.
pub struct Step<'a> {
    /// What the step does, for the log and the error ("go get", "mvn copy-dependencies").
    pub what: &'a str,
    pub program: &'a Path,
    pub args: &'a [&'a str],
    pub dir: &'a Path,
    pub env: &'a [(&'a str, &'a str)],
    pub timeout: Duration,
}

/// The tool's output (stdout and stderr together), or why it failed.
pub enum StepResult {
    Ok(String),
    /// Exited non-zero; its output is in the log and returned for classification.
    Failed(String),
}

/// A tool on PATH (or at its usual place), or `Missing` naming what to install.
pub fn find_tool(name: &str, fallback: &str, install_hint: &str) -> Result<PathBuf, InstallError> {
    find_executable(None, name, fallback).map_err(|_| InstallError::ToolMissing {
        tool: name.to_string(),
        hint: install_hint.to_string(),
    })
}

/// Runs `step`, appending a header and its output to `log`. A step that outlasts its
/// timeout is killed and reported.
pub async fn run(step: &Step<'_>, log: &Path) -> Result<StepResult, InstallError> {
    let mut command = tokio::process::Command::new(step.program);
    command
        .args(step.args)
        .current_dir(step.dir)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    for (k, v) in step.env {
        command.env(k, v);
    }
    append(
        log,
        &format!("\n$ {} {}\n", step.program.display(), step.args.join(" ")),
    )?;
    let output = match tokio::time::timeout(step.timeout, command.output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return Err(InstallError::io(step.program, e)),
        Err(_) => {
            append(log, "(killed: timed out)\n")?;
            return Err(InstallError::BuildFailed {
                what: format!(
                    "{} did not finish within {}",
                    step.what,
                    humantime::format_duration(step.timeout)
                ),
                log: log.to_path_buf(),
            });
        }
    };
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    append(log, &text)?;
    Ok(if output.status.success() {
        StepResult::Ok(text)
    } else {
        append(log, &format!("(exit: {})\n", output.status))?;
        StepResult::Failed(text)
    })
}

/// The first line a tool prints of its version (`go version`, `mvn -v`, `java -version`).
pub async fn version_line(
    program: &Path,
    arg: &str,
    dir: &Path,
    log: &Path,
) -> Result<String, InstallError> {
    let step = Step {
        what: "reading the toolchain's version",
        program,
        args: &[arg],
        dir,
        env: &[],
        timeout: Duration::from_secs(60),
    };
    match run(&step, log).await? {
        StepResult::Ok(text) => Ok(first_line(&text)),
        StepResult::Failed(_) => Err(InstallError::BuildFailed {
            what: format!("{} {arg} failed", program.display()),
            log: log.to_path_buf(),
        }),
    }
}

/// The first non-empty line, without terminal escapes (Maven colours its banner).
pub fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut clean = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // Skip "ESC [ ... letter".
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            clean.push(c);
        }
    }
    clean.trim().to_string()
}

pub fn append(log: &Path, text: &str) -> Result<(), InstallError> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| InstallError::io(log, e))?;
    file.write_all(text.as_bytes())
        .map_err(|e| InstallError::io(log, e))
}

#[cfg(test)]
mod tests {
    #[test]
    fn first_line_drops_blank_lines_and_colour() {
        assert_eq!(
            super::first_line("\n\u{1b}[1mApache Maven 3.8.7\u{1b}[m\nMaven home"),
            "Apache Maven 3.8.7"
        );
        assert_eq!(
            super::first_line("go version go1.26.8 linux/amd64\n"),
            "go version go1.26.8 linux/amd64"
        );
    }
}
