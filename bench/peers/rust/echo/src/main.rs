//! echo: the tokio server of the `echo` scenario (bench/scenarios.md).
//!
//! Usage: echo --port P
//!
//! The server a tokio user writes: a current_thread runtime with the I/O driver, a `TcpListener`
//! accept loop in `block_on`, one spawned task per connection that reads into its buffer and writes
//! back exactly what it read (`write_all`), with TCP_NODELAY set on every connection.

use std::process::exit;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Bytes one read may take, as in the C servers.
const CHUNK: usize = 16384;

fn fail(why: &str) -> ! {
    eprintln!("echo: {why}");
    exit(1);
}

fn parse_port() -> u16 {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match argv.as_slice() {
        [option, value] if option == "--port" => {
            value.parse().ok().filter(|&port| port != 0).unwrap_or_else(|| fail(&format!("bad port {value}")))
        }
        _ => fail("usage: echo --port P"),
    }
}

/// Sends every chunk it reads straight back, until end of file or an error.
async fn echo(mut stream: TcpStream) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if stream.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

fn main() {
    let port = parse_port();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .unwrap_or_else(|error| fail(&format!("cannot build the tokio runtime: {error}")));
    runtime.block_on(async move {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap_or_else(|error| fail(&format!("bind port {port}: {error}")));
        loop {
            let (stream, _) = listener.accept().await.unwrap_or_else(|error| fail(&format!("accept: {error}")));
            if stream.set_nodelay(true).is_ok() {
                tokio::spawn(echo(stream));
            }
        }
    });
}
