//! spawn: one cell of the `spawn` scenario (bench/scenarios.md) for tokio. Prints one CSV row:
//!   impl,threads,case,ops,seconds,ops_per_sec
//!
//! Usage: spawn --case spawn_join|ping_pong|fanout --threads T --ops N [--work W]
//!
//! threads = 1 runs tokio's current_thread runtime, threads = T > 1 a multi_thread runtime with T
//! workers. The case body runs as a task spawned from `block_on` (a `block_on` future runs on the
//! calling thread, outside the workers); the body reads the clock itself.

mod cases;

use lab::fail;

struct Args {
    case: String,
    threads: usize,
    ops: u64,
    work: u64,
}

fn parse() -> Args {
    let options = lab::Options::parse(&["case", "threads", "ops", "work"]);
    let args = Args {
        case: options.text("case", ""),
        threads: options.number("threads", 0) as usize,
        ops: options.number("ops", 0),
        work: options.number("work", cases::WORK_ROUNDS),
    };
    if args.threads == 0 || args.ops == 0 || args.work == 0 {
        fail("--threads, --ops and --work must be positive");
    }
    args
}

fn main() {
    let args = parse();
    let (ops, work) = (args.ops, args.work);
    let case = args.case.clone();
    let rt = lab::runtime(args.threads);
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
