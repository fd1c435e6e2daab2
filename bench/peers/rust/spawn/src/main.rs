//! spawn: one cell of the `spawn` scenario (bench/scenarios.md) for tokio. Prints one CSV row:
//!   impl,threads,case,ops,seconds,ops_per_sec
//!
//! Usage: spawn --case spawn_join|ping_pong|fanout --threads T --ops N [--work W]
//!
//! threads = 1 runs tokio's current_thread runtime, threads = T > 1 a multi_thread runtime with T
//! workers. The case body runs as a task spawned from `block_on` (a `block_on` future runs on the
//! calling thread, outside the workers); the body reads the clock itself.

mod cases;

use std::process::exit;

struct Args {
    case: String,
    threads: usize,
    ops: u64,
    work: u64,
}

fn fail(why: &str) -> ! {
    eprintln!("self-check failed: {why}");
    exit(1);
}

fn number(name: &str, raw: &str) -> u64 {
    raw.replace(['_', ','], "").parse().unwrap_or_else(|_| fail(&format!("--{name} wants a number, got {raw}")))
}

fn parse() -> Args {
    let mut args = Args { case: String::new(), threads: 0, ops: 0, work: cases::WORK_ROUNDS };
    let mut argv = std::env::args().skip(1);
    while let Some(option) = argv.next() {
        let value = argv.next().unwrap_or_else(|| fail(&format!("missing value for {option}")));
        match option.as_str() {
            "--case" => args.case = value,
            "--threads" => args.threads = number("threads", &value) as usize,
            "--ops" => args.ops = number("ops", &value),
            "--work" => args.work = number("work", &value),
            _ => fail(&format!("unknown option: {option}")),
        }
    }
    if args.threads == 0 || args.ops == 0 || args.work == 0 {
        fail("--threads, --ops and --work must be positive");
    }
    args
}

fn runtime(threads: usize) -> tokio::runtime::Runtime {
    let built = if threads == 1 {
        tokio::runtime::Builder::new_current_thread().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(threads).build()
    };
    built.unwrap_or_else(|error| fail(&format!("cannot build the tokio runtime: {error}")))
}

fn main() {
    let args = parse();
    let (ops, work) = (args.ops, args.work);
    let case = args.case.clone();
    let rt = runtime(args.threads);
    let outcome = rt.block_on(async move {
        let body = match case.as_str() {
            "spawn_join" => tokio::spawn(cases::spawn_join(ops)),
            "ping_pong" => tokio::spawn(cases::ping_pong(ops)),
            "fanout" => tokio::spawn(cases::fanout(ops, work)),
            other => fail(&format!("unknown --case {other}")),
        };
        body.await.unwrap_or_else(|error| Err(format!("the body task failed: {error}")))
    });
    drop(rt);
    let seconds = outcome.unwrap_or_else(|why| fail(&why));
    if !seconds.is_finite() || seconds <= 0.0 {
        fail(&format!("elapsed time is not finite and positive: {seconds}"));
    }
    println!("tokio,{},{},{},{:.6},{:.0}", args.threads, args.case, ops, seconds, ops as f64 / seconds);
}
