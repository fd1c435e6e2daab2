package main

import (
	"fmt"
	"time"
)

// spawnJoin: spawn N goroutines, each returning 1 + i%7 through its own capacity-1 channel (the
// join handle), then receive from every handle in spawn order.
func spawnJoin(n int, _ uint64) (float64, error) {
	handles := make([]chan int, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		handle := make(chan int, 1)
		handles[i] = handle
		go child(i, handle)
	}
	var sum uint64
	for _, handle := range handles {
		sum += uint64(<-handle)
	}
	seconds := time.Since(start).Seconds()

	var expected uint64
	for i := 0; i < n; i++ {
		expected += uint64(1 + i%7)
	}
	if sum != expected {
		return 0, fmt.Errorf("spawn_join: sum %d, expected %d", sum, expected)
	}
	return seconds, nil
}

func child(i int, handle chan<- int) {
	handle <- 1 + i%7
}

// pingPong: two goroutines pass the ball through two unbuffered channels (Go's equivalent of a pair
// of auto-reset events) for R round trips; each counts the rounds in which it saw the expected ball.
func pingPong(rounds int, _ uint64) (float64, error) {
	ping := make(chan uint64)
	pong := make(chan uint64)
	pongerGood := make(chan int, 1)
	pingerGood := make(chan int, 1)
	start := time.Now()
	go ponger(rounds, ping, pong, pongerGood)
	go pinger(rounds, ping, pong, pingerGood)
	a, b := <-pongerGood, <-pingerGood
	seconds := time.Since(start).Seconds()
	if a != rounds || b != rounds {
		return 0, fmt.Errorf("ping_pong: good rounds ponger %d, pinger %d, expected %d", a, b, rounds)
	}
	return seconds, nil
}

func pinger(rounds int, ping chan<- uint64, pong <-chan uint64, handle chan<- int) {
	good := 0
	for i := 0; i < rounds; i++ {
		ping <- uint64(2*i + 1)
		if <-pong == uint64(2*i+2) {
			good++
		}
	}
	handle <- good
}

func ponger(rounds int, ping <-chan uint64, pong chan<- uint64, handle chan<- int) {
	good := 0
	for i := 0; i < rounds; i++ {
		if <-ping == uint64(2*i+1) {
			good++
		}
		pong <- uint64(2*i + 2)
	}
	handle <- good
}

// fanout: F goroutines each compute work(seed, W); the results are joined in spawn order and
// compared with a reference computed before the clock.
func fanout(tasks int, rounds uint64) (float64, error) {
	seed := uint64(tasks)
	reference := work(seed, rounds)
	handles := make([]chan uint64, tasks)
	start := time.Now()
	for i := 0; i < tasks; i++ {
		handle := make(chan uint64, 1)
		handles[i] = handle
		go func() { handle <- work(seed, rounds) }()
	}
	wrong, joined := 0, 0
	for _, handle := range handles {
		if <-handle != reference {
			wrong++
		}
		joined++
	}
	seconds := time.Since(start).Seconds()
	if wrong != 0 || joined != tasks {
		return 0, fmt.Errorf("fanout: %d of %d results differ from the reference", wrong, joined)
	}
	return seconds, nil
}

// work is the scenario's serial integer hash: W rounds of xor-shift, multiply, add (wrapping).
func work(x, rounds uint64) uint64 {
	for k := uint64(0); k < rounds; k++ {
		x ^= x >> 29
		x *= 0xBF58476D1CE4E5B9
		x += 0x9E3779B97F4A7C15
	}
	return x
}
