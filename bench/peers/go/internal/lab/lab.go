// Package lab holds what the Go peers of the lab share: the failed-self-check exit and the resident
// memory reading of bench/scenarios.md.
package lab

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Fail prints why the run failed its self-check to stderr and exits with status 1, so the run
// prints no row.
func Fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "self-check failed: "+format+"\n", args...)
	os.Exit(1)
}

// AnonymousResidentBytes reads (resident - shared) pages of /proc/self/statm: file-backed pages
// (code faulted in on first use) are left out.
func AnonymousResidentBytes() int64 {
	raw, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		Fail("cannot read /proc/self/statm: %v", err)
	}
	fields := strings.Fields(string(raw))
	if len(fields) < 3 {
		Fail("cannot parse /proc/self/statm")
	}
	resident, err1 := strconv.ParseInt(fields[1], 10, 64)
	shared, err2 := strconv.ParseInt(fields[2], 10, 64)
	if err1 != nil || err2 != nil {
		Fail("cannot parse /proc/self/statm: %q", raw)
	}
	return (resident - shared) * int64(os.Getpagesize())
}
