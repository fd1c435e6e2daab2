//! The event (Rust's sum type, an enum) and how senders make them.

/// One event: an integer, an owned string, a reference to the one shared string, or the exit marker.
/// Receivers only count events and check for the marker, as in the original, so the payloads are
/// carried (made, moved, dropped) but never read.
#[allow(dead_code)]
pub enum Event {
    Int(i64),
    Str(String),
    StrPtr(&'static String),
    /// The exit marker every receiver checks for; never sent.
    Exit,
}

/// The four event types of the scenario (`-t`).
#[derive(Clone, Copy, PartialEq)]
pub enum EventType {
    Int,
    Str,
    StrPtr,
    StrClone,
}

impl EventType {
    pub fn parse(name: &str) -> Option<EventType> {
        match name {
            "int" => Some(EventType::Int),
            "str" => Some(EventType::Str),
            "str_ptr" => Some(EventType::StrPtr),
            "str_clone" => Some(EventType::StrClone),
            _ => None,
        }
    }
}

/// Makes the events senders send. `shared` is the one string of S bytes, built before the clock and
/// kept for the whole process.
#[derive(Clone, Copy)]
pub struct Source {
    pub etype: EventType,
    pub shared: &'static String,
}

impl Source {
    /// The event with sequence number `i`: an int carries i; str is Rust's ordinary string copy
    /// (`clone`, which copies the bytes); str_ptr refers to the shared string; str_clone copies the
    /// bytes explicitly (the same work as str in Rust).
    pub fn make(&self, i: u64) -> Event {
        match self.etype {
            EventType::Int => Event::Int(i as i64),
            EventType::Str => Event::Str(self.shared.clone()),
            EventType::StrPtr => Event::StrPtr(self.shared),
            EventType::StrClone => Event::Str(String::from(self.shared.as_str())),
        }
    }
}
