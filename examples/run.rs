//! A Rust caller runs a program in the jail and gets the report, in a few lines.
//!
//! cargo run --example run -- /bin/sh -c 'echo hello from the jail; id -u'

use stockade::{Job, Output, Policy};

fn main() -> Result<(), stockade::Error> {
    let mut args = std::env::args().skip(1);
    let program = args.next().unwrap_or_else(|| "/bin/sh".into());
    let job = Job::new(program).args(args);
    let report = stockade::run(&Policy::builtin(), &job, Output::Capture)?;
    print!("{}", report.to_json());
    Ok(())
}
