//! The three cases of the `spawn` scenario. Each runs its timed window and its self-check, and
//! returns the elapsed seconds or why the check failed.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Notify;

/// W: hash rounds per fanout task (about 1 ms on the lab's VM).
pub const WORK_ROUNDS: u64 = 600_000;

type Outcome = Result<f64, String>;

/// spawn_join: spawn N tasks returning 1 + i % 7, then await every JoinHandle in spawn order.
pub async fn spawn_join(n: u64) -> Outcome {
    let mut handles = Vec::with_capacity(n as usize);
    let start = Instant::now();
    for i in 0..n {
        handles.push(tokio::spawn(async move { 1 + i % 7 }));
    }
    let mut sum = 0u64;
    for handle in handles {
        sum += handle.await.map_err(|error| format!("spawn_join: a child failed: {error}"))?;
    }
    let seconds = start.elapsed().as_secs_f64();

    let expected: u64 = (0..n).map(|i| 1 + i % 7).sum();
    if sum != expected {
        return Err(format!("spawn_join: sum {sum}, expected {expected}"));
    }
    Ok(seconds)
}

/// The state the two ping_pong tasks share. `Notify::notify_one` keeps one permit when nobody
/// waits: an auto-reset event.
struct Court {
    ping: Notify,
    pong: Notify,
    ball: AtomicU64,
}

/// ping_pong: two tasks wake each other through two Notify events for R round trips; each returns
/// the number of rounds in which it saw the expected ball.
pub async fn ping_pong(rounds: u64) -> Outcome {
    let court = Arc::new(Court { ping: Notify::new(), pong: Notify::new(), ball: AtomicU64::new(0) });
    let start = Instant::now();
    let ponger = tokio::spawn(ponger(court.clone(), rounds));
    let pinger = tokio::spawn(pinger(court, rounds));
    let pong_good = ponger.await.map_err(|error| format!("ping_pong: ponger failed: {error}"))?;
    let ping_good = pinger.await.map_err(|error| format!("ping_pong: pinger failed: {error}"))?;
    let seconds = start.elapsed().as_secs_f64();
    if pong_good != rounds || ping_good != rounds {
        return Err(format!("ping_pong: good rounds ponger {pong_good}, pinger {ping_good}, expected {rounds}"));
    }
    Ok(seconds)
}

async fn pinger(court: Arc<Court>, rounds: u64) -> u64 {
    let mut good = 0;
    for i in 0..rounds {
        court.ball.store(2 * i + 1, Ordering::Release);
        court.ping.notify_one();
        court.pong.notified().await;
        good += u64::from(court.ball.load(Ordering::Acquire) == 2 * i + 2);
    }
    good
}

async fn ponger(court: Arc<Court>, rounds: u64) -> u64 {
    let mut good = 0;
    for i in 0..rounds {
        court.ping.notified().await;
        good += u64::from(court.ball.load(Ordering::Acquire) == 2 * i + 1);
        court.ball.store(2 * i + 2, Ordering::Release);
        court.pong.notify_one();
    }
    good
}

/// fanout: F tasks each compute work(seed, W); joined in spawn order and compared with a reference
/// computed before the clock.
pub async fn fanout(tasks: u64, rounds: u64) -> Outcome {
    let seed = black_box(tasks);
    let reference = work(seed, rounds);
    let mut handles = Vec::with_capacity(tasks as usize);
    let start = Instant::now();
    for _ in 0..tasks {
        handles.push(tokio::spawn(async move { work(seed, rounds) }));
    }
    let (mut wrong, mut joined) = (0u64, 0u64);
    for handle in handles {
        let value = handle.await.map_err(|error| format!("fanout: a task failed: {error}"))?;
        wrong += u64::from(value != reference);
        joined += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    if wrong != 0 || joined != tasks {
        return Err(format!("fanout: {wrong} of {joined} results differ from the reference"));
    }
    Ok(seconds)
}

/// The scenario's serial integer hash: W rounds of xor-shift, multiply, add (wrapping).
fn work(mut x: u64, rounds: u64) -> u64 {
    for _ in 0..rounds {
        x ^= x >> 29;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    }
    x
}
