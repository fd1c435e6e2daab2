// Command coro runs one cell of the `coro` scenario (bench/scenarios.md) for a Go peer and prints one
// CSV row: impl,coroutines,switches,create_ns,switch_ns,bytes_per_coroutine
//
// Usage: coro --impl goroutine|goroutine-chan --coroutines N --switches-each S [--quick]
package main

import (
	"flag"
	"fmt"
	"math"
	"runtime"

	"corio.dev/bench/peers/internal/lab"
)

func main() {
	implName := flag.String("impl", "", "goroutine or goroutine-chan")
	coroutines := flag.Int("coroutines", 0, "number of goroutines N")
	switchesEach := flag.Int("switches-each", 0, "switches per goroutine S")
	quick := flag.Bool("quick", false, "fewer in-process create batches")
	flag.Parse()
	runtime.GOMAXPROCS(1)

	impl, ok := implementations[*implName]
	if !ok {
		lab.Fail("unknown --impl %q", *implName)
	}
	if *coroutines <= 0 || *switchesEach <= 0 {
		lab.Fail("--coroutines and --switches-each are required")
	}
	n, s := *coroutines, *switchesEach

	// Phase order fixed by the spec: memory first, on a fresh heap.
	bytes := residentBytesPerGoroutine(impl, max(n, 1000))
	minBatches, minCreated := 7, 20000
	if *quick {
		minBatches, minCreated = 3, 2000
	}
	create := createNs(impl, n, max(minBatches, (minCreated+n-1)/n))
	switchNs := switchNs(impl, n, s)
	for _, v := range []float64{create, switchNs, bytes} {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			lab.Fail("a measured value is negative or not finite")
		}
	}
	fmt.Printf("%s,%d,%d,%.2f,%.3f,%.0f\n", *implName, n, n*s, create, switchNs, bytes)
}
