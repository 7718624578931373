//! `stockade`: parse the command line, call the library, map the outcome to an exit code.

#![forbid(unsafe_code)]

mod args;
#[cfg(feature = "wasm")]
mod guest;
#[cfg(feature = "serve")]
mod mcp;
mod review;
#[cfg(feature = "serve")]
mod serve;

use args::{Cli, Command, PolicyCommand, RunArgs};
use clap::Parser;
use std::io::Write;
use std::os::fd::AsFd;
use std::process::ExitCode;
use stockade::report::EXIT_SETUP_FAILED;
use stockade::{Job, Output, Policy, PolicyError, Report};

fn main() -> ExitCode {
    // Stage 2 of a Wasm run, inside the jail (`stockade __runner CONFIG...`): before anything else.
    #[cfg(feature = "wasm")]
    if let Some(runner) = stockade::wasm::runner::enter() {
        return runner;
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            // A value that does not parse is said as every other refusal: `stockade: FLAG: why`.
            if let Some(said) = value_error(&e) {
                eprintln!("stockade: {said}");
                return code(EXIT_SETUP_FAILED);
            }
            let _ = e.print();
            return if e.use_stderr() { code(EXIT_SETUP_FAILED) } else { ExitCode::SUCCESS };
        }
    };
    match cli.command {
        Command::Run(args) => run(*args),
        Command::Policy(PolicyCommand::Check { files }) => review::check(&files),
        Command::Policy(PolicyCommand::Explain { file, json, no_host }) => review::explain(&file, json, no_host),
        Command::Policy(PolicyCommand::Lint { files, json, strict }) => review::lint(&files, json, strict),
        Command::Policy(PolicyCommand::Score { files, threshold, json }) => review::score(&files, threshold, json),
        Command::Policy(PolicyCommand::Diff { a, b, json, fail_on_loosen }) => {
            review::diff(&a, &b, json, fail_on_loosen)
        }
        Command::Policy(PolicyCommand::Schema) => {
            println!("{}", stockade::policy::json_schema());
            ExitCode::SUCCESS
        }
        Command::Policy(PolicyCommand::Default) => {
            print!("{}", stockade::policy::DEFAULT_POLICY_TOML);
            ExitCode::SUCCESS
        }
        Command::Policy(PolicyCommand::Example { name }) => review::example(name.as_deref()),
        Command::Doctor { policy, json, guest_dir } => review::doctor(policy.as_deref(), json, guest_dir.as_deref()),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(shell, &mut Cli::command(), "stockade", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
        Command::Man { dir } => match man_pages(&dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("stockade: {}: {e}", dir.display());
                ExitCode::FAILURE
            }
        },
        #[cfg(feature = "wasm")]
        Command::Guest(cmd) => guest::command(cmd),
        #[cfg(feature = "wasm")]
        #[cfg(feature = "serve")]
        Command::Serve(args) => serve::command(args),
        #[cfg(feature = "serve")]
        Command::Mcp(args) => mcp::command(args),
    }
}

/// A command's refusal, said once as `stockade: ...`, with the exit status of a refused set-up.
#[cfg(feature = "serve")]
pub(crate) fn fail(message: impl std::fmt::Display) -> ExitCode {
    // A problem of the command line's is already said as `stockade: --flag: ...`.
    let message = message.to_string();
    eprintln!("stockade: {}", message.strip_prefix("stockade: ").unwrap_or(&message));
    ExitCode::from(u8::try_from(EXIT_SETUP_FAILED).unwrap_or(1))
}

/// `FLAG: why` for a flag whose value did not parse (clap's own words for other mistakes, which
/// come with the usage).
fn value_error(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if e.kind() != ErrorKind::ValueValidation {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else { return None };
    let flag = arg.split([' ', '=']).next().unwrap_or(arg);
    let why = std::error::Error::source(e)?.to_string();
    Some(format!("{flag}: {why}"))
}

fn code(c: i32) -> ExitCode {
    ExitCode::from(u8::try_from(c).unwrap_or(u8::MAX))
}

fn policy_for(args: &RunArgs) -> Result<Policy, PolicyError> {
    let mut policy = match &args.policy {
        Some(path) => Policy::load(path)?,
        None => Policy::builtin(),
    };
    for p in &args.ro {
        policy.add_read_only(p, "--ro")?;
    }
    for p in &args.rw {
        policy.add_read_write(p, "--rw")?;
    }
    for e in &args.egress {
        policy.add_egress(e, "--egress")?;
    }
    if let Some(t) = args.timeout {
        policy.set_wall_timeout(t, "--timeout")?;
    }
    if let Some(cwd) = &args.cwd {
        // A relative --cwd is the caller's path, as for --rw: the same directory inside.
        let cwd = if cwd.starts_with('/') {
            cwd.clone()
        } else {
            std::path::absolute(cwd)
                .map_err(|e| PolicyError::Override { flag: format!("--cwd {cwd}"), message: e.to_string() })?
                .display()
                .to_string()
        };
        policy.set_cwd(&cwd, "--cwd")?;
    }
    args.cgroups.apply(&mut policy)?;
    Ok(policy)
}

/// The Wasm options of `stockade run`: a build without the runner names them instead of taking
/// them for the program.
#[cfg(not(feature = "wasm"))]
const WASM_FLAGS: &[&str] =
    &["--python", "--python-file", "--js", "--js-file", "--wasm", "--workspace", "--data", "--guest-dir"];

/// What `stockade run` was asked to run.
enum What {
    Program(Job),
    #[cfg(feature = "wasm")]
    Wasm(stockade::wasm::WasmJob),
}

fn what(args: &RunArgs) -> Result<What, String> {
    #[cfg(feature = "wasm")]
    if let Some(w) = guest::wasm_job(args)? {
        return Ok(What::Wasm(w));
    }
    #[cfg(not(feature = "wasm"))]
    if let Some(flag) = args.command.first().filter(|f| WASM_FLAGS.contains(&f.split('=').next().unwrap_or(""))) {
        return Err(format!(
            "{flag}: this stockade was built without the Wasm runner (feature `wasm`); \
             a build with default features runs Wasm guests"
        ));
    }
    let mut command = args.command.iter().cloned();
    let Some(program) = command.next() else {
        return Err("nothing to run: give -- PROGRAM [ARGS...] (or --python, --js, --wasm)".into());
    };
    let mut job = Job::new(program).args(command);
    if args.stdin {
        job.stdin = Some(stockade::policy::StdinMode::Inherit);
    }
    Ok(What::Program(job))
}

fn run(args: RunArgs) -> ExitCode {
    let what = match what(&args) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("stockade: {e}");
            return code(EXIT_SETUP_FAILED);
        }
    };
    let embed = args.report.as_deref() == Some("-");
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let output =
        if embed { Output::Capture } else { Output::Forward { stdout: stdout.as_fd(), stderr: stderr.as_fd() } };
    let policy_name =
        args.policy.as_ref().map_or(stockade::policy::DEFAULT_POLICY_NAME.to_string(), |p| p.display().to_string());
    let result = policy_for(&args).map_err(stockade::Error::from).and_then(|policy| match &what {
        What::Program(job) => stockade::run(&policy, job, output),
        #[cfg(feature = "wasm")]
        What::Wasm(w) => stockade::wasm::prepare(&policy, w).and_then(|plan| plan.run(output)),
    });
    let report = match result {
        Ok(report) => {
            if let Some(error) = &report.error {
                eprintln!("stockade: {error}");
            }
            if let Some(words) = report.ending_words().filter(|_| !args.quiet) {
                eprintln!("stockade: {words}");
            }
            report
        }
        Err(e) => {
            eprintln!("stockade: {e}");
            let job = match &what {
                What::Program(job) => job.clone(),
                #[cfg(feature = "wasm")]
                What::Wasm(w) => Job::new(w.runner.display().to_string()),
            };
            stockade::refused_report(&policy_name, &job, &e)
        }
    };
    if let Some(dest) = &args.report
        && let Err(e) = write_report(dest, &report)
    {
        eprintln!("stockade: cannot write the report to {dest}: {e}");
        return code(EXIT_SETUP_FAILED);
    }
    code(report.stockade_exit_code)
}

fn write_report(dest: &str, report: &Report) -> std::io::Result<()> {
    let json = report.to_json();
    if dest == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(json.as_bytes())?;
        out.flush()
    } else {
        std::fs::write(dest, json)
    }
}

/// One man page per command and subcommand: stockade.1, stockade-run.1, stockade-policy-lint.1...
fn man_pages(dir: &std::path::Path) -> std::io::Result<()> {
    use clap::CommandFactory;
    fn write(cmd: clap::Command, name: String, dir: &std::path::Path) -> std::io::Result<()> {
        let cmd = cmd.display_name(name.clone()).bin_name(name.replace('-', " "));
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd.clone()).render(&mut out)?;
        std::fs::write(dir.join(format!("{name}.1")), out)?;
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            write(sub.clone(), format!("{name}-{}", sub.get_name()), dir)?;
        }
        Ok(())
    }
    std::fs::create_dir_all(dir)?;
    write(Cli::command(), "stockade".into(), dir)
}
