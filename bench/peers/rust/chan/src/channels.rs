//! The two channel families the Rust rows use, behind one small trait so the scenario is written once:
//! `tokio::sync::mpsc` (rows `tokio`, `tokio-1t`) and `futures::channel::mpsc` (row `tokio-futures`).

use std::future::Future;

use futures::{SinkExt, StreamExt};

use crate::event::Event;

/// A bounded channel of events: make one, send into it, receive from it.
pub trait Channel: 'static {
    type Sender: Send + 'static;
    type Receiver: Send + 'static;

    /// A channel of capacity `capacity`.
    fn bounded(capacity: usize) -> (Self::Sender, Self::Receiver);
    /// Sends `event`, waiting while the channel is full; false if the receiver is gone.
    fn send(tx: &mut Self::Sender, event: Event) -> impl Future<Output = bool> + Send;
    /// The next event, or None once every sender is gone and the channel is drained.
    fn recv(rx: &mut Self::Receiver) -> impl Future<Output = Option<Event>> + Send;
}

/// `tokio::sync::mpsc::channel`.
pub struct Tokio;

impl Channel for Tokio {
    type Sender = tokio::sync::mpsc::Sender<Event>;
    type Receiver = tokio::sync::mpsc::Receiver<Event>;

    fn bounded(capacity: usize) -> (Self::Sender, Self::Receiver) {
        tokio::sync::mpsc::channel(capacity)
    }
    async fn send(tx: &mut Self::Sender, event: Event) -> bool {
        tx.send(event).await.is_ok()
    }
    async fn recv(rx: &mut Self::Receiver) -> Option<Event> {
        rx.recv().await
    }
}

/// `futures::channel::mpsc::channel`. Its capacity is the given buffer plus one slot per sender, so
/// with its one sender a channel made with Q holds Q + 1 events (bench/scenarios.md, fairness notes).
pub struct Futures;

impl Channel for Futures {
    type Sender = futures::channel::mpsc::Sender<Event>;
    type Receiver = futures::channel::mpsc::Receiver<Event>;

    fn bounded(capacity: usize) -> (Self::Sender, Self::Receiver) {
        futures::channel::mpsc::channel(capacity)
    }
    async fn send(tx: &mut Self::Sender, event: Event) -> bool {
        tx.send(event).await.is_ok()
    }
    async fn recv(rx: &mut Self::Receiver) -> Option<Event> {
        rx.next().await
    }
}
