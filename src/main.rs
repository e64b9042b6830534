//! The `coordbench` command. Parses arguments, runs the command on a tokio runtime, and
//! turns the outcome into an exit code: 0 complete, 1 failed, 2 bad input or environment,
//! 3 a threshold breached (gate, compare --thresholds), 130 interrupted. Every error is one line on stderr.

use std::process::ExitCode;

mod allocator;

use clap::error::ErrorKind;
use clap::Parser;
use coordbench::cli::{Cli, Command, ServeCommand};
use coordbench_bench::run as bench;
use coordbench_lab::environment;
use coordbench_results::outcome::{one_line, Outcome, UsageError};

fn main() -> ExitCode {
    environment::record_build(environment::Build {
        version: env!("CARGO_PKG_VERSION"),
        git_commit: env!("COORDBENCH_GIT_COMMIT"),
    });
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{}", usage_line(&e));
            return ExitCode::from(2);
        }
    };
    if let Command::Serve(_) = &cli.command {
        allocator::return_freed_memory_promptly();
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    // A generator pinned to fewer cores than the machine has gets one worker per core:
    // idle workers sharing a core would be woken to steal every task and switch in vain.
    // Beside servers it started, it takes half the cores (generator::workers).
    let run_args = match &cli.command {
        Command::Run(args) => Some(args),
        Command::Capacity(args) => Some(&args.run),
        _ => None,
    };
    if let Some(args) = run_args {
        let pinned = args
            .generator
            .pin_client
            .as_ref()
            .map(|cpus| cpus.cpus().len().max(1));
        let cpus = coordbench_lab::affinity::CpuList::available().cpus().len();
        // The delay proxy carries the members' traffic on the generator's runtime.
        let beside_servers = args.starts_servers() && !args.proxies_members();
        if let Some(workers) = coordbench_bench::generator::workers(
            args.generator.client_threads,
            pinned,
            beside_servers,
            cpus,
        ) {
            builder.worker_threads(workers);
        }
    }
    if run_args.is_some_and(|a| a.generator.realtime) {
        realtime(&mut builder);
    }
    let runtime = match builder.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => bench::run(args).await,
            Command::Capacity(args) => coordbench::capacity::run(args).await,
            Command::Sweep(args) => coordbench::sweep::run(args).await,
            Command::Report(args) => coordbench_analysis::report::run(&args),
            Command::Compare(args) => coordbench_analysis::compare::run(&args),
            Command::Merge(args) => coordbench::merge::run(&args),
            Command::Install(args) => coordbench_lab::install::run(args).await,
            Command::Gate(args) => coordbench::gate::run(args).await,
            Command::Simulate(command) => coordbench_analysis::simulate::run(&command),
            Command::Serve(ServeCommand::Raft(args)) => coordbench_serve::run_raft(args)
                .await
                .map(|()| Outcome::Complete)
                .map_err(UsageError::from),
            Command::Serve(ServeCommand::Zab(args)) => coordbench_serve::run_zab(args)
                .await
                .map(|()| Outcome::Complete)
                .map_err(UsageError::from),
        }
    });
    match result {
        Ok(Outcome::Complete) => ExitCode::SUCCESS,
        Ok(Outcome::Failed) => ExitCode::from(1),
        Ok(Outcome::Interrupted) => ExitCode::from(130),
        Ok(Outcome::Breached) => ExitCode::from(3),
        Err(e) => {
            eprintln!("error: {}", e.0);
            ExitCode::from(2)
        }
    }
}

/// `--realtime`: the main thread and every thread the runtime starts take the real-time
/// priority; where the process may not, one warning and the run goes on at normal priority.
fn realtime(builder: &mut tokio::runtime::Builder) {
    use coordbench_lab::affinity::make_current_thread_realtime;
    match make_current_thread_realtime() {
        Ok(()) => {
            builder.on_thread_start(|| {
                let _ = make_current_thread_realtime();
            });
        }
        Err(e) => eprintln!(
            "warning: --realtime: no real-time priority here ({e}; it needs root or CAP_SYS_NICE); the generator runs at normal priority"
        ),
    }
}

/// clap's error as one line: its first line, plus the accepted values when it lists them,
/// or the missing arguments when the first line announces a list of them.
fn usage_line(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let mut lines = rendered.lines().map(str::trim).filter(|l| !l.is_empty());
    let mut first = lines
        .next()
        .unwrap_or("error: invalid arguments")
        .to_string();
    if first.ends_with(':') {
        // "the following required arguments were not provided:" then one line per argument.
        let listed: Vec<&str> = lines
            .clone()
            .take_while(|l| !l.starts_with("Usage:"))
            .collect();
        first = format!("{first} {}", listed.join(", "));
    }
    let rest: Vec<&str> = lines.collect();
    // clap's suggestion for a typo ("tip: a similar argument exists: '--duration'").
    let tip = rest.iter().find_map(|l| l.strip_prefix("tip: ")).map(|t| {
        let named = t.find('\'').map_or(t, |at| &t[at..]);
        format!("did you mean {}", named.replace(", ", " or "))
    });
    let possible = rest.iter().find(|l| l.starts_with("[possible values:"));
    let line = match (tip, possible) {
        (Some(tip), _) => format!("{first} ({tip}?); see --help"),
        (None, Some(p)) => format!("{first} {p}; see coordbench run --help"),
        (None, None) => format!("{first}; see --help"),
    };
    one_line(&line)
}
