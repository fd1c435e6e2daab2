package main

import "runtime"

// An implementation creates the goroutines of a batch (the timed part of the create phase) and,
// once they are all parked at their first suspension, releases them to run to completion.
type implementation struct {
	create  func(b *batch)
	release func(b *batch)
}

var implementations = map[string]implementation{
	"goroutine":      {create: createYielders, release: func(b *batch) { close(b.gate) }},
	"goroutine-chan": {create: createPongers, release: pingRounds},
}

// goroutine: each goroutine parks on the gate, then calls runtime.Gosched() once per switch.
func createYielders(b *batch) {
	for i := 0; i < b.n; i++ {
		go yielder(b, i)
	}
}

func yielder(b *batch, index int) {
	b.started.Done()
	<-b.gate
	var switches uint64
	for i := 0; i < b.switchesEach; i++ {
		switches++
		runtime.Gosched()
	}
	b.finish(index, switches)
}

// goroutine-chan: each goroutine owns a ping and a pong channel, both unbuffered; one switch is
// main sending a ping and receiving the pong.
func createPongers(b *batch) {
	for i := 0; i < b.n; i++ {
		b.pings[i] = make(chan struct{})
		b.pongs[i] = make(chan struct{})
		go ponger(b, i)
	}
}

func ponger(b *batch, index int) {
	ping, pong := b.pings[index], b.pongs[index]
	b.started.Done()
	var switches uint64
	for i := 0; i < b.switchesEach; i++ {
		<-ping
		switches++
		pong <- struct{}{}
	}
	b.finish(index, switches)
}

func pingRounds(b *batch) {
	for round := 0; round < b.switchesEach; round++ {
		for i := 0; i < b.n; i++ {
			b.pings[i] <- struct{}{}
			<-b.pongs[i]
		}
	}
}
