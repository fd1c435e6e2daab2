// Command chan runs one cell of the `chan` scenario (bench/scenarios.md) for Go and prints one CSV
// row: program,etype,worker,event,time,speed,channel_bytes,task_bytes
//
// Usage: chan -w W -e E [-q Q] [-t int|str|str_ptr|str_clone] [-s S] [-threads T]
//
// threads 0 (the default) leaves GOMAXPROCS at Go's default, one per core (program `go`); threads
// T > 0 sets GOMAXPROCS(T) (program `go-1t` for T = 1). The garbage collector keeps its defaults.
package main

import (
	"flag"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"corio.dev/bench/peers/internal/lab"
)

// event is Go's sum type: an interface value holding one of the four types below.
type event any

type (
	intEvent    int64
	strEvent    string
	strPtrEvent *string
	exitEvent   struct{} // the exit marker every receiver checks for; never sent
)

// eventType is the -t option, resolved from its name once before the clock, so a sender's make
// switches on an integer as the C++ and Rust peers do, not on the name string.
type eventType int

const (
	intType eventType = iota
	strType
	strPtrType
	strCloneType
)

// eventTypes maps each -t name to its eventType.
var eventTypes = map[string]eventType{"int": intType, "str": strType, "str_ptr": strPtrType, "str_clone": strCloneType}

// source makes the events senders send; shared is the one string of S bytes, built before the clock.
type source struct {
	etype  eventType
	shared string
}

// make returns the event with sequence number i: an int carries i; str is Go's ordinary string
// assignment (it shares the bytes); str_ptr points at the shared string; str_clone copies its bytes.
func (s *source) make(i int) event {
	switch s.etype {
	case intType:
		return intEvent(i)
	case strType:
		return strEvent(s.shared)
	case strPtrType:
		return strPtrEvent(&s.shared)
	default:
		return strEvent(strings.Clone(s.shared))
	}
}

// shared is what every receiver touches: the scenario's counter, and how many receivers reached
// their first receive (it only gates the start of the clock). The counter, written by every event,
// sits on lines of its own, as corio's does: 128 bytes of padding either side keep the 128-byte
// aligned pair of lines around it free of anything else, whatever the object's address. Without
// them the 32-byte struct shared a size class, and so likely a cache line, with the source every
// sender reads per event (allocated just before it), and senders missed on the line receivers on
// another core kept taking away.
type shared struct {
	_       [128]byte
	counter atomic.Int64
	_       [120]byte
	waiting atomic.Int64
	done    sync.WaitGroup
}

// receive takes exactly `events` events from ch, counting each one and checking it for the exit marker.
func receive(ch <-chan event, events int, state *shared) {
	defer state.done.Done()
	state.waiting.Add(1)
	for i := 0; i < events; i++ {
		received := <-ch
		state.counter.Add(1)
		if _, exit := received.(exitEvent); exit {
			return
		}
	}
}

// send sends `events` events into ch.
func send(ch chan<- event, events int, src *source) {
	for i := 0; i < events; i++ {
		ch <- src.make(i)
	}
}

func main() {
	workers := flag.Int("w", 0, "W: channels, receivers and senders")
	events := flag.Int("e", 0, "E: events per sender and receiver")
	capacity := flag.Int("q", 256, "Q: channel capacity")
	etype := flag.String("t", "int", "event type: int, str, str_ptr or str_clone")
	size := flag.Int("s", 16, "S: bytes in the shared string")
	threads := flag.Int("threads", 0, "GOMAXPROCS; 0 keeps Go's default")
	flag.Parse()
	kind, known := eventTypes[*etype]
	if !known {
		lab.Fail("unknown -t %q (int, str, str_ptr or str_clone)", *etype)
	}
	if *workers <= 0 || *events <= 0 || *capacity <= 0 || *size < 0 || *threads < 0 {
		lab.Fail("-w, -e and -q must be positive; -s and -threads not negative")
	}
	program := "go"
	if *threads > 0 {
		runtime.GOMAXPROCS(*threads)
		program = fmt.Sprintf("go-%dt", *threads)
	}
	w, e := *workers, *events
	src := &source{kind, strings.Repeat("x", *size)}
	state := &shared{}

	channels := make([]chan event, w)
	before := lab.AnonymousResidentBytes()
	for i := range channels {
		channels[i] = make(chan event, *capacity)
	}
	withChannels := lab.AnonymousResidentBytes()
	state.done.Add(w)
	for _, ch := range channels {
		go receive(ch, e, state)
	}
	for state.waiting.Load() < int64(w) {
		runtime.Gosched()
	}
	withReceivers := lab.AnonymousResidentBytes()

	start := time.Now()
	for _, ch := range channels {
		go send(ch, e, src)
	}
	state.done.Wait()
	seconds := time.Since(start).Seconds()

	expected := int64(w) * int64(e)
	if counted := state.counter.Load(); counted != expected {
		lab.Fail("counted %d events, expected W*E = %d (lost, extra or exit-marker events)", counted, expected)
	}
	if math.IsNaN(seconds) || math.IsInf(seconds, 0) || seconds <= 0 {
		lab.Fail("elapsed time is not finite and positive: %v", seconds)
	}
	fmt.Printf("%s,%s,%d,%d,%.6f,%.0f,%.0f,%.0f\n", program, *etype, w, e, seconds, float64(expected)/seconds,
		float64(withChannels-before)/float64(w), float64(withReceivers-withChannels)/float64(w))
}
