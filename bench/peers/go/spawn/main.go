// Command spawn runs one cell of the `spawn` scenario (bench/scenarios.md) for Go and prints one CSV
// row: impl,threads,case,ops,seconds,ops_per_sec
//
// Usage: spawn --case spawn_join|ping_pong|fanout --threads T --ops N [--work W]
//
// threads sets GOMAXPROCS. The case body runs in a goroutine started by main, which only waits for
// its outcome; the body reads the clock itself.
package main

import (
	"flag"
	"fmt"
	"math"
	"runtime"

	"corio.dev/bench/peers/internal/lab"
)

// A case runs its timed window and its self-check; it returns the elapsed seconds or why it failed.
var cases = map[string]func(ops int, work uint64) (float64, error){
	"spawn_join": spawnJoin,
	"ping_pong":  pingPong,
	"fanout":     fanout,
}

type outcome struct {
	seconds float64
	err     error
}

func main() {
	caseName := flag.String("case", "", "spawn_join, ping_pong or fanout")
	threads := flag.Int("threads", 0, "GOMAXPROCS")
	ops := flag.Int("ops", 0, "tasks (spawn_join, fanout) or round trips (ping_pong)")
	work := flag.Uint64("work", 600_000, "hash rounds per fanout task")
	flag.Parse()

	body, ok := cases[*caseName]
	if !ok {
		lab.Fail("unknown --case %q", *caseName)
	}
	if *threads <= 0 || *ops <= 0 || *work == 0 {
		lab.Fail("--threads, --ops and --work must be positive")
	}
	runtime.GOMAXPROCS(*threads)

	done := make(chan outcome, 1)
	go func() {
		seconds, err := body(*ops, *work)
		done <- outcome{seconds, err}
	}()
	result := <-done
	if result.err != nil {
		lab.Fail("%v", result.err)
	}
	if math.IsNaN(result.seconds) || math.IsInf(result.seconds, 0) || result.seconds <= 0 {
		lab.Fail("elapsed time is not finite and positive: %v", result.seconds)
	}
	fmt.Printf("go,%d,%s,%d,%.6f,%.0f\n", *threads, *caseName, *ops, result.seconds,
		float64(*ops)/result.seconds)
}
