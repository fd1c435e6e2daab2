package main

import (
	"sort"
	"sync"
	"time"

	"corio.dev/bench/peers/internal/lab"
)

// A batch is the goroutines of one phase. Each goroutine counts its switches locally and stores the
// total in its own slot when it finishes; done.Wait() orders those stores before main reads them.
type batch struct {
	n, switchesEach int
	gate            chan struct{}
	pings, pongs    []chan struct{}
	started, done   sync.WaitGroup
	switches        []uint64
	finished        []bool
}

func newBatch(n, switchesEach int) *batch {
	b := &batch{n: n, switchesEach: switchesEach, gate: make(chan struct{}),
		pings: make([]chan struct{}, n), pongs: make([]chan struct{}, n),
		switches: make([]uint64, n), finished: make([]bool, n)}
	b.started.Add(n)
	b.done.Add(n)
	return b
}

func (b *batch) finish(index int, switches uint64) {
	b.switches[index] = switches
	b.finished[index] = true
	b.done.Done()
}

// check fails the run unless every goroutine finished after exactly switchesEach switches.
func (b *batch) check(phase string) {
	for i := 0; i < b.n; i++ {
		if !b.finished[i] || b.switches[i] != uint64(b.switchesEach) {
			lab.Fail("%s: goroutine %d finished=%v after %d switches, expected %d", phase, i, b.finished[i],
				b.switches[i], b.switchesEach)
		}
	}
}

// run creates a batch, waits until every goroutine is parked at its first suspension, calls probe,
// then times the release and the run to completion.
func run(impl implementation, n, switchesEach int, probe func()) time.Duration {
	b := newBatch(n, switchesEach)
	impl.create(b)
	b.started.Wait()
	probe()
	start := time.Now()
	impl.release(b)
	b.done.Wait()
	elapsed := time.Since(start)
	b.check("run")
	return elapsed
}

func residentBytesPerGoroutine(impl implementation, count int) float64 {
	before := lab.AnonymousResidentBytes()
	var after int64
	run(impl, count, 1, func() { after = lab.AnonymousResidentBytes() })
	return float64(after-before) / float64(count)
}

func createNs(impl implementation, n, batches int) float64 {
	overhead := clockOverheadNs()
	samples := make([]float64, 0, batches)
	for k := 0; k < batches; k++ {
		b := newBatch(n, 1)
		start := time.Now()
		impl.create(b)
		elapsed := time.Since(start)
		samples = append(samples, float64(elapsed.Nanoseconds())-overhead)
		b.started.Wait()
		impl.release(b)
		b.done.Wait()
		b.check("create")
	}
	return max(0, meanWithoutOutliers(samples)) / float64(n)
}

func switchNs(impl implementation, n, switchesEach int) float64 {
	elapsed := run(impl, n, switchesEach, func() {})
	return float64(elapsed.Nanoseconds()) / float64(n*switchesEach)
}

// meanWithoutOutliers is the mean of values without those above twice the median plus 100 ns (an
// interrupt, a page fault), and sorts them. The clock advances in steps of about 10 ns on the lab's
// VMs: the mean keeps what each step's share says, where a median or an interquartile mean sticks to
// the step that holds most samples (bench/cpp/common/clock.hpp).
func meanWithoutOutliers(values []float64) float64 {
	sort.Float64s(values)
	limit := 2*values[len(values)/2] + 100
	sum, kept := 0.0, 0
	for _, v := range values {
		if v > limit {
			break
		}
		sum += v
		kept++
	}
	return sum / float64(kept)
}

// clockOverheadNs is the cost of an empty timed window, to subtract from tiny windows.
func clockOverheadNs() float64 {
	samples := make([]float64, 10000)
	for i := range samples {
		start := time.Now()
		samples[i] = float64(time.Since(start).Nanoseconds())
	}
	return meanWithoutOutliers(samples)
}
