//! chan: one cell of the `chan` scenario (bench/scenarios.md) for Rust. Prints one CSV row:
//!   program,etype,worker,event,time,speed,channel_bytes,task_bytes
//!
//! Usage: chan -w W -e E [-q Q] [-t int|str|str_ptr|str_clone] [-s S] [--threads T] [--channel tokio|futures]
//!
//! --channel tokio (the default) uses tokio::sync::mpsc, futures uses futures::channel::mpsc; both run
//! on tokio. --threads 0 (the default) is a multi_thread runtime with tokio's default worker count (one
//! per core), 1 the current_thread runtime. The scenario runs as a task spawned from `block_on` (a
//! `block_on` future runs on the calling thread, outside the workers).

mod channels;
mod event;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use channels::{Channel, Futures, Tokio};
use event::{Event, EventType, Source};
use lab::{anonymous_resident_bytes, fail};

struct Params {
    workers: u64,
    events: u64,
    capacity: usize,
    etype: EventType,
    etype_name: String,
    string_size: usize,
    threads: usize,
    channel: String,
}

fn parse() -> Params {
    let options = lab::Options::parse(&["w", "e", "q", "t", "s", "threads", "channel"]);
    let etype_name = options.text("t", "int");
    let params = Params {
        workers: options.number("w", 0),
        events: options.number("e", 0),
        capacity: options.number("q", 256) as usize,
        etype: EventType::parse(&etype_name)
            .unwrap_or_else(|| fail(&format!("unknown -t {etype_name} (int, str, str_ptr or str_clone)"))),
        etype_name,
        string_size: options.number("s", 16) as usize,
        threads: options.number("threads", 0) as usize,
        channel: options.text("channel", "tokio"),
    };
    if params.workers == 0 || params.events == 0 || params.capacity == 0 {
        fail("-w, -e and -q must be positive");
    }
    if params.channel != "tokio" && params.channel != "futures" {
        fail(&format!("unknown --channel {} (tokio or futures)", params.channel));
    }
    params
}

/// What every receiver touches: the scenario's counter, and how many receivers reached their first
/// receive (it only gates the start of the clock).
///
/// On lines of its own, as corio's counter is: the counter is written by every event, and without the
/// alignment its Arc was allocated right after the leaked shared String that str and str_clone
/// senders read per event, so senders would miss on a line receivers on another worker keep taking
/// away. Aligned to 128 (the pair of lines the adjacent-line prefetcher fetches together) and so
/// also 128 bytes long, nothing else shares its lines (the Arc's reference counts sit in the 128
/// bytes before it, and are touched only when a receiver is spawned or finishes).
#[derive(Default)]
#[repr(align(128))]
struct Shared {
    counter: AtomicU64,
    waiting: AtomicU64,
}

struct Outcome {
    seconds: f64,
    channel_bytes: f64,
    task_bytes: f64,
}

/// Receiver i: takes exactly `events` events, counting each one and checking it for the exit marker.
async fn receive<C: Channel>(mut rx: C::Receiver, events: u64, shared: Arc<Shared>) {
    shared.waiting.fetch_add(1, Ordering::Relaxed);
    for _ in 0..events {
        match C::recv(&mut rx).await {
            Some(received) => {
                shared.counter.fetch_add(1, Ordering::Relaxed);
                if matches!(received, Event::Exit) {
                    return;
                }
            }
            None => return,
        }
    }
}

/// Sender i: sends `events` events; stops early only if the receiver is gone.
async fn send<C: Channel>(mut tx: C::Sender, events: u64, source: Source) {
    for i in 0..events {
        if !C::send(&mut tx, source.make(i)).await {
            return;
        }
    }
}

fn per_item(before: i64, after: i64, count: u64) -> f64 {
    (after - before) as f64 / count as f64
}

/// The scenario: W channels and receivers, then (clock) W senders, until every receiver has finished.
async fn scenario<C: Channel>(
    workers: u64,
    events: u64,
    capacity: usize,
    source: Source,
    shared: Arc<Shared>,
) -> Outcome {
    let mut senders = Vec::with_capacity(workers as usize);
    let mut receivers = Vec::with_capacity(workers as usize);
    let mut receiving = Vec::with_capacity(workers as usize);
    let mut sending = Vec::with_capacity(workers as usize);

    let before = anonymous_resident_bytes();
    for _ in 0..workers {
        let (tx, rx) = C::bounded(capacity);
        senders.push(tx);
        receivers.push(rx);
    }
    let with_channels = anonymous_resident_bytes();
    for rx in receivers {
        receiving.push(tokio::spawn(receive::<C>(rx, events, shared.clone())));
    }
    while shared.waiting.load(Ordering::Relaxed) < workers {
        tokio::task::yield_now().await;
    }
    let with_receivers = anonymous_resident_bytes();

    let start = Instant::now();
    for tx in senders {
        sending.push(tokio::spawn(send::<C>(tx, events, source)));
    }
    for handle in receiving {
        handle.await.unwrap_or_else(|error| fail(&format!("a receiver failed: {error}")));
    }
    let seconds = start.elapsed().as_secs_f64();

    for handle in sending {
        handle.await.unwrap_or_else(|error| fail(&format!("a sender failed: {error}")));
    }
    Outcome {
        seconds,
        channel_bytes: per_item(before, with_channels, workers),
        task_bytes: per_item(with_channels, with_receivers, workers),
    }
}

fn main() {
    let p = parse();
    let source = Source { etype: p.etype, shared: Box::leak(Box::new("x".repeat(p.string_size))) };
    let shared = Arc::new(Shared::default());
    let rt = lab::runtime(p.threads);
    let (workers, events, capacity, counted) = (p.workers, p.events, p.capacity, shared.clone());
    let futures = p.channel == "futures";
    let outcome = rt.block_on(async move {
        let body = if futures {
            tokio::spawn(scenario::<Futures>(workers, events, capacity, source, counted))
        } else {
            tokio::spawn(scenario::<Tokio>(workers, events, capacity, source, counted))
        };
        body.await.unwrap_or_else(|error| fail(&format!("the scenario task failed: {error}")))
    });
    drop(rt);

    let expected = p.workers * p.events;
    let counted = shared.counter.load(Ordering::Relaxed);
    if counted != expected {
        fail(&format!("counted {counted} events, expected W*E = {expected} (lost, extra or exit-marker events)"));
    }
    if !outcome.seconds.is_finite() || outcome.seconds <= 0.0 {
        fail(&format!("elapsed time is not finite and positive: {}", outcome.seconds));
    }
    let program = match (futures, p.threads) {
        (false, 0) => "tokio".to_string(),
        (true, 0) => "tokio-futures".to_string(),
        (false, threads) => format!("tokio-{threads}t"),
        (true, threads) => format!("tokio-futures-{threads}t"),
    };
    println!(
        "{program},{},{},{},{:.6},{:.0},{:.0},{:.0}",
        p.etype_name,
        p.workers,
        p.events,
        outcome.seconds,
        expected as f64 / outcome.seconds,
        outcome.channel_bytes,
        outcome.task_bytes
    );
}
